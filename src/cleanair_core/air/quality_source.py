"""The air-quality port: concentrations for a batch of (point, time) samples."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import attrs

from cleanair_core.air.pollutants import Concentrations
from cleanair_core.geo import Point

# NumPy is imported by the functions that compute: the operator CLI's commands import this
# module and start faster without NumPy (tests/cleanair_runtime/test_cli_startup.py).
if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt


@attrs.frozen
class Sample:
    """One place at one instant; `at` is timezone-aware (UTC by convention)."""

    point: Point
    at: datetime


class AirQualitySource(Protocol):
    """Where concentrations come from (the embedded model, Open-Meteo, ...).

    `concentrations` answers one `Concentrations` per sample, in order, with None (or an
    absent key) for a pollutant the source has no value for at that place and hour. It raises
    `SourceUnavailable` when the source cannot answer at all; the caller is then not charged.
    """

    #: Seconds between successive values of the source (an hourly source says 3600); the
    #: score's `ttl` tells clients to poll no more often than this.
    update_interval: int

    async def concentrations(self, samples: Sequence[Sample]) -> list[Concentrations]: ...


@runtime_checkable
class CachingAir(AirQualitySource, Protocol):
    """A source that holds some answers of an upstream service (Open-Meteo's, say), or wraps
    one that does: it tells whether a call would wait on the upstream."""

    def answers_at_once(self, samples: Sequence[Sample]) -> bool:
        """Whether `concentrations(samples)` would answer now from what it holds, with no
        request upstream (a value may still expire before it is asked: then it is fetched)."""
        ...


def answers_at_once(source: AirQualitySource, samples: Sequence[Sample]) -> bool:
    """Whether `source` would answer `samples` with no request upstream: a source that says
    nothing of it (`CachingAir`) is taken to wait."""
    # Not isinstance: against a runtime-checkable protocol it costs about 15 µs, on the loop.
    answers = getattr(source, "answers_at_once", None)
    return answers is not None and bool(answers(samples))


@runtime_checkable
class GriddedAir(AirQualitySource, Protocol):
    """A source that computes its values (no I/O), and so can also answer many points at one
    time as one array: what a plan's node air asks of it, off the event loop."""

    def air_at_hour(
        self, lats: npt.NDArray[np.float64], lons: npt.NDArray[np.float64], hour: datetime
    ) -> npt.NDArray[np.float64]:
        """One row per point, one column per `SCORED` pollutant (NaN where unknown): the
        values `concentrations` gives for those points at `hour`."""
        ...


@runtime_checkable
class AirAtTimes(AirQualitySource, Protocol):
    """A source that computes its values and can answer many points, each at its own time,
    as one array: what a route's enrichment asks for its waypoints (`enrich_routes`)."""

    def air_at_times(
        self,
        lats: npt.NDArray[np.float64],
        lons: npt.NDArray[np.float64],
        timestamps: npt.NDArray[np.float64],
    ) -> npt.NDArray[np.float64] | None:
        """One row per point, one column per `SCORED` pollutant (NaN where unknown): the
        values `concentrations` gives, bit for bit, for each point at its time (POSIX
        seconds, as `datetime.timestamp` gives them). None: not this source (a wrapper whose
        inner source cannot); ask `concentrations`. CPU work: a caller with many points
        runs it off the event loop. A source that must read something first (fusion: the
        observations) has `async def ready_at_times(timestamps)`, awaited before."""
        ...

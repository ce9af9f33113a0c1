"""Screening station observations at intake: what is held back before it is stored.

A stored observation is fused into the air of every point within hundreds of kilometres
(`cleanair_core.air.fusion`): one absurd value (a 1e300 from a broken row, a sensor's
error code, ng/m³ labelled µg/m³) or one dated ahead of the clock would be served as a
measurement. Both intake paths, the file import (`use_cases.air.import_observations`) and
the live poller (`cleanair_sources.openaq`), hold such readings back with the same rule:
not stored, not fused, and counted by reason, never fatal to the rest. The bounds and their
sources are in docs/science.md, "Screening observations".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from enum import StrEnum
from types import MappingProxyType

import attrs

from cleanair_core.air.observations import Observation, ObservationsWritten
from cleanair_core.air.pollutants import Pollutant

#: The highest hourly mean (µg/m³) accepted per pollutant: above the highest hourly means
#: ever measured (dust storms, smog episodes, wildfire smoke), with a margin, so a real
#: extreme is kept and an impossible value is not.
UPPER_BOUNDS: Mapping[Pollutant, float] = MappingProxyType(
    {
        Pollutant.PM25: 5_000.0,
        Pollutant.PM10: 20_000.0,
        Pollutant.NO2: 2_000.0,
        Pollutant.O3: 2_000.0,
    }
)


class HeldBack(StrEnum):
    """Why an observation was held back (the metric's `reason` label)."""

    OVER_BOUND = "over_bound"
    FUTURE = "future"


@attrs.frozen
class HeldBackCounts:
    """Observations held back, by reason."""

    over_bound: int = 0
    future: int = 0

    @property
    def total(self) -> int:
        return self.over_bound + self.future

    def __add__(self, other: HeldBackCounts) -> HeldBackCounts:
        return HeldBackCounts(self.over_bound + other.over_bound, self.future + other.future)

    def count(self, reason: HeldBack) -> int:
        """How many were held back for `reason`."""
        return self.over_bound if reason is HeldBack.OVER_BOUND else self.future


def held_back(observation: Observation, now: datetime) -> HeldBack | None:
    """Why `observation` must not be stored at `now`, or None when it may be. An hour that
    ends at `now` exactly has been measured; one that ends later has not. A pollutant with
    no bound (not one stations report) is left to `validate_observations` to refuse."""
    bound = UPPER_BOUNDS.get(observation.pollutant)
    if bound is not None and observation.value > bound:
        return HeldBack.OVER_BOUND
    if observation.hour_end > now:
        return HeldBack.FUTURE
    return None


def screen_observations(
    observations: Iterable[Observation], now: datetime
) -> tuple[list[Observation], HeldBackCounts]:
    """The observations that may be stored at `now`, in their order, and how many were held
    back by reason (`held_back`)."""
    kept: list[Observation] = []
    over_bound = future = 0
    for observation in observations:
        reason = held_back(observation, now)
        if reason is None:
            kept.append(observation)
        elif reason is HeldBack.OVER_BOUND:
            over_bound += 1
        else:
            future += 1
    return kept, HeldBackCounts(over_bound, future)


@attrs.frozen
class ObservationImport:
    """What an import of observations did: the stations given, what writing the kept
    observations did, and how many were held back by reason."""

    stations: int
    written: ObservationsWritten
    held_back: HeldBackCounts = attrs.Factory(HeldBackCounts)

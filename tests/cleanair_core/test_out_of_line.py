"""Fusion sets aside a stored reading wildly out of line with its neighbours and its own
last day (`cleanair_core.air.screening.in_line`), counts it and never fuses it."""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cleanair_core.air.fused_air import FusedAir
from cleanair_core.air.observations import Observation, Station
from cleanair_core.air.pollutants import SCORED, Concentrations, Pollutant
from cleanair_core.air.quality_source import Sample
from cleanair_core.air.screening import OUT_OF_LINE_FACTOR, in_line
from cleanair_core.geo import Point
from cleanair_core.metrics import NoMetrics
from cleanair_storage.memory import MemoryStore

HOUR_END = datetime(2026, 3, 10, 9, 0, tzinfo=UTC)
CENTRE = Point(60.17, 24.94)
NO2 = Pollutant.NO2


def east(metres: float) -> Point:
    return Point(CENTRE.lat, CENTRE.lon + metres / (111_195.0 * math.cos(math.radians(60.17))))


STATIONS = {f"s:{i}": Station(f"s:{i}", f"s {i}", east(3_000.0 * i)) for i in range(5)}


def hour_of(values: Sequence[float], end: datetime = HOUR_END) -> list[Observation]:
    return [Observation(f"s:{i}", NO2, end, v) for i, v in enumerate(values)]


def history(values: Sequence[float], hours: int = 24) -> list[Observation]:
    return [
        o for back in range(1, hours + 1) for o in hour_of(values, HOUR_END - timedelta(hours=back))
    ]


def test_a_jump_out_of_line_with_neighbours_and_its_own_day_is_set_aside() -> None:
    hour = hour_of([30.0, 28.0, 1_500.0, 31.0, 29.0])
    kept = in_line(hour, history([30.0, 28.0, 27.0, 31.0, 29.0]), STATIONS)
    assert [o.station_id for o in kept] == ["s:0", "s:1", "s:3", "s:4"]


def test_a_reading_that_follows_its_own_rise_is_kept() -> None:
    """A local episode: far from its neighbours, but its own last hours were high too."""
    hour = hour_of([30.0, 28.0, 1_500.0, 31.0, 29.0])
    kept = in_line(hour, history([30.0, 28.0, 1_200.0, 31.0, 29.0]), STATIONS)
    assert len(kept) == 5


def test_a_reading_its_neighbours_share_is_kept() -> None:
    """A regional episode: every station jumps at once."""
    hour = hour_of([900.0, 950.0, 1_500.0, 1_000.0, 880.0])
    kept = in_line(hour, history([30.0, 28.0, 27.0, 31.0, 29.0]), STATIONS)
    assert len(kept) == 5


def test_a_dead_sensor_at_zero_among_busy_neighbours_is_set_aside() -> None:
    hour = hour_of([80.0, 75.0, 0.0, 90.0, 85.0])
    kept = in_line(hour, history([80.0, 75.0, 70.0, 90.0, 85.0]), STATIONS)
    assert "s:2" not in {o.station_id for o in kept}


def test_nothing_to_judge_by_keeps_the_reading() -> None:
    lone = {"s:0": STATIONS["s:0"]}
    assert len(in_line(hour_of([1_500.0]), [], lone)) == 1


@given(
    values=st.lists(st.floats(0.0, 2_000.0), min_size=1, max_size=5),
    scale=st.floats(1.0 / (0.99 * OUT_OF_LINE_FACTOR), 0.99 * OUT_OF_LINE_FACTOR),
)
def test_a_reading_within_the_factor_of_its_own_day_is_never_set_aside(
    values: list[float], scale: float
) -> None:
    """Whatever its neighbours read, a reading within the factor of its own last day is
    kept: both references must be exceeded."""
    hour = hour_of(values)
    kept = in_line(hour, history([v * scale for v in values]), STATIONS)
    assert kept == tuple(hour)


class Flat:
    update_interval = 3600

    async def concentrations(self, samples: Sequence[Sample]) -> list[Concentrations]:
        return [dict.fromkeys(SCORED, 30.0) for _ in samples]


class CountedAside(NoMetrics):
    def __init__(self) -> None:
        self.aside: list[tuple[str, int]] = []

    def observations_set_aside(self, pollutant: str, count: int) -> None:
        self.aside.append((pollutant, count))


def test_the_fused_air_never_fuses_a_reading_set_aside_and_counts_it_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="cleanair.fusion")
    store = MemoryStore()
    store.put_stations(STATIONS.values())
    store.put_observations(history([30.0, 28.0, 27.0, 31.0, 29.0]))
    store.put_observations(hour_of([30.0, 28.0, 1_900.0, 31.0, 29.0]))
    metrics = CountedAside()
    source = FusedAir(Flat(), store, metrics=metrics)
    broken = STATIONS["s:2"].point
    for _ in range(2):
        [air] = asyncio.run(source.concentrations([Sample(broken, HOUR_END)]))
        assert air[NO2] == pytest.approx(30.0, abs=5.0)  # its neighbours' air, not 1,900
    explained = asyncio.run(source.explain(broken, HOUR_END))[NO2]
    assert "s:2" not in {s.id for s in explained.stations}
    assert metrics.aside == [("no2", 1)]
    [record] = [r for r in caplog.records if "set aside" in r.getMessage()]
    assert getattr(record, "count", None) == 1
    assert "1900" not in record.getMessage()
    assert np.isfinite(air[NO2] or math.nan)

"""The cells' air kept for the hour across a worker's claims (`alerts.air_cache`)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from cleanair_core.air.pollutants import Concentrations, Pollutant
from cleanair_core.air.quality_source import Sample
from cleanair_core.alerts.air_cache import CellAirCache
from cleanair_core.alerts.evaluation import Cell, air_hours, fetch_cell_air

NOW = datetime(2026, 11, 24, 9, 7, tzinfo=UTC)
A, B = Cell(6017, 2494), Cell(6018, 2494)


class Counting:
    """NO2 rising with each call, so a kept answer shows; remembers the cells asked."""

    update_interval = 3600

    def __init__(self) -> None:
        self.asked: list[set[tuple[float, float]]] = []

    async def concentrations(self, samples: Sequence[Sample]) -> list[Concentrations]:
        self.asked.append({(s.point.lat, s.point.lon) for s in samples})
        return [{Pollutant.NO2: float(len(self.asked))} for _ in samples]


def cells_of(asked: set[tuple[float, float]]) -> set[Cell]:
    return {Cell(round(lat * 100), round(lon * 100)) for lat, lon in asked}


def test_a_cell_is_asked_once_an_hour_whatever_the_claims() -> None:
    source, cache = Counting(), CellAirCache()
    first = asyncio.run(cache.air(source, {A: False}, NOW))
    later = NOW + timedelta(minutes=20)
    second = asyncio.run(cache.air(source, {A: False, B: False}, later))
    assert [cells_of(asked) for asked in source.asked] == [{A}, {B}]
    assert second[A] == first[A]  # kept, not asked again
    assert second[B].values[Pollutant.NO2][0] == 2.0


def test_a_cell_kept_without_the_forecast_is_asked_again_for_it() -> None:
    source, cache = Counting(), CellAirCache()
    asyncio.run(cache.air(source, {A: False}, NOW))
    air = asyncio.run(cache.air(source, {A: True}, NOW))
    assert len(source.asked) == 2
    assert air[A].hours == len(air_hours(NOW, True))
    asyncio.run(cache.air(source, {A: False}, NOW))  # the forecast's hours serve both
    assert len(source.asked) == 2


def test_the_next_hour_asks_afresh_what_fetch_cell_air_would() -> None:
    source, cache = Counting(), CellAirCache()
    asyncio.run(cache.air(source, {A: True}, NOW))
    next_hour = NOW + timedelta(hours=1)
    kept = asyncio.run(cache.air(source, {A: True}, next_hour))
    assert len(source.asked) == 2
    direct = asyncio.run(fetch_cell_air(Counting(), {A: True}, next_hour))
    assert kept[A].first_end == direct[A].first_end
    assert kept[A].hours == direct[A].hours

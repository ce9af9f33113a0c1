"""`GET /explore/air-source` tells the truth per point (issue 30): stations a continent away
neither appear nor make the air "fused", a station nearby is listed with its weight there; on
every store the observations can live in."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest

from cleanair_core import CleanAir, ManualClock
from cleanair_core.air.fusion import FUSION_PARAMETERS, persistence, residual_field
from cleanair_core.air.gridded_fused_air import fused_air
from cleanair_core.air.observations import Observation, Station
from cleanair_core.air.pollutants import Pollutant
from cleanair_core.geo import Point
from cleanair_core.ports import Sources, Store
from cleanair_sources.street_router import LoadedNetworks
from support.fakes import AIR, FakeSource
from support.http import Client
from support.networks import ORIGIN, grid

NOW = datetime(2026, 1, 15, 12, 0, tzinfo=UTC)
#: Helsinki, inside the grid network.
HELSINKI = ORIGIN
BEIJING = Point(39.929, 116.417)
#: A point of the grid network about 220 m from Helsinki's station.
NEAR = Point(ORIGIN.lat + 0.002, ORIGIN.lon)
OBSERVED = {Pollutant.NO2: 60.0, Pollutant.PM25: 30.0}


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(NOW)


@pytest.fixture
def sources(store: Store) -> Sources:
    """Fused over `store`: memory, SQLite and PostgreSQL in turn."""
    return Sources(fused_air(FakeSource(), store), networks=LoadedNetworks([grid(3, 3)]))


def beijing_stations(store: Store, hour_end: datetime = NOW) -> None:
    stations = [
        Station(f"cn:{i}", f"Beijing {i}", Point(BEIJING.lat + 0.03 * i, BEIJING.lon - 0.02 * i))
        for i in range(12)
    ]
    store.put_stations(stations)
    store.put_observations(
        Observation(s.id, pollutant, hour_end, 300.0 + i)
        for i, s in enumerate(stations)
        for pollutant in OBSERVED
    )


def ask(client: Client, point: Point) -> Any:
    answer = client.get("/explore/air-source", params={"lat": point.lat, "lon": point.lon})
    assert answer.status_code == 200
    return answer.json()


def weight_of(station: Station, residual: float, pollutant: Pollutant, point: Point) -> float:
    """A lone background station's weight at `point`, with the fallback parameters (one
    station is too few to fit)."""
    field = residual_field([station], [residual], FUSION_PARAMETERS[pollutant], NOW)
    return float(field.weights(np.array([point.lat]), np.array([point.lon]))[0, 0])


def test_stations_a_continent_away_neither_appear_nor_fuse(
    core: CleanAir, client: Client, store: Store
) -> None:
    beijing_stations(store)
    body = ask(client, HELSINKI)
    assert body["fused"] is False
    assert body["stations"] == []
    assert body["pollutants"] == []


def test_a_station_nearby_is_listed_with_its_weight_among_far_ones(
    core: CleanAir, client: Client, store: Store
) -> None:
    beijing_stations(store)
    here = Station("fi:1", "Kallio", HELSINKI)
    store.put_stations([here])
    store.put_observations(Observation("fi:1", p, NOW, v) for p, v in OBSERVED.items())
    body = ask(client, NEAR)
    assert body["fused"] is True
    assert body["stations"] == ["fi:1"]
    entries = body["pollutants"]
    assert [entry["pollutant"] for entry in entries] == ["no2", "pm25"]
    for entry in entries:
        pollutant = Pollutant(entry["pollutant"])
        background = AIR[pollutant]
        assert background is not None
        weight = weight_of(here, OBSERVED[pollutant] - background, pollutant, NEAR)
        assert 0.5 < weight < 1.0
        assert entry["stations"] == ["fi:1"]
        assert entry["weights"] == [pytest.approx(round(weight, 4), abs=1e-12)]
        assert entry["hour_end"] == "2026-01-15T12:00:00Z"
        assert entry["corrected"] is True


def test_a_station_nearby_of_hours_ago_counts_with_its_weight_faded(
    core: CleanAir, client: Client, store: Store
) -> None:
    here = Station("fi:1", "Kallio", HELSINKI)
    store.put_stations([here])
    hour_end = NOW - timedelta(hours=3)
    store.put_observations([Observation("fi:1", Pollutant.NO2, hour_end, 90.0)])
    body = ask(client, NEAR)
    assert body["fused"] is True
    [entry] = body["pollutants"]
    assert entry["hour_end"] == "2026-01-15T09:00:00Z"
    background = AIR[Pollutant.NO2]
    assert background is not None
    params = FUSION_PARAMETERS[Pollutant.NO2]
    weight = weight_of(here, 90.0 - background, Pollutant.NO2, NEAR)
    faded = weight * persistence(params, NOW - hour_end)
    assert faded < weight
    assert entry["weights"] == [pytest.approx(round(faded, 4), abs=1e-12)]

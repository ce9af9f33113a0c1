"""The air at one point (a served score) takes no detour (issue 34): fusion without a station
observation of the hour hands the unfused answer back without building its fields, and
street level reads a point's increments in plain floats; the values are the ones the full
paths give."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cleanair_core.air.fused_air import FusedAir
from cleanair_core.air.gridded_fused_air import GriddedFusedAir
from cleanair_core.air.observations import Observation, Station
from cleanair_core.air.pollutants import SCORED, Pollutant
from cleanair_core.air.quality_source import GriddedAir, Sample
from cleanair_core.air.street_level import StreetLevelAir, street_level_air
from cleanair_core.clock import ManualClock
from cleanair_core.geo import Point
from cleanair_core.routes.network import StreetNetwork
from cleanair_sources.embedded_model import EmbeddedModel
from cleanair_sources.street_increments import NetworkIncrements
from cleanair_storage.memory import MemoryStore

HOUR = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def helsinki() -> tuple[StreetNetwork, EmbeddedModel]:
    from cleanair_runtime.composition.bootstrap import DEFAULT_NETWORK_FILE
    from cleanair_sources.gazetteer import Gazetteer
    from cleanair_sources.osm_import import import_network

    return import_network(DEFAULT_NETWORK_FILE, "helsinki"), EmbeddedModel(Gazetteer.load())


def street(helsinki: tuple[StreetNetwork, EmbeddedModel]) -> GriddedAir:
    network, model = helsinki
    air = street_level_air(model, model, NetworkIncrements([network]))
    assert isinstance(air, GriddedAir)
    return air


def test_fusion_without_observations_answers_a_score_without_its_fields(
    helsinki: tuple[StreetNetwork, EmbeddedModel], monkeypatch: pytest.MonkeyPatch
) -> None:
    network, _ = helsinki
    unfused = street(helsinki)
    store = MemoryStore()
    fused = GriddedFusedAir(unfused, store, clock=ManualClock(HOUR + timedelta(minutes=20)))
    sample = Sample(network.node(10), HOUR)
    # The first call reads the observations (none) through the full path.
    assert asyncio.run(fused.concentrations([sample])) == asyncio.run(
        unfused.concentrations([sample])
    )

    def refused(*_: Any) -> Any:
        raise AssertionError("the fusion's fields were built for air no station corrects")

    with monkeypatch.context() as patched:
        patched.setattr(FusedAir, "_fused", refused)
        for point in (network.node(10), network.node(500), Point(60.3, 25.3)):
            asked = Sample(point, HOUR)
            assert asyncio.run(fused.concentrations([asked])) == asyncio.run(
                unfused.concentrations([asked])
            )


def test_fusion_with_an_observation_of_the_hour_still_corrects_the_score(
    helsinki: tuple[StreetNetwork, EmbeddedModel],
) -> None:
    network, _ = helsinki
    unfused = street(helsinki)
    centre = network.node(10)
    store = MemoryStore()
    store.put_stations([Station("test:1", "station 1", centre)])
    store.put_observations([Observation("test:1", Pollutant.NO2, HOUR, 95.0)])
    clock = ManualClock(HOUR + timedelta(minutes=20))
    fused = GriddedFusedAir(unfused, store, clock=clock)
    sample = Sample(centre, HOUR)
    first = asyncio.run(fused.concentrations([sample]))
    again = asyncio.run(fused.concentrations([sample]))  # the observations known now
    before = asyncio.run(unfused.concentrations([sample]))
    assert first == again
    assert again[0][Pollutant.NO2] != before[0][Pollutant.NO2]
    # The same as the sample path of a batch, which corrects as it always did.
    batch = asyncio.run(fused.concentrations([sample, Sample(network.node(11), HOUR)]))
    assert batch[0] == again[0]


class Counting:
    """`NetworkIncrements` counting its array answers."""

    def __init__(self, inner: NetworkIncrements) -> None:
        self.inner = inner
        self.arrays = 0

    def at(self, lats: np.ndarray, lons: np.ndarray) -> np.ndarray:
        self.arrays += 1
        return self.inner.at(lats, lons)

    def at_one(self, lat: float, lon: float) -> list[float] | None:
        return self.inner.at_one(lat, lon)

    def cell_mean(self, cell: Any) -> Any:
        return self.inner.cell_mean(cell)


@settings(max_examples=60, deadline=None)
@given(
    st.floats(60.14, 60.20),
    st.floats(24.88, 25.00),
    st.integers(-2000, 2000),
)
def test_a_points_street_level_is_read_in_floats_and_equals_the_array_path(
    helsinki: tuple[StreetNetwork, EmbeddedModel], lat: float, lon: float, hours: int
) -> None:
    network, model = helsinki
    increments = Counting(NetworkIncrements([network]))
    air = StreetLevelAir(model, model, increments)
    sample = Sample(Point(lat, lon), HOUR + timedelta(hours=hours))
    [one] = asyncio.run(air.concentrations([sample]))
    assert increments.arrays == 0
    rows = street(helsinki).air_at_hour(np.array([lat]), np.array([lon]), sample.at)
    assert [one.get(p) for p in SCORED] == rows[0].tolist()


def test_at_one_is_the_row_at_gives(helsinki: tuple[StreetNetwork, EmbeddedModel]) -> None:
    network, _ = helsinki
    increments = NetworkIncrements([network])
    for point in [network.node(i) for i in range(0, network.node_count, 97)] + [Point(0.0, 0.0)]:
        row = increments.at(np.array([point.lat, point.lat]), np.array([point.lon, point.lon]))[0]
        one = increments.at_one(point.lat, point.lon)
        if one is None:
            assert np.isnan(row).all()
        else:
            assert one == row.tolist()

"""A plan's routes are enriched from whole arrays of waypoints (issue 34): the embedded model,
its street level and fusion without observations answer each waypoint at its own time as
one array (`air_at_times`), equal bit for bit to the sample-by-sample answers, and the plans
are the ones enriching waypoint by waypoint gave."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from cleanair_core.air.gridded_fused_air import GriddedFusedAir
from cleanair_core.air.observations import Observation, Station
from cleanair_core.air.pollutants import SCORED, Concentrations, Pollutant
from cleanair_core.air.quality_source import AirAtTimes, GriddedAir, Sample
from cleanair_core.clock import ManualClock
from cleanair_core.errors import PlanRejected
from cleanair_core.geo import Point, distance_m
from cleanair_core.routes.enrichment import enrich_routes
from cleanair_core.routes.enrichment_rows import timestamps
from cleanair_core.routes.network import PlanActivityType, StreetNetwork
from cleanair_core.routes.network_air import NetworkAir
from cleanair_core.routes.planner import plan_routes
from cleanair_core.routes.plans import PlanRequest
from cleanair_core.routes.results import PlanResult
from cleanair_sources.embedded_model import EmbeddedModel
from cleanair_sources.street_router import LoadedNetworks
from cleanair_storage.memory import MemoryStore

START = datetime(2026, 11, 24, 6, 40, 0, 250_001, tzinfo=UTC)


@pytest.fixture(scope="module")
def model() -> EmbeddedModel:
    from cleanair_sources.gazetteer import Gazetteer

    return EmbeddedModel(Gazetteer.load())


@pytest.fixture(scope="module")
def helsinki(model: EmbeddedModel) -> tuple[StreetNetwork, GriddedAir]:
    from cleanair_core.air.street_level import street_level_air
    from cleanair_runtime.composition.bootstrap import DEFAULT_NETWORK_FILE
    from cleanair_sources.osm_import import import_network
    from cleanair_sources.street_increments import NetworkIncrements

    network = import_network(DEFAULT_NETWORK_FILE, "helsinki")
    air = street_level_air(model, model, NetworkIncrements([network]))
    assert isinstance(air, GriddedAir)
    assert isinstance(air, AirAtTimes)
    return network, air


class SampleBySample:
    """`inner` without `air_at_times`: the waypoint-by-waypoint path, as before."""

    def __init__(self, inner: GriddedAir) -> None:
        self.inner = inner
        self.update_interval = inner.update_interval
        self.asked = 0

    async def concentrations(self, samples: Sequence[Sample]) -> list[Concentrations]:
        self.asked += len(samples)
        return await self.inner.concentrations(samples)

    def air_at_hour(self, lats: np.ndarray, lons: np.ndarray, hour: datetime) -> np.ndarray:
        return self.inner.air_at_hour(lats, lons, hour)


class Counted(SampleBySample):
    """`inner` with its `air_at_times`, counting the samples `concentrations` is asked for."""

    def air_at_times(self, lats: np.ndarray, lons: np.ndarray, stamps: np.ndarray) -> np.ndarray:
        rows = self.inner.air_at_times(lats, lons, stamps)  # type: ignore[attr-defined]
        assert rows is not None
        return rows  # type: ignore[no-any-return]


def rows_of(airs: Sequence[Concentrations]) -> list[list[float | None]]:
    return [[air.get(p) for p in SCORED] for air in airs]


def samples_near(network: StreetNetwork, seed: int, count: int) -> list[Sample]:
    """Samples at and around the network's nodes (inside it and just beyond), at times over
    months, to the microsecond."""
    rng = random.Random(seed)
    found: list[Sample] = []
    for _ in range(count):
        node = network.node(rng.randrange(network.node_count))
        point = Point(node.lat + rng.gauss(0, 0.002), node.lon + rng.gauss(0, 0.004))
        at = START + timedelta(seconds=rng.uniform(-4e6, 4e6), microseconds=rng.randrange(10**6))
        found.append(Sample(point, at))
    return found


def arrays(samples: Sequence[Sample]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return (
        np.array([s.point.lat for s in samples]),
        np.array([s.point.lon for s in samples]),
        timestamps([s.at for s in samples]),
    )


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.floats(-90.0, 90.0),
            st.floats(-180.0, 180.0),
            st.floats(-3e7, 3e7),
        ),
        min_size=1,
        max_size=30,
    )
)
def test_the_models_rows_are_its_values_at_each_time_bit_for_bit(
    model: EmbeddedModel, found: list[tuple[float, float, float]]
) -> None:
    samples = [Sample(Point(lat, lon), START + timedelta(seconds=s)) for lat, lon, s in found]
    rows = model.air_at_times(*arrays(samples))
    assert rows.tolist() == rows_of([model.concentrations_at(s.point, s.at) for s in samples])


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10**6))
def test_street_level_rows_are_its_answers_one_by_one_bit_for_bit(
    helsinki: tuple[StreetNetwork, GriddedAir], seed: int
) -> None:
    network, air = helsinki
    samples = samples_near(network, seed, 40)
    one_by_one = [asyncio.run(air.concentrations([s]))[0] for s in samples]
    rows = air.air_at_times(*arrays(samples))  # type: ignore[attr-defined]
    assert rows.tolist() == rows_of(one_by_one)
    assert rows_of(asyncio.run(air.concentrations(samples))) == rows_of(one_by_one)


def test_fusion_answers_rows_only_while_no_observation_corrects_them(
    helsinki: tuple[StreetNetwork, GriddedAir],
) -> None:
    network, street = helsinki
    store = MemoryStore()
    clock = ManualClock(START)
    fused = GriddedFusedAir(street, store, clock=clock)
    samples = samples_near(network, 3, 50)
    samples = [Sample(s.point, START + (s.at - START) / 1000) for s in samples]  # 3 hours
    # Before the observations were read, and when their version is due to be read again,
    # the sample path answers (it reads them).
    assert fused.air_at_times(*arrays(samples)) is None
    answers = asyncio.run(fused.concentrations(samples))
    rows = fused.air_at_times(*arrays(samples))
    assert rows is not None
    assert rows.tolist() == rows_of(answers)
    clock.advance(5)
    assert fused.air_at_times(*arrays(samples)) is None
    # A station's observation of one of the hours: the fusion may change them.
    centre = network.node(0)
    store.put_stations([Station("test:1", "station 1", centre)])
    store.put_observations(
        [
            Observation(
                "test:1",
                Pollutant.NO2,
                START.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1),
                80.0,
            )
        ]
    )
    asyncio.run(fused.concentrations(samples))
    assert fused.air_at_times(*arrays(samples)) is None


def test_routes_are_enriched_from_rows_without_a_sample_path_call(
    helsinki: tuple[StreetNetwork, GriddedAir],
) -> None:
    network, air = helsinki
    samples = samples_near(network, 5, 120)
    routes = [
        ([s.point for s in samples[:50]], sorted(s.at for s in samples[:50])),
        ([s.point for s in samples[50:]], sorted(s.at for s in samples[50:])),
    ]
    counted, plain = Counted(air), SampleBySample(air)
    assert asyncio.run(enrich_routes(counted, routes)) == asyncio.run(enrich_routes(plain, routes))
    assert counted.asked == 0
    assert plain.asked == 120


def helsinki_walks(network: StreetNetwork, count: int) -> list[tuple[Point, Point]]:
    rng = random.Random(17)
    found: list[tuple[Point, Point]] = []
    while len(found) < count:
        a, b = (network.node(rng.randrange(network.node_count)) for _ in range(2))
        if 400.0 <= distance_m(a, b) <= 1500.0:
            found.append((a, b))
    return found


def plans(
    network: StreetNetwork, air: object, pairs: list[tuple[Point, Point]]
) -> list[PlanResult | str]:
    networks = LoadedNetworks([network])
    results: list[PlanResult | str] = []
    for activity in (PlanActivityType.WALKING, PlanActivityType.CYCLING):
        for at in (START, START + timedelta(hours=10, minutes=53)):
            kept = NetworkAir()
            for start, end in pairs:
                request = PlanRequest(start, end, activity, at)
                try:
                    results.append(
                        asyncio.run(plan_routes(request, networks, air, network_air=kept))  # type: ignore[arg-type]
                    )
                except PlanRejected as exc:
                    results.append(exc.detail)
    return results


def test_helsinki_plans_are_those_enriched_waypoint_by_waypoint(
    helsinki: tuple[StreetNetwork, GriddedAir],
) -> None:
    network, air = helsinki
    pairs = helsinki_walks(network, 6)
    counted = Counted(air)
    from_rows = plans(network, counted, pairs)
    assert from_rows == plans(network, SampleBySample(air), pairs)
    assert sum(isinstance(plan, PlanResult) for plan in from_rows) >= 12
    assert counted.asked == 0  # every route enriched from rows


def test_fusion_without_stations_enriches_from_rows_whenever_it_is_asked(
    helsinki: tuple[StreetNetwork, GriddedAir],
) -> None:
    network, air = helsinki
    counted = Counted(air)
    clock = ManualClock(START)
    fused = GriddedFusedAir(counted, MemoryStore(), clock=clock)
    samples = samples_near(network, 8, 60)
    routes = [([s.point for s in samples], sorted(s.at for s in samples))]
    # Asked first, and again once the observations' version is due to be read again: the
    # enrichment has fusion read it (off the loop), then asks for rows.
    first = asyncio.run(enrich_routes(fused, routes))
    clock.advance(3600)
    again = asyncio.run(enrich_routes(fused, routes))
    assert counted.asked == 0
    assert first == again == asyncio.run(enrich_routes(SampleBySample(air), routes))


def test_the_enrichment_endpoints_route_is_enriched_from_rows(
    helsinki: tuple[StreetNetwork, GriddedAir],
) -> None:
    from cleanair_core.air.activities import ActivityType
    from cleanair_core.air.exposure import EnvironmentType
    from cleanair_core.routes.enrichment import enrich_route

    network, air = helsinki
    samples = samples_near(network, 9, 100)
    points, times = [s.point for s in samples], sorted(s.at for s in samples)
    counted, plain = Counted(air), SampleBySample(air)
    for activity, environment in (
        (ActivityType.OTHER, EnvironmentType.OUTDOOR),
        (ActivityType.RUNNING_OUTDOOR, EnvironmentType.INDOOR),
    ):
        assert asyncio.run(
            enrich_route(counted, points, times, activity, environment)
        ) == asyncio.run(enrich_route(plain, points, times, activity, environment))
    assert counted.asked == 0


_NOON = 1_795_521_600 * 10**6  # 2026-11-24 12:00 UTC, an hour's end


@given(st.integers(-(2**31) * 10**6, (2**32 - 1) * 10**6))
@example(_NOON)
@example(_NOON + 1)
@example(_NOON - 1)
@example((2**32 - 1) * 10**6 - 1)
def test_observation_hours_from_floats_are_the_instants_own(micros: int) -> None:
    from cleanair_core.air.fusion import observation_hour
    from cleanair_core.air.gridded_fused_air import _observation_hours

    at = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=micros)
    assert _observation_hours(np.array([at.timestamp()])) == {observation_hour(at)}

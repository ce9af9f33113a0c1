"""A plan does less work for the same answer (issue 34): each change that spares work is
checked against the computation it replaced, on hand-made inputs and on Helsinki walks."""

from __future__ import annotations

import asyncio
import functools
import random
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cleanair_core.routes.budgets as budgets
import cleanair_core.routes.plan_air as plan_air
import cleanair_core.routes.plan_area as plan_area
import cleanair_core.routes.planner as planner
import cleanair_sources.street_router as street_router
from cleanair_core.air.activities import ActivityType
from cleanair_core.air.pollutants import SCORED, Concentrations, Pollutant
from cleanair_core.air.quality_source import AirQualitySource, GriddedAir, Sample
from cleanair_core.errors import PlanRejected, SourceUnavailable
from cleanair_core.geo import Point, distance_m, distances_m
from cleanair_core.routes.enrichment import EnrichedRoute, enrich_route, enrich_routes
from cleanair_core.routes.network import (
    Access,
    FloatArray,
    PlanActivityType,
    RoadClass,
    StreetNetwork,
)
from cleanair_core.routes.network_air import NetworkAir
from cleanair_core.routes.plans import PlanRequest
from cleanair_core.routes.results import PlanResult
from cleanair_sources.street_router import LoadedNetworks, ScipyRouter

WALK = PlanActivityType.WALKING
START = datetime(2026, 11, 24, 6, 40, tzinfo=UTC)
#: Helsinki walks, planned at three times of day (morning traffic, noon, night).
HOURS = (START, START + timedelta(hours=4, minutes=15), START + timedelta(hours=14, minutes=5))


class Counted:
    """The air from a function of place and time, counting the calls and samples asked."""

    update_interval = 3600

    def __init__(self) -> None:
        self.calls = 0
        self.samples: list[Sample] = []

    async def concentrations(self, samples: Sequence[Sample]) -> list[Concentrations]:
        self.calls += 1
        self.samples.extend(samples)
        return [self.air(s) for s in samples]

    @staticmethod
    def air(sample: Sample) -> Concentrations:
        minute = sample.at.minute
        no2 = None if minute % 7 == 3 else 10.0 + (sample.point.lat * 1e4 % 50) + minute
        return {Pollutant.NO2: no2, Pollutant.PM25: 4.0 + sample.point.lon * 1e3 % 9}


# -- enriching several routes at once ----------------------------------------------------------

#: Routes from one start, as a plan's are: each a prefix of a walk, then its own way.
routes_from_one_start = st.lists(
    st.tuples(st.integers(1, 6), st.lists(st.integers(0, 30), min_size=0, max_size=6)),
    min_size=1,
    max_size=5,
)


def as_route(shared: int, own: list[int]) -> tuple[list[Point], list[datetime]]:
    points = [Point(60.17 + k * 1e-3, 24.94) for k in range(shared)]
    points += [Point(60.16, 24.95 + k * 1e-3) for k in own]
    times = [START + timedelta(minutes=k) for k in range(len(points))]
    return points, times


@settings(max_examples=60, deadline=None)
@given(routes_from_one_start)
def test_routes_enriched_together_are_each_as_enriched_alone(
    spec: list[tuple[int, list[int]]],
) -> None:
    routes = [as_route(shared, own) for shared, own in spec]
    alone: list[EnrichedRoute | type[SourceUnavailable]] = []
    for points, times in routes:
        try:
            alone.append(asyncio.run(enrich_route(Counted(), points, times, ActivityType.WALKING)))
        except SourceUnavailable:
            alone.append(SourceUnavailable)
    source = Counted()
    if SourceUnavailable in alone:
        with pytest.raises(SourceUnavailable):
            asyncio.run(enrich_routes(source, routes, ActivityType.WALKING))
        return
    together = asyncio.run(enrich_routes(source, routes, ActivityType.WALKING))
    assert together == alone
    # One call, each place and time asked once however many routes pass it then.
    assert source.calls == 1
    asked = [(s.point, s.at) for s in source.samples]
    assert len(asked) == len(set(asked))
    assert set(asked) == {
        (p, t) for points, times in routes for p, t in zip(points, times, strict=True)
    }


def test_a_route_without_air_fails_the_batch_as_it_fails_alone() -> None:
    class Nothing:
        update_interval = 3600

        async def concentrations(self, samples: Sequence[Sample]) -> list[Concentrations]:
            return [{} for _ in samples]

    with pytest.raises(SourceUnavailable, match="No air-quality data"):
        asyncio.run(enrich_routes(Nothing(), [as_route(2, [])]))


# -- Helsinki walks: the same plans for less work ---------------------------------------------


@pytest.fixture(scope="module")
def helsinki() -> tuple[StreetNetwork, GriddedAir]:
    from cleanair_core.air.street_level import street_level_air
    from cleanair_runtime.composition.bootstrap import DEFAULT_NETWORK_FILE
    from cleanair_sources.embedded_model import EmbeddedModel
    from cleanair_sources.gazetteer import Gazetteer
    from cleanair_sources.osm_import import import_network
    from cleanair_sources.street_increments import NetworkIncrements

    network = import_network(DEFAULT_NETWORK_FILE, "helsinki")
    model = EmbeddedModel(Gazetteer.load())
    air = street_level_air(model, model, NetworkIncrements([network]))
    assert isinstance(air, GriddedAir)
    return network, air


def walks(network: StreetNetwork, count: int, seed: int) -> list[tuple[Point, Point]]:
    """Walks 0.5 to 3 km apart (the bench's Helsinki plans)."""
    rng = random.Random(seed)
    walkable = np.unique(network.edge_from[network.usable(WALK)]).tolist()
    found: list[tuple[Point, Point]] = []
    while len(found) < count:
        start, end = (network.node(int(rng.choice(walkable))) for _ in range(2))
        if 500 <= distance_m(start, end) <= 3000:
            found.append((start, end))
    return found


class CountedCalls:
    """`air` (a `GriddedAir`), counting the samples its routes' enrichment asks."""

    def __init__(self, air: GriddedAir) -> None:
        self._air = air
        self.update_interval = air.update_interval
        self.calls = 0
        self.samples = 0

    async def concentrations(self, samples: Sequence[Sample]) -> list[Concentrations]:
        self.calls += 1
        self.samples += len(samples)
        return await self._air.concentrations(samples)

    def air_at_hour(self, lats: FloatArray, lons: FloatArray, hour: datetime) -> FloatArray:
        return self._air.air_at_hour(lats, lons, hour)


def plans(
    network: StreetNetwork, air: AirQualitySource, count: int, seed: int
) -> Iterator[PlanResult | str]:
    networks = LoadedNetworks([network])
    kept = NetworkAir()
    for at in HOURS:
        for start, end in walks(network, count, seed):
            request = PlanRequest(start, end, WALK, at)
            try:
                yield asyncio.run(planner.plan_routes(request, networks, air, network_air=kept))
            except PlanRejected as exc:
                yield exc.detail


def test_a_plan_asks_the_source_once_for_its_routes_waypoints(
    helsinki: tuple[StreetNetwork, GriddedAir],
) -> None:
    network, air = helsinki
    counted = CountedCalls(air)
    results = [r for r in plans(network, counted, 4, 31) if isinstance(r, PlanResult)]
    # The node air is asked as arrays (`air_at_hour`); `concentrations` is the enrichment's.
    assert counted.calls == len(results)


def test_routes_the_choice_passes_over_whatever_their_air_are_not_enriched(
    helsinki: tuple[StreetNetwork, GriddedAir], monkeypatch: pytest.MonkeyPatch
) -> None:
    network, air = helsinki
    spared, everything = CountedCalls(air), CountedCalls(air)
    sparing = list(plans(network, spared, 8, 32))
    monkeypatch.setattr(planner, "may_be_offered", lambda *_: True)
    assert list(plans(network, everything, 8, 32)) == sparing
    assert spared.samples < everything.samples


# -- straight lines measured once --------------------------------------------------------------


def old_nodes_between(
    router: ScipyRouter, a: Point, b: Point, reach: float
) -> npt.NDArray[np.intp]:
    """The planner's `_between` and `_ellipse` before `Around`: measured at every call."""
    near = router.nodes_within(a, reach)
    lat, lon = router.network.node_lat[near], router.network.node_lon[near]
    total = distances_m(a.lat, a.lon, lat, lon) + distances_m(b.lat, b.lon, lat, lon)
    nodes: npt.NDArray[np.intp] = near[total <= reach].astype(np.intp)
    return nodes


scattered_points = st.lists(
    st.tuples(st.floats(-0.05, 0.05), st.floats(-0.1, 0.1)), min_size=2, max_size=60
)


@pytest.mark.parametrize("small", [True, False], ids=["every node at once", "nodes near a"])
@settings(max_examples=60, deadline=None)
@given(
    points=scattered_points,
    ends=st.tuples(st.integers(0, 59), st.integers(0, 59)),
    reaches=st.lists(st.floats(0.0, 20_000.0), min_size=1, max_size=4),
)
def test_around_answers_as_measuring_each_time(
    small: bool,
    points: list[tuple[float, float]],
    ends: tuple[int, int],
    reaches: list[float],
) -> None:
    network = scattered(points)
    router = ScipyRouter(network)
    a, b = (network.node(k % network.node_count) for k in ends)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(plan_area, "SMALL_NETWORK_NODES", 10**9 if small else 0)
        around = plan_area.Around(router, a, b)
        everything = np.arange(network.node_count, dtype=np.intp)
        for reach in reaches:  # widening and narrowing, in any order
            assert around.within(reach).tolist() == router.nodes_within(a, reach).tolist()
            assert around.between(reach).tolist() == old_nodes_between(router, a, b, reach).tolist()
            for point, read in ((a, around.to_a), (b, around.to_b)):
                measured = distances_m(point.lat, point.lon, network.node_lat, network.node_lon)
                assert read(everything).tolist() == measured.tolist()


def scattered(points: list[tuple[float, float]]) -> StreetNetwork:
    """Nodes around Helsinki joined in a chain (the edges do not matter here)."""
    lat = np.array([60.17 + p for p, _ in points])
    lon = np.array([24.94 + o for _, o in points])
    frm = np.arange(len(points) - 1, dtype=np.int32)
    to = frm + 1
    return StreetNetwork(
        "scattered",
        lat,
        lon,
        frm,
        to,
        distances_m(lat[frm], lon[frm], lat[to], lon[to]) + 1.0,
        np.full(frm.size, RoadClass.LOCAL, dtype=np.uint8),
        np.full(frm.size, Access.FOOT | Access.BIKE, dtype=np.uint8),
    )


@settings(max_examples=100, deadline=None)
@given(
    count=st.integers(1, 300),
    parts=st.lists(st.lists(st.integers(0, 299), max_size=80), min_size=1, max_size=3),
)
def test_union_is_numpys(count: int, parts: list[list[int]]) -> None:
    arrays = [np.array([k % count for k in part], dtype=np.intp) for part in parts]
    expected = functools.reduce(np.union1d, arrays, np.empty(0, dtype=np.intp))
    found = plan_area.union(count, *arrays)
    assert found.dtype == np.intp
    assert found.tolist() == expected.tolist()


def test_a_helsinki_plan_measures_each_node_from_each_of_four_points_once(
    helsinki: tuple[StreetNetwork, GriddedAir], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Snapped start and end (the corridors, the earliest arrivals, the time left), start
    and end as given (the ellipse): 13 passes of the haversine over the nodes before."""
    network, air = helsinki
    measured = 0

    def counted(*args: Any) -> FloatArray:
        nonlocal measured
        distances: FloatArray = distances_m(*args)
        measured += distances.size
        return distances

    monkeypatch.setattr(plan_area, "distances_m", counted)
    monkeypatch.setattr(planner, "distances_m", counted, raising=False)  # where it was
    monkeypatch.setattr(street_router, "distances_m", counted)
    networks = LoadedNetworks([network])
    for start, end in walks(network, 5, 33):
        measured = 0
        request = PlanRequest(start, end, WALK, START)
        asyncio.run(planner.plan_graph(request, networks, air))
        assert measured <= 4 * network.node_count + 1


def old_dose_columns(air: FloatArray) -> list[int]:
    """`plan_air.dose_columns` before it took one pass over the nodes."""
    some = ~np.isnan(air).all(axis=1)
    return [c for c in range(len(SCORED)) if some.any() and not np.isnan(air[some, c]).any()]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.lists(st.one_of(st.none(), st.floats(0.0, 100.0)), min_size=5, max_size=5),
        max_size=12,
    )
)
def test_dose_columns_are_as_before(rows: list[list[float | None]]) -> None:
    air = np.array([[np.nan if v is None else v for v in row] for row in rows]).reshape(-1, 5)
    assert plan_air.dose_columns(air) == old_dose_columns(air)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 10_000), max_size=300))
def test_the_budget_searchs_distinct_nodes_are_numpys_unique(values: list[int]) -> None:
    array = np.array(values, dtype=np.intp)
    found = budgets._distinct(array)
    assert found.dtype == np.intp
    assert found.tolist() == np.unique(array).tolist()

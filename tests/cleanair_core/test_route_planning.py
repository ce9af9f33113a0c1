"""The route planner on hand-made graphs where the cleanest path is known."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Sequence
from datetime import UTC, datetime

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cleanair_core.air.pollutants import Concentrations, Pollutant
from cleanair_core.air.quality_source import Sample
from cleanair_core.errors import PlanRejected
from cleanair_core.geo import Point, distance_m, distances_m
from cleanair_core.routes.network import Access, Path, PlanActivityType, RoadClass, StreetNetwork
from cleanair_core.routes.plan_area import earliest_arrivals, shortest_path
from cleanair_core.routes.planner import (
    SNAP_DISTANCE_M,
    plan_routes,
    shared_share,
)
from cleanair_core.routes.plans import PlanRequest
from cleanair_core.routes.results import PlanResult
from cleanair_sources.street_router import LoadedNetworks, ScipyRouter
from support.networks import DLAT, DLON, ORIGIN, grid

NOW = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
WALK = PlanActivityType.WALKING


class AirByLatitude:
    """Dirty air (lots of NO2) south of `edge_lat`, clean north of it."""

    update_interval = 3600

    def __init__(self, edge_lat: float, dirty: float = 90.0, clean: float = 10.0) -> None:
        self.edge_lat = edge_lat
        self.dirty = dirty
        self.clean = clean
        self.calls = 0

    async def concentrations(self, samples: Sequence[Sample]) -> list[Concentrations]:
        self.calls += 1
        return [
            {
                Pollutant.NO2: self.dirty if s.point.lat < self.edge_lat else self.clean,
                Pollutant.PM25: 5.0,
            }
            for s in samples
        ]


class Uniform:
    update_interval = 3600

    def __init__(self, air: Concentrations) -> None:
        self.air = air

    async def concentrations(self, samples: Sequence[Sample]) -> list[Concentrations]:
        return [dict(self.air) for _ in samples]


def plan(
    network: StreetNetwork,
    source: object,
    start: Point,
    end: Point,
    activity: PlanActivityType = WALK,
) -> PlanResult:
    request = PlanRequest(start, end, activity, NOW)
    return asyncio.run(plan_routes(request, LoadedNetworks([network]), source))  # type: ignore[arg-type]


def at(i: int, j: int) -> Point:
    return Point(ORIGIN.lat + i * DLAT, ORIGIN.lon + j * DLON)


# -- a dirty main street with a clean parallel one --------------------------------------------


def test_the_cleanest_route_avoids_the_dirty_street() -> None:
    network = grid(4, 10)
    # Row 0 is dirty; rows 1-3 are clean: the clean way goes up, along row 1, and down.
    result = plan(network, AirByLatitude(ORIGIN.lat + DLAT / 2), at(0, 0), at(0, 9))
    cleanest, baseline = result.routes[0], result.routes[-1]
    assert baseline.goal.title == "Shortest route"
    assert cleanest.goal.title == "Cleanest air"
    assert all(p.lat == pytest.approx(ORIGIN.lat) for p in baseline.route.points)
    assert any(p.lat > ORIGIN.lat + DLAT / 2 for p in cleanest.route.points)
    assert cleanest.distance > baseline.distance
    assert cleanest.dose_delta_pct is not None
    assert cleanest.dose_delta_pct > 0
    assert result.best_route_index == 0
    assert result.original_distance == baseline.distance
    assert result.original_dose == baseline.route.summary.inhaled_dose
    assert "less pollution inhaled for" in cleanest.goal.description
    assert baseline.route.summary.inhaled_dose is not None
    assert cleanest.route.summary.inhaled_dose is not None
    cut = (1 - cleanest.route.summary.inhaled_dose / baseline.route.summary.inhaled_dose) * 100
    assert f"{cut:.0f} %" in cleanest.goal.description


def test_without_a_cleaner_way_the_direct_route_stands_alone() -> None:
    network = grid(3, 6)
    result = plan(network, Uniform({Pollutant.NO2: 30.0}), at(0, 0), at(0, 5))
    assert len(result.routes) == 1
    only = result.routes[0]
    assert only.goal.title == "Direct route is the cleanest"
    assert only.distance_delta == 0
    assert only.dose_delta_pct == 0.0
    assert result.best_route_index == 0


def test_deltas_match_distances_and_doses() -> None:
    network = grid(5, 8)
    result = plan(network, AirByLatitude(ORIGIN.lat + 1.5 * DLAT), at(0, 0), at(1, 7))
    base = result.routes[-1]
    for route in result.routes:
        assert route.distance_delta == round(route.distance - base.distance)
        dose, base_dose = route.route.summary.inhaled_dose, base.route.summary.inhaled_dose
        assert dose is not None
        assert base_dose is not None
        assert route.dose_delta_pct == round((1 - dose / base_dose) * 100, 1)
        assert route.duration == pytest.approx(route.route.duration_s, abs=0.1)


# -- rejections -------------------------------------------------------------------------------


def test_a_point_outside_every_network_is_rejected() -> None:
    network = grid(3, 3)
    outside = Point(ORIGIN.lat - 0.01, ORIGIN.lon)
    with pytest.raises(PlanRejected, match="No street network covers"):
        plan(network, Uniform({Pollutant.NO2: 5.0}), outside, at(0, 2))


@pytest.mark.parametrize("which", ["start", "end"])
def test_an_end_far_from_any_usable_street_is_rejected(which: str) -> None:
    # Streets only in columns 0-3; the nodes of columns 4-11 stretch the box without streets.
    gap = grid(3, 12, skip=lambda a, b: a[1] > 3 or b[1] > 3)
    away = at(1, 11)
    assert distance_m(away, at(1, 3)) > SNAP_DISTANCE_M
    start, end = (away, at(0, 0)) if which == "start" else (at(0, 0), away)
    with pytest.raises(PlanRejected, match=f"within 250 m of the {which}"):
        plan(gap, Uniform({Pollutant.NO2: 5.0}), start, end)


def test_unreachable_points_are_rejected() -> None:
    # One-way eastward for bikes all along: a cyclist cannot ride west. No two places of this
    # network reach each other both ways, so nothing is left to snap a cyclist onto.
    network = grid(1, 5, access=lambda a, b: Access.FOOT | Access.BIKE_FORWARD)
    air = Uniform({Pollutant.NO2: 5.0})
    with pytest.raises(PlanRejected, match="No street for cycling within 250 m of the start"):
        plan(network, air, at(0, 4), at(0, 0), PlanActivityType.CYCLING)
    assert plan(network, air, at(0, 4), at(0, 0), WALK).routes


def test_a_start_on_a_small_island_joins_the_main_network() -> None:
    # Columns 0-1 of row 2 form a two-node island; the rest is one connected grid.
    def cut(a: tuple[int, int], b: tuple[int, int]) -> bool:
        island = {(2, 0), (2, 1)}
        return (a in island) != (b in island)

    network = grid(3, 6, skip=cut)
    result = plan(network, Uniform({Pollutant.NO2: 5.0}), at(2, 0), at(0, 5))
    first = result.routes[-1].route.points[0]
    assert first not in (at(2, 0), at(2, 1))
    assert distance_m(first, at(2, 0)) <= SNAP_DISTANCE_M


def test_missing_air_data_is_a_loud_failure() -> None:
    network = grid(3, 4)
    with pytest.raises(PlanRejected, match="Air-quality data covers too little"):
        plan(network, Uniform({}), at(0, 0), at(0, 3))


def test_cycling_respects_one_way_streets() -> None:
    # Row 0 is one-way eastward... for the way back west a cyclist must use row 1.
    def one_way(a: tuple[int, int], b: tuple[int, int]) -> int:
        if a[0] == b[0] == 0:
            return Access.FOOT | Access.BIKE_FORWARD
        return Access.FOOT | Access.BIKE

    network = grid(2, 6, access=one_way)
    air = Uniform({Pollutant.NO2: 20.0})
    walking = plan(network, air, at(0, 5), at(0, 0), PlanActivityType.WALKING)
    cycling = plan(network, air, at(0, 5), at(0, 0), PlanActivityType.CYCLING)
    assert cycling.original_distance > walking.original_distance
    east = plan(network, air, at(0, 0), at(0, 5), PlanActivityType.CYCLING)
    assert east.original_distance == pytest.approx(walking.original_distance, abs=0.2)


# -- diversity ---------------------------------------------------------------------------------


def test_shared_share_is_the_share_of_a_routes_length_on_the_others_edges() -> None:
    lengths = np.array([100.0, 300.0, 50.0, 50.0])
    route, other = Path([0, 1, 2], [0, 1]), Path([0, 1, 5], [0, 3])
    assert shared_share(route, other, lengths) == pytest.approx(0.25)
    assert shared_share(other, route, lengths) == pytest.approx(100 / 150)
    assert shared_share(route, route, lengths) == 1.0
    assert shared_share(Path([0], []), route, lengths) == 0.0


# -- properties -------------------------------------------------------------------------------


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rows=st.integers(2, 6),
    cols=st.integers(2, 7),
    dirty=st.lists(st.floats(0.0, 200.0), min_size=42, max_size=42),
    ends=st.tuples(st.integers(0, 41), st.integers(0, 41)),
)
def test_every_route_is_a_connected_path_and_the_best_is_no_dirtier(
    rows: int, cols: int, dirty: list[float], ends: tuple[int, int]
) -> None:
    network = grid(rows, cols)

    class Patchy:
        update_interval = 3600

        async def concentrations(self, samples: Sequence[Sample]) -> list[Concentrations]:
            out: list[Concentrations] = []
            for s in samples:
                i = round((s.point.lat - ORIGIN.lat) / DLAT * 2)
                j = round((s.point.lon - ORIGIN.lon) / DLON * 2)
                out.append({Pollutant.NO2: dirty[(i * 7 + j) % len(dirty)]})
            return out

    n = rows * cols
    start, end = network.node(ends[0] % n), network.node(ends[1] % n)
    result = plan(network, Patchy(), start, end)
    pairs = {
        frozenset((int(a), int(b))) for a, b in zip(network.edge_from, network.edge_to, strict=True)
    }
    index = {(network.node(k).lat, network.node(k).lon): k for k in range(n)}
    for route in result.routes:
        nodes = [index[(p.lat, p.lon)] for p in route.route.points]
        assert nodes[0] == ends[0] % n
        assert nodes[-1] == ends[1] % n
        assert all(frozenset(step) in pairs for step in itertools.pairwise(nodes))
        assert route.distance_delta == round(route.distance - result.original_distance)
    best = result.routes[result.best_route_index].route.summary.inhaled_dose
    if best is not None and result.original_dose is not None:
        assert best <= result.original_dose


class NO2ByLatitude:
    """NO2 only: `south` south of `edge_lat`, `north` north of it."""

    update_interval = 3600

    def __init__(self, edge_lat: float, south: float, north: float) -> None:
        self.edge_lat, self.south, self.north = edge_lat, south, north

    async def concentrations(self, samples: Sequence[Sample]) -> list[Concentrations]:
        return [
            {Pollutant.NO2: self.south if s.point.lat < self.edge_lat else self.north}
            for s in samples
        ]


def test_a_goal_rounds_the_exact_cut_once() -> None:
    """A detour over the northern row cutting the dose by 3.49 %: its figure reads 3.5, and
    its words "3 %", not 3.5 rounded again to "4 %"."""
    cols = 11
    network = grid(2, cols)
    length = network.edge_length
    horizontal = [
        k for k in range(network.edge_count) if network.edge_to[k] - network.edge_from[k] == 1
    ]
    south = sum(float(length[k]) for k in horizontal if network.edge_from[k] < cols)
    north = sum(float(length[k]) for k in horizontal if network.edge_from[k] >= cols)
    up, down = (
        float(length[k])
        for k in range(network.edge_count)
        if network.edge_to[k] - network.edge_from[k] == cols
        and network.edge_from[k] in (0, cols - 1)
    )
    # Doses in units of the southern load: the detour's two climbs average both rows' loads.
    target = 1 - 0.0349
    load = (target * south - (up + down) / 2) / ((up + down) / 2 + north)
    source = NO2ByLatitude(ORIGIN.lat + DLAT / 2, 40.0, 40.0 * load)
    result = plan(network, source, at(0, 0), at(0, cols - 1))
    cleanest, baseline = result.routes[0], result.routes[-1]
    assert cleanest.route.summary.inhaled_dose is not None
    assert baseline.route.summary.inhaled_dose is not None
    cut = 100 * (1 - cleanest.route.summary.inhaled_dose / baseline.route.summary.inhaled_dose)
    assert cut == pytest.approx(3.49, abs=1e-4)
    assert cleanest.dose_delta_pct == 3.5
    assert cleanest.goal.description.startswith("3 % less pollution inhaled")


def scattered_network(
    points: list[tuple[float, float]], edges: list[tuple[int, int, float]]
) -> StreetNetwork:
    """Nodes around ORIGIN (offsets in degrees); each edge's length is its straight line
    times a factor, below 1 too (a network whose lengths are not straight lines)."""
    lat = np.array([ORIGIN.lat + a for a, _ in points])
    lon = np.array([ORIGIN.lon + o for _, o in points])
    frm = np.array([a for a, _, _ in edges], dtype=np.int32)
    to = np.array([b for _, b, _ in edges], dtype=np.int32)
    chords = distances_m(lat[frm], lon[frm], lat[to], lon[to])
    lengths = np.maximum(chords * np.array([f for _, _, f in edges]), 1.0)
    return StreetNetwork(
        "scattered",
        lat,
        lon,
        frm,
        to,
        lengths,
        np.full(len(edges), RoadClass.LOCAL, dtype=np.uint8),
        np.full(len(edges), Access.FOOT | Access.BIKE, dtype=np.uint8),
    )


scattered = st.integers(2, 14).flatmap(
    lambda n: st.tuples(
        st.lists(st.tuples(st.floats(-0.3, 0.3), st.floats(-0.6, 0.6)), min_size=n, max_size=n),
        st.lists(
            st.tuples(st.integers(0, n - 1), st.integers(0, n - 1), st.floats(0.3, 4.0)),
            min_size=1,
            max_size=40,
        ).map(lambda es: [e for e in es if e[0] != e[1]] or [(0, 1, 1.0)]),
        st.integers(0, n - 1),
        st.integers(0, n - 1),
    )
)


@settings(max_examples=150, deadline=None)
@given(scattered)
def test_the_baseline_searched_in_a_corridor_is_as_short_as_over_the_whole_network(
    case: tuple[list[tuple[float, float]], list[tuple[int, int, float]], int, int],
) -> None:
    points, edges, origin, destination = case
    network = scattered_network(points, edges)
    router = ScipyRouter(network)
    found = shortest_path(router, origin, destination, WALK)
    whole = router.path(origin, destination, WALK, network.edge_length)
    assert (found is None) == (whole is None)
    if found is not None and whole is not None:
        assert float(network.edge_length[found.edges].sum()) == pytest.approx(
            float(network.edge_length[whole.edges].sum()), rel=1e-12
        )


@settings(max_examples=150, deadline=None)
@given(scattered, st.floats(0.0, 100_000.0))
def test_earliest_arrivals_are_the_whole_networks_shortest_lengths(
    case: tuple[list[tuple[float, float]], list[tuple[int, int, float]], int, int],
    longest: float,
) -> None:
    points, edges, origin, _ = case
    network = scattered_network(points, edges)
    router = ScipyRouter(network)
    nodes = np.arange(network.node_count, dtype=np.intp)
    here = network.node(origin)
    along = router.lengths_from(origin, WALK, longest)
    straight = distances_m(here.lat, here.lon, network.node_lat, network.node_lon)
    expected = np.where(np.isfinite(along), along, straight)
    assert earliest_arrivals(router, origin, WALK, nodes, longest).tolist() == expected.tolist()


def test_a_network_whose_lengths_are_shorter_than_straight_lines_keeps_its_shortest_paths() -> None:
    # 0 and 1 are 1 km apart, joined by a 10 km edge; the way round by 2, 33 km north, is
    # 600 m long: every corridor must reach that far. Four more nodes far south keep the
    # corridors small parts of the network.
    network = StreetNetwork(
        "short",
        np.array([ORIGIN.lat, ORIGIN.lat, ORIGIN.lat + 0.3, *[ORIGIN.lat - 0.5] * 4]),
        np.array([ORIGIN.lon, ORIGIN.lon + 0.018, ORIGIN.lon + 0.009, *[ORIGIN.lon] * 4]),
        np.array([0, 0, 2], dtype=np.int32),
        np.array([1, 2, 1], dtype=np.int32),
        np.array([10_000.0, 300.0, 300.0]),
        np.full(3, RoadClass.LOCAL, dtype=np.uint8),
        np.full(3, Access.FOOT, dtype=np.uint8),
    )
    router = ScipyRouter(network)
    found = shortest_path(router, 0, 1, WALK)
    assert found is not None
    assert found.nodes == [0, 2, 1]
    nodes = np.arange(3, dtype=np.intp)
    assert earliest_arrivals(router, 0, WALK, nodes, 700.0).tolist() == [0.0, 600.0, 300.0]

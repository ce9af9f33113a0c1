"""The SciPy router against NetworkX on random graphs, and its snapping and one-way rules."""

from __future__ import annotations

import tracemalloc
from collections.abc import Sequence

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cleanair_core.geo import EARTH_RADIUS_M, Point, distances_m
from cleanair_core.routes.network import Access, PlanActivityType, RoadClass, StreetNetwork
from cleanair_sources.street_router import SNAP_SPACING_M, LoadedNetworks, ScipyRouter
from support.networks import DLAT, DLON, ORIGIN, grid

WALK, CYCLE = PlanActivityType.WALKING, PlanActivityType.CYCLING


def network_of(n: int, edges: list[tuple[int, int, float]], access: Sequence[int]) -> StreetNetwork:
    lat = np.array([ORIGIN.lat + 0.001 * i for i in range(n)])
    lon = np.array([ORIGIN.lon + 0.001 * (i % 3) for i in range(n)])
    return StreetNetwork(
        "random",
        lat,
        lon,
        np.array([a for a, _, _ in edges], dtype=np.int32),
        np.array([b for _, b, _ in edges], dtype=np.int32),
        np.array([w for _, _, w in edges], dtype=np.float64),
        np.full(len(edges), RoadClass.LOCAL, dtype=np.uint8),
        np.array(access, dtype=np.uint8),
    )


def path_cost(network: StreetNetwork, edges: list[int]) -> float:
    return float(network.edge_length[edges].sum()) if edges else 0.0


def reference_graph(
    n: int, edges: list[tuple[int, int, float]], flags: Sequence[int], activity: PlanActivityType
) -> nx.MultiDiGraph:
    """The arcs `activity` may use, as NetworkX sees them: foot both ways, bike as flagged."""
    reference = nx.MultiDiGraph()
    reference.add_nodes_from(range(n))
    for (a, b, w), flag in zip(edges, flags, strict=True):
        reference.add_edge(a, b, weight=w)
        if activity is WALK or flag & Access.BIKE_BACKWARD:
            reference.add_edge(b, a, weight=w)
    return reference


graphs = st.integers(2, 12).flatmap(
    lambda n: st.tuples(
        st.just(n),
        st.lists(
            st.tuples(st.integers(0, n - 1), st.integers(0, n - 1), st.floats(1.0, 100.0)),
            min_size=1,
            max_size=40,
        ).map(lambda es: [e for e in es if e[0] != e[1]]),
        st.integers(0, n - 1),
        st.integers(0, n - 1),
    )
)


@settings(max_examples=150, deadline=None)
@given(graphs, st.data())
def test_paths_are_as_cheap_as_networkx_finds(
    graph: tuple[int, list[tuple[int, int, float]], int, int], data: st.DataObject
) -> None:
    n, edges, origin, destination = graph
    flags = [
        data.draw(st.sampled_from([Access.FOOT | Access.BIKE, Access.FOOT | Access.BIKE_FORWARD]))
        for _ in edges
    ]
    network = network_of(n, edges, flags)
    router = ScipyRouter(network)
    for activity in (WALK, CYCLE):
        reference = reference_graph(n, edges, flags, activity)
        found = router.path(origin, destination, activity, network.edge_length)
        try:
            best = nx.dijkstra_path_length(reference, origin, destination)
        except nx.NetworkXNoPath:
            assert found is None
            continue
        assert found is not None
        assert found.nodes[0] == origin
        assert found.nodes[-1] == destination
        assert len(found.edges) == len(found.nodes) - 1
        for (a, b), edge in zip(
            zip(found.nodes, found.nodes[1:], strict=False), found.edges, strict=True
        ):
            assert {a, b} == {int(network.edge_from[edge]), int(network.edge_to[edge])}
        assert path_cost(network, found.edges) == pytest.approx(best)
        # A limit at the optimum changes nothing; a limit below it finds nothing.
        bounded = router.path(origin, destination, activity, network.edge_length, best * 1.000001)
        assert bounded is not None
        assert path_cost(network, bounded.edges) == pytest.approx(best)
        if best > 0:
            assert (
                router.path(origin, destination, activity, network.edge_length, best * 0.5) is None
            )


@settings(max_examples=100, deadline=None)
@given(graphs, st.data())
def test_lengths_from_a_node_are_networkxs_within_the_limit(
    graph: tuple[int, list[tuple[int, int, float]], int, int], data: st.DataObject
) -> None:
    n, edges, origin, _ = graph
    flags = [
        data.draw(st.sampled_from([Access.FOOT | Access.BIKE, Access.FOOT | Access.BIKE_FORWARD]))
        for _ in edges
    ]
    limit = data.draw(st.floats(0.0, 500.0))
    network = network_of(n, edges, flags)
    router = ScipyRouter(network)
    for activity in (WALK, CYCLE):
        reference = reference_graph(n, edges, flags, activity)
        exact = nx.single_source_dijkstra_path_length(reference, origin)
        lengths = router.lengths_from(origin, activity, limit)
        for node in range(n):
            expected = exact.get(node, np.inf)
            if expected <= limit:
                assert lengths[node] == pytest.approx(expected)
            else:
                assert lengths[node] == np.inf


def test_parallel_edges_use_the_cheaper_one() -> None:
    network = network_of(2, [(0, 1, 50.0), (0, 1, 20.0), (1, 0, 30.0)], [Access.FOOT] * 3)
    path = ScipyRouter(network).path(0, 1, WALK, network.edge_length)
    assert path is not None
    assert path.edges == [1]
    costs = np.array([5.0, 20.0, 30.0])
    cheaper = ScipyRouter(network).path(0, 1, WALK, costs)
    assert cheaper is not None
    assert cheaper.edges == [0]


def test_infinite_costs_close_edges() -> None:
    network = network_of(3, [(0, 1, 10.0), (1, 2, 10.0), (0, 2, 50.0)], [Access.FOOT] * 3)
    router = ScipyRouter(network)
    costs = np.array([10.0, np.inf, 50.0])
    path = router.path(0, 2, WALK, costs)
    assert path is not None
    assert path.nodes == [0, 2]
    assert router.path(0, 2, WALK, np.full(3, np.inf)) is None


def test_the_same_node_is_an_empty_path() -> None:
    network = grid(2, 2)
    path = ScipyRouter(network).path(3, 3, WALK, network.edge_length)
    assert path is not None
    assert (path.nodes, path.edges) == ([3], [])


def test_snapping_finds_the_nearest_usable_edge() -> None:
    # Column 1 of the middle row is a footway cyclists may not use.
    def access(a: tuple[int, int], b: tuple[int, int]) -> int:
        return Access.FOOT if a[0] == b[0] == 1 else Access.FOOT | Access.BIKE

    network = grid(3, 3, access=access)
    router = ScipyRouter(network)
    # Just north of the middle of the middle row's first edge, nearer node (1, 0).
    point = Point(ORIGIN.lat + DLAT + 0.00005, ORIGIN.lon + 0.4 * DLON)
    walk = router.snap(point, WALK)
    assert walk is not None
    assert walk.node == 3
    assert walk.distance_m < 10
    cycle = router.snap(point, CYCLE)
    assert cycle is not None
    assert cycle.node != 3 or cycle.distance_m > 10  # the footway does not count
    assert cycle.distance_m > walk.distance_m


def test_no_usable_edge_means_no_snap() -> None:
    network = grid(2, 2, access=lambda a, b: Access.FOOT)
    assert ScipyRouter(network).snap(ORIGIN, CYCLE) is None


def test_the_smallest_covering_network_is_chosen() -> None:
    city = grid(20, 20, name="city")
    quarter = grid(4, 4, name="quarter")
    networks = LoadedNetworks([city, quarter])
    assert networks.names == ["quarter", "city"]
    inside = [ORIGIN, Point(ORIGIN.lat + 2 * DLAT, ORIGIN.lon + 2 * DLON)]
    far = [ORIGIN, Point(ORIGIN.lat + 15 * DLAT, ORIGIN.lon + 15 * DLON)]
    chosen = networks.covering(inside)
    assert chosen is not None
    assert chosen.network.name == "quarter"
    wide = networks.covering(far)
    assert wide is not None
    assert wide.network.name == "city"
    assert networks.covering([Point(0.0, 0.0)]) is None


def test_cycling_snaps_onto_the_part_where_every_node_reaches_every_other() -> None:
    """A one-way stub leaves the two-way grid eastwards to a dead end (as a one-way street cut
    off by an extract's border does): a start beside its far end snaps back onto the grid,
    from where a route exists, not onto the stub, from where none leads back."""
    cols = 3

    def access(a: tuple[int, int], b: tuple[int, int]) -> int:
        stub = a[1] == cols - 2 and b[1] == cols - 1  # the last column, reached one way only
        return Access.FOOT | (Access.BIKE_FORWARD if stub else Access.BIKE)

    network = grid(1, cols, access=access)
    router = ScipyRouter(network)
    beside_dead_end = Point(ORIGIN.lat + 0.00005, ORIGIN.lon + (cols - 1) * DLON)
    snapped = router.snap(beside_dead_end, CYCLE)
    assert snapped is not None
    assert snapped.node != cols - 1  # not the dead end
    path = router.path(snapped.node, 0, CYCLE, network.edge_length)
    assert path is not None
    walked = router.snap(beside_dead_end, WALK)  # on foot the stub is two-way
    assert walked is not None
    assert walked.node == cols - 1


@settings(max_examples=150, deadline=None)
@given(graphs, st.data())
def test_a_corridor_holding_every_path_within_the_limit_finds_the_routers_answer(
    graph: tuple[int, list[tuple[int, int, float]], int, int], data: st.DataObject
) -> None:
    n, edges, origin, destination = graph
    flags = [
        data.draw(st.sampled_from([Access.FOOT | Access.BIKE, Access.FOOT | Access.BIKE_FORWARD]))
        for _ in edges
    ]
    network = network_of(n, edges, flags)
    router = ScipyRouter(network)
    costs = np.array([data.draw(st.floats(0.5, 50.0)) for _ in edges])
    limit = data.draw(st.floats(1.0, 400.0))
    extra = data.draw(st.lists(st.integers(0, n - 1), max_size=n))
    for activity in (WALK, CYCLE):
        weighted = reference_graph(
            n, [(a, b, c) for (a, b, _), c in zip(edges, costs, strict=True)], flags, activity
        )
        from_origin = nx.single_source_dijkstra_path_length(weighted, origin)
        to_end = nx.single_source_dijkstra_path_length(weighted.reverse(), destination)
        # Every node of a path cheaper than the limit, and any others.
        inside = [
            v for v in range(n) if from_origin.get(v, np.inf) + to_end.get(v, np.inf) <= limit
        ]
        nodes = np.array(sorted({*inside, *extra, origin, destination}), dtype=np.intp)
        corridor = router.corridor(activity, nodes)
        ours = corridor.path(origin, destination, costs, limit)
        theirs = router.path(origin, destination, activity, costs, limit)
        assert (ours is None) == (theirs is None)
        if ours is not None and theirs is not None:
            assert ours.nodes[0] == origin
            assert ours.nodes[-1] == destination
            assert set(ours.nodes) <= set(nodes.tolist())
            assert float(costs[ours.edges].sum()) == pytest.approx(float(costs[theirs.edges].sum()))


@settings(max_examples=100, deadline=None)
@given(graphs, st.data())
def test_corridor_lengths_are_the_routers_where_their_paths_keep_to_it(
    graph: tuple[int, list[tuple[int, int, float]], int, int], data: st.DataObject
) -> None:
    n, edges, origin, _ = graph
    flags = [
        data.draw(st.sampled_from([Access.FOOT | Access.BIKE, Access.FOOT | Access.BIKE_FORWARD]))
        for _ in edges
    ]
    network = network_of(n, edges, flags)
    router = ScipyRouter(network)
    limit = data.draw(st.floats(0.0, 500.0))
    extra = data.draw(st.lists(st.integers(0, n - 1), max_size=n))
    for activity in (WALK, CYCLE):
        full = router.lengths_from(origin, activity, limit)
        # Every node within the limit holds its shortest path: they keep to the corridor.
        nodes = np.array(sorted({*np.flatnonzero(np.isfinite(full)).tolist(), *extra}))
        lengths = router.corridor(activity, nodes.astype(np.intp)).lengths_from(origin, limit)
        assert np.array_equal(lengths, full)


def test_a_corridor_searches_only_between_its_nodes() -> None:
    # 0-1-2 is the short way round, 0-3-4-2 the long one.
    edges = [(0, 1, 10.0), (1, 2, 10.0), (0, 3, 10.0), (3, 4, 10.0), (4, 2, 10.0)]
    network = network_of(5, edges, [Access.FOOT | Access.BIKE] * 5)
    router = ScipyRouter(network)
    corridor = router.corridor(WALK, np.array([0, 2, 3, 4], dtype=np.intp))
    found = corridor.path(0, 2, network.edge_length)
    assert found is not None
    assert found.nodes == [0, 3, 4, 2]
    assert found.edges == [2, 3, 4]
    assert corridor.path(0, 1, network.edge_length) is None
    assert corridor.lengths_from(0, 100.0).tolist() == [0.0, np.inf, 30.0, 10.0, 20.0]
    unsorted = router.corridor(WALK, np.array([4, 0, 3, 2, 3], dtype=np.intp))
    assert unsorted.lengths_from(0, 100.0).tolist() == [0.0, np.inf, 30.0, 10.0, 20.0]


def test_a_corridor_makes_nothing_the_size_of_the_network() -> None:
    # A plan's corridors are a few per cent of a city: renumbering their nodes through a
    # table over every node took 8 MB a corridor on a million nodes (issue 34).
    network = grid(100, 1000)
    router = ScipyRouter(network)
    nodes = np.array([0, 1, 2, 1000, 1001, 1002], dtype=np.intp)
    router.corridor(WALK, nodes).path(0, 1002, network.edge_length)  # SciPy's imports made
    tracemalloc.start()
    try:
        corridor = router.corridor(WALK, nodes)
        found = corridor.path(0, 1002, network.edge_length)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert found is not None
    assert found.nodes[0] == 0
    assert found.nodes[-1] == 1002
    assert peak < network.node_count  # not even a byte a node


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.tuples(st.floats(-0.05, 0.05), st.floats(-0.1, 0.1)), min_size=1, max_size=60),
    st.floats(0.0, 12_000.0),
)
def test_nodes_within_a_radius_are_those_the_great_circle_puts_there(
    offsets: list[tuple[float, float]], radius: float
) -> None:
    lat = np.array([ORIGIN.lat + a for a, _ in offsets])
    lon = np.array([ORIGIN.lon + o for _, o in offsets])
    edges = [(0, i, 1.0) for i in range(1, len(offsets))] or [(0, 0, 1.0)]
    network = StreetNetwork(
        "points",
        lat,
        lon,
        np.array([a for a, _, _ in edges], dtype=np.int32),
        np.array([b for _, b, _ in edges], dtype=np.int32),
        np.ones(len(edges)),
        np.full(len(edges), RoadClass.LOCAL, dtype=np.uint8),
        np.full(len(edges), Access.FOOT, dtype=np.uint8),
    )
    found = ScipyRouter(network).nodes_within(ORIGIN, radius)
    expected = np.flatnonzero(distances_m(ORIGIN.lat, ORIGIN.lon, lat, lon) <= radius)
    assert found.tolist() == expected.tolist()


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.tuples(st.floats(-0.01, 0.01), st.floats(-0.02, 0.02)), min_size=2, max_size=12),
    st.lists(st.tuples(st.integers(0, 11), st.integers(0, 11)), max_size=12),
    st.lists(st.tuples(st.floats(-0.012, 0.012), st.floats(-0.024, 0.024)), min_size=1, max_size=5),
)
def test_snapping_takes_the_edge_of_the_nearest_of_its_points(
    offsets: list[tuple[float, float]],
    extra: list[tuple[int, int]],
    queries: list[tuple[float, float]],
) -> None:
    """The tree of pieces finds what a tree of every point SNAP_SPACING_M apart finds."""
    n = len(offsets)
    pairs = [(i, i + 1) for i in range(n - 1)]  # connected: every node reaches every other
    pairs += [(a % n, b % n) for a, b in extra if a % n != b % n]
    lat = np.array([ORIGIN.lat + a for a, _ in offsets])
    lon = np.array([ORIGIN.lon + o for _, o in offsets])
    frm = np.array([a for a, _ in pairs], dtype=np.int32)
    to = np.array([b for _, b in pairs], dtype=np.int32)
    length = np.maximum(distances_m(lat[frm], lon[frm], lat[to], lon[to]), 0.5)
    network = StreetNetwork(
        "scattered",
        lat,
        lon,
        frm,
        to,
        length,
        np.full(len(pairs), RoadClass.LOCAL, dtype=np.uint8),
        np.full(len(pairs), Access.FOOT, dtype=np.uint8),
    )
    router = ScipyRouter(network)
    lat0 = (lat.min() + lat.max()) / 2
    scale = np.cos(np.radians(lat0)) * EARTH_RADIUS_M

    def xy(a: np.ndarray, o: np.ndarray) -> np.ndarray:
        return np.column_stack((np.radians(o) * scale, np.radians(a) * EARTH_RADIUS_M))

    a, b = xy(lat[frm], lon[frm]), xy(lat[to], lon[to])
    steps = np.maximum(1, np.ceil(length / SNAP_SPACING_M)).astype(np.int64)
    owner = np.repeat(np.arange(len(pairs)), steps + 1)
    k = np.arange(owner.size) - np.repeat(np.cumsum(steps + 1) - (steps + 1), steps + 1)
    points = a[owner] + (k / steps[owner])[:, None] * (b[owner] - a[owner])
    for dlat, dlon in queries:
        point = Point(ORIGIN.lat + dlat, ORIGIN.lon + dlon)
        here = xy(np.array([point.lat]), np.array([point.lon]))[0]
        distances = np.linalg.norm(points - here, axis=1)
        nearest = int(np.argmin(distances))
        snap = router.snap(point, WALK)
        assert snap is not None
        assert snap.distance_m == pytest.approx(float(distances[nearest]), rel=1e-9, abs=1e-6)
        # The nearer end of an edge with a point that near: the nearest point's edge's.
        edge = int(owner[nearest])
        ends = [int(frm[edge]), int(to[edge])]
        expected = min(np.linalg.norm(xy(lat[ends], lon[ends]) - here, axis=1))
        chosen = np.linalg.norm(xy(lat[[snap.node]], lon[[snap.node]]) - here, axis=1)[0]
        assert chosen == pytest.approx(expected, rel=1e-9, abs=1e-6)

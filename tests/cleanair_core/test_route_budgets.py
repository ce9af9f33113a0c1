"""The least-dose route within a length budget against brute force on small random graphs.

On a grid of a few nodes every simple path can be listed, so the least dose within any
length budget is known: the budget search must find exactly it, for walking and for cycling
on random one-way streets, and a search cut short must state a gap that holds.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import networkx as nx
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cleanair_core.routes.budgets import BudgetSearch
from cleanair_core.routes.frontier import best_within, hull_weight, supported_routes
from cleanair_core.routes.network import (
    Access,
    FloatArray,
    Path,
    PlanActivityType,
    StreetNetwork,
)
from cleanair_sources.street_router import ScipyRouter
from support.networks import grid

WALK, CYCLE = PlanActivityType.WALKING, PlanActivityType.CYCLING
ONE_WAY = (Access.FOOT | Access.BIKE, Access.FOOT | Access.BIKE_FORWARD, Access.BIKE_BACKWARD)


def every_route(
    network: StreetNetwork, activity: PlanActivityType, origin: int, destination: int
) -> list[list[int]]:
    """Every simple path as its edge indices, on the arcs `activity` may use."""
    graph = nx.DiGraph()
    for k, (a, b, flags) in enumerate(
        zip(
            network.edge_from.tolist(),
            network.edge_to.tolist(),
            network.edge_access.tolist(),
            strict=True,
        )
    ):
        forward = flags & (Access.BIKE_FORWARD if activity is CYCLE else Access.FOOT)
        backward = flags & (Access.BIKE_BACKWARD if activity is CYCLE else Access.FOOT)
        if forward:
            graph.add_edge(a, b, index=k)
        if backward:
            graph.add_edge(b, a, index=k)
    if origin == destination:
        return [[]]
    if origin not in graph or destination not in graph:
        return []
    return [
        [graph.edges[a, b]["index"] for a, b in itertools.pairwise(nodes)]
        for nodes in nx.all_simple_paths(graph, origin, destination)
    ]


def edge_doses(network: StreetNetwork, loads: Sequence[float]) -> FloatArray:
    node_loads = np.asarray(loads)
    doses: FloatArray = (
        network.edge_length * (node_loads[network.edge_from] + node_loads[network.edge_to]) / 2
    )
    return doses


cases = st.tuples(st.integers(2, 4), st.integers(2, 5)).flatmap(
    lambda shape: st.tuples(
        st.just(shape),
        st.lists(st.floats(0.05, 5.0), min_size=shape[0] * shape[1], max_size=shape[0] * shape[1]),
        st.lists(
            st.sampled_from(ONE_WAY),
            min_size=2 * shape[0] * shape[1],
            max_size=2 * shape[0] * shape[1],
        ),
        st.integers(0, shape[0] * shape[1] - 1),
        st.integers(0, shape[0] * shape[1] - 1),
        st.sampled_from([WALK, CYCLE]),
        st.floats(0.0, 1.0),
    )
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases)
def test_each_budget_gets_exactly_the_least_dose_route_within_it(
    case: tuple[tuple[int, int], list[float], list[Access], int, int, PlanActivityType, float],
) -> None:
    (rows, cols), loads, flags, origin, destination, activity, extra = case
    flag_of = iter(flags)
    network = grid(rows, cols, access=lambda a, b: next(flag_of))
    router = ScipyRouter(network)
    lengths, doses = network.edge_length, edge_doses(network, loads)
    shortest = router.path(origin, destination, activity, lengths)
    routes = [
        (float(lengths[p].sum()), float(doses[p].sum()), p)
        for p in every_route(network, activity, origin, destination)
    ]
    if shortest is None:
        assert not routes
        return

    def search(costs: FloatArray, limit: float | None) -> Path | None:
        return router.path(origin, destination, activity, costs, limit)

    corners = supported_routes(search, lengths, doses, shortest, max_searches=200).corners
    budget = corners[0].length * (1 + extra)
    exact = min(d for length, d, _ in routes if length <= budget * (1 + 1e-12))
    found = BudgetSearch(network, activity, doses, origin, destination).within(
        budget, best_within(corners, budget), hull_weight(corners, budget)
    )
    assert found.exact
    assert abs(found.dose - exact) <= 1e-9 * exact + 1e-12
    assert found.bound <= exact * (1 + 1e-9) + 1e-12
    # The route is what it says: a path from the origin to the destination within budget.
    edges = np.asarray(found.path.edges, dtype=np.intp)
    assert found.length <= budget * (1 + 1e-12)
    assert found.length == float(lengths[edges].sum())
    assert found.dose == float(doses[edges].sum())
    assert found.path.nodes[0] == origin
    assert found.path.nodes[-1] == destination
    assert len(found.path.edges) == len(found.path.nodes) - 1
    for edge, (a, b) in zip(found.path.edges, itertools.pairwise(found.path.nodes), strict=True):
        assert {a, b} == {int(network.edge_from[edge]), int(network.edge_to[edge])}


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases, st.floats(0.0, 50.0), st.integers(0, 6))
def test_any_weight_is_sound_and_a_search_cut_short_states_a_true_gap(
    case: tuple[tuple[int, int], list[float], list[Access], int, int, PlanActivityType, float],
    weight: float,
    max_labels: int,
) -> None:
    """With any λ, and stopped after a few labels, the route is within the budget, the bound
    never exceeds the exact least dose and the dose never undercuts it."""
    (rows, cols), loads, _, origin, destination, _, extra = case
    network = grid(rows, cols)
    router = ScipyRouter(network)
    lengths, doses = network.edge_length, edge_doses(network, loads)
    shortest = router.path(origin, destination, WALK, lengths)
    assert shortest is not None
    routes = [
        (float(lengths[p].sum()), float(doses[p].sum()))
        for p in every_route(network, WALK, origin, destination)
    ]
    budget = float(lengths[shortest.edges].sum()) * (1 + extra)
    exact = min(d for length, d in routes if length <= budget * (1 + 1e-12))
    from cleanair_core.routes.frontier import Corner

    incumbent = Corner(
        shortest, float(lengths[shortest.edges].sum()), float(doses[shortest.edges].sum())
    )
    found = BudgetSearch(network, WALK, doses, origin, destination).within(
        budget, incumbent, weight, max_labels=max_labels
    )
    assert found.length <= budget * (1 + 1e-12)
    assert found.bound <= exact * (1 + 1e-9) + 1e-12
    assert found.dose >= exact * (1 - 1e-9) - 1e-12
    if found.exact:
        assert abs(found.dose - exact) <= 1e-9 * exact + 1e-12


def test_a_cleaner_route_above_the_hull_is_found() -> None:
    """Rows ever cleaner and ever longer to reach; row 1 is not a corner of the hull (rows 0
    and 2 make it look dear), so LARAC's answer within its length is the direct route, but
    the budget search finds row 1."""
    cols, row_loads = 12, [3.0, 2.0, 1.0, 0.2]
    network = grid(4, cols)
    router = ScipyRouter(network)
    lengths = network.edge_length
    doses = edge_doses(network, [row_loads[k // cols] for k in range(network.node_count)])
    shortest = router.path(0, cols - 1, WALK, lengths)
    assert shortest is not None

    def search(costs: FloatArray, limit: float | None) -> Path | None:
        return router.path(0, cols - 1, WALK, costs, limit)

    corners = supported_routes(search, lengths, doses, shortest).corners
    row_one = corners[0].length + 2 * float(lengths[0])
    budget = row_one * 1.001  # row 1's route fits, row 2's does not
    larac = best_within(corners, budget)
    found = BudgetSearch(network, WALK, doses, 0, cols - 1).within(
        budget, larac, hull_weight(corners, budget)
    )
    assert found.exact
    assert found.dose < larac.dose * 0.99
    assert max(node // cols for node in found.path.nodes) == 1

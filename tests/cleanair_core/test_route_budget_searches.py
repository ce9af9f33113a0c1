"""A budget search's reverse searches: the heap and the NumPy rounds find the same costs to go
to the last bit, so the budgets' routes, doses and bounds do not depend on which ran; and a
plan's budgets that share a hull edge share its reverse search.

`budgets.HEAP_NODES = 0` sends every reverse search to the rounds, as before the heap.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterator
from datetime import UTC, datetime

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cleanair_core.routes.budgets as budgets
import cleanair_core.routes.planner as planner
from cleanair_core.errors import PlanRejected
from cleanair_core.geo import distance_m
from cleanair_core.routes.budgets import Budgeted, BudgetSearch
from cleanair_core.routes.frontier import best_within, hull_weight, supported_routes
from cleanair_core.routes.network import Access, FloatArray, Path, PlanActivityType, StreetNetwork
from cleanair_core.routes.network_air import NetworkAir
from cleanair_core.routes.plans import PlanRequest
from cleanair_core.routes.results import PlanResult
from cleanair_sources.street_router import LoadedNetworks, ScipyRouter
from support.networks import grid

WALK, CYCLE = PlanActivityType.WALKING, PlanActivityType.CYCLING
AT = datetime(2026, 11, 24, 12, 20, tzinfo=UTC)
ONE_WAY = (Access.FOOT | Access.BIKE, Access.FOOT | Access.BIKE_FORWARD, Access.BIKE_BACKWARD)

#: Edge costs with ties and zeros, where the order of relaxation could show if it mattered.
costs = st.one_of(st.floats(0.0, 5.0), st.sampled_from([0.0, 0.1, 0.2, 0.3, 1.0 / 3.0]))

cases = st.tuples(st.integers(2, 5), st.integers(2, 6)).flatmap(
    lambda shape: st.tuples(
        st.just(shape),
        st.lists(costs, min_size=2 * shape[0] * shape[1], max_size=2 * shape[0] * shape[1]),
        st.lists(
            st.sampled_from(ONE_WAY),
            min_size=2 * shape[0] * shape[1],
            max_size=2 * shape[0] * shape[1],
        ),
        st.integers(0, shape[0] * shape[1] - 1),
        st.integers(0, shape[0] * shape[1] - 1),
        st.sampled_from([WALK, CYCLE]),
        st.lists(st.floats(0.0, 1.0), min_size=1, max_size=4),
    )
)


def budget_routes_of(
    network: StreetNetwork,
    activity: PlanActivityType,
    doses: FloatArray,
    origin: int,
    destination: int,
    extras: list[float],
) -> tuple[list[Budgeted], int] | None:
    """The budget search's answers for budgets `extras` over the shortest route (each with
    its hull weight) and the reverse searches made; None when no route joins the ends."""
    router = ScipyRouter(network)
    lengths = network.edge_length
    shortest = router.path(origin, destination, activity, lengths)
    if shortest is None:
        return None

    def search(costs: FloatArray, limit: float | None) -> Path | None:
        return router.path(origin, destination, activity, costs, limit)

    corners = supported_routes(search, lengths, doses, shortest, max_searches=200).corners
    found = BudgetSearch(network, activity, doses, origin, destination)
    answers = []
    for extra in extras:
        budget = corners[0].length * (1 + extra)
        answers.append(
            found.within(budget, best_within(corners, budget), hull_weight(corners, budget))
        )
    return answers, found.reverse_searches


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases)
def test_the_heap_and_the_rounds_find_the_same_costs_to_go_to_the_last_bit(
    case: tuple[
        tuple[int, int], list[float], list[Access], int, int, PlanActivityType, list[float]
    ],
) -> None:
    (rows, cols), edge_costs, flags, origin, destination, activity, weights = case
    flag_of = iter(flags)
    network = grid(rows, cols, access=lambda a, b: next(flag_of))
    doses = np.asarray(edge_costs[: network.edge_count])
    search = BudgetSearch(network, activity, doses, origin, destination)
    for costs in [network.edge_length, doses, *(doses + w * network.edge_length for w in weights)]:
        arc_costs = costs[search._edge]
        # Bit for bit: lists of Python floats compare by value, and inf == inf.
        assert search._settled_to_end(arc_costs) == search._rounds_to_end(arc_costs)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases)
def test_budget_routes_doses_and_bounds_do_not_depend_on_the_reverse_search(
    case: tuple[
        tuple[int, int], list[float], list[Access], int, int, PlanActivityType, list[float]
    ],
) -> None:
    (rows, cols), edge_costs, flags, origin, destination, activity, extras = case
    flag_of = iter(flags)
    network = grid(rows, cols, access=lambda a, b: next(flag_of))
    doses = np.asarray(edge_costs[: network.edge_count])
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(budgets, "HEAP_NODES", 0)
        rounds = budget_routes_of(network, activity, doses, origin, destination, extras)
    heap = budget_routes_of(network, activity, doses, origin, destination, extras)
    assert heap == rounds


def test_budgets_on_one_hull_edge_share_its_reverse_search() -> None:
    # A 2 x 6 grid whose top row is dirty: the budgets of 10 % and 20 % over the straight
    # route both fall on the hull's one edge, so they share its weight.
    network = grid(2, 6)
    loads = np.where(network.edge_from < 6, 3.0, 1.0) * np.where(network.edge_to < 6, 3.0, 1.0)
    doses = network.edge_length * loads
    answer = budget_routes_of(network, WALK, doses, 0, 5, [0.1, 0.2, 0.1])
    assert answer is not None
    _, searches = answer
    # The lengths to go and one weight's costs to go; one per budget before (4).
    assert searches == 2


@pytest.fixture(scope="module")
def helsinki() -> StreetNetwork:
    from cleanair_runtime.composition.bootstrap import DEFAULT_NETWORK_FILE
    from cleanair_sources.osm_import import import_network

    return import_network(DEFAULT_NETWORK_FILE, "helsinki")


def helsinki_searches(network: StreetNetwork, count: int) -> Iterator[tuple[BudgetSearch, int]]:
    """Budget searches between random far-apart Helsinki nodes on walking doses that vary
    per street, with the node count of each."""
    rng = np.random.default_rng(5)
    doses = network.edge_length * rng.uniform(0.2, 4.0, network.edge_count)
    walkable = np.unique(network.edge_from[network.usable(WALK)]).tolist()
    pick = random.Random(5)
    while count:
        origin, destination = pick.choice(walkable), pick.choice(walkable)
        search = BudgetSearch(network, WALK, doses, origin, destination)
        if search._to_end_length[search._origin] < 1000.0:
            continue
        count -= 1
        yield search, len(search._nodes)


def test_on_helsinki_the_heap_and_the_rounds_agree_to_the_last_bit(
    helsinki: StreetNetwork,
) -> None:
    for search, nodes in helsinki_searches(helsinki, 4):
        assert nodes <= budgets.HEAP_NODES  # the heap's side of the threshold
        for weight in (0.0, 0.5, 3.0):
            costs = search._doses + weight * search._lengths
            assert search._settled_to_end(costs) == search._rounds_to_end(costs)


def test_helsinki_plans_budgets_are_those_of_the_rounds_and_share_searches(
    helsinki: StreetNetwork, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Plans through `planner.budget_routes`: each budget's route, length, dose and bound
    equal with the rounds alone, and each budget search makes one reverse search for the
    lengths and one per distinct weight."""
    made: list[tuple[BudgetSearch, list[float]]] = []

    class Counted(BudgetSearch):
        def within(
            self, budget: float, incumbent: object, weight: float, max_labels: int = 20_000
        ) -> Budgeted:
            if not made or made[-1][0] is not self:
                made.append((self, []))
            made[-1][1].append(weight)
            return super().within(budget, incumbent, weight, max_labels)  # type: ignore[arg-type]

    from cleanair_core.air.street_level import street_level_air
    from cleanair_sources.embedded_model import EmbeddedModel
    from cleanair_sources.gazetteer import Gazetteer
    from cleanair_sources.street_increments import NetworkIncrements

    model = EmbeddedModel(Gazetteer.load())
    air = street_level_air(model, model, NetworkIncrements([helsinki]))
    networks = LoadedNetworks([helsinki])
    walkable = np.unique(helsinki.edge_from[helsinki.usable(WALK)]).tolist()
    pick = random.Random(43)
    requests: list[PlanRequest] = []
    while len(requests) < 12:
        start, end = (helsinki.node(int(pick.choice(walkable))) for _ in range(2))
        if 600 <= distance_m(start, end) <= 2500:
            requests.append(PlanRequest(start, end, WALK, AT))

    def plans() -> list[PlanResult | str]:
        kept = NetworkAir()
        answers: list[PlanResult | str] = []
        for request in requests:
            try:
                answers.append(
                    asyncio.run(planner.plan_routes(request, networks, air, network_air=kept))
                )
            except PlanRejected as exc:
                answers.append(exc.detail)
        return answers

    monkeypatch.setattr(planner, "BudgetSearch", Counted)
    heap = plans()
    assert made, "no plan needed a budget search"
    for search, weights in made:
        assert search.reverse_searches == 1 + len(set(weights))
    assert any(len(set(weights)) < len(weights) for _, weights in made)
    monkeypatch.setattr(budgets, "HEAP_NODES", 0)
    assert plans() == heap

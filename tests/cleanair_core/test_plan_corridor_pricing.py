"""A plan prices its corridor alone (issue 34): on a city-scale network its searches are
given the costs of the corridor's edges, not of every edge, and its plans are the ones that
pricing every edge found (on Helsinki walks and on a generated city)."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cleanair_core.routes.budgets as budgets
import cleanair_core.routes.planner as planner
from cleanair_core.air.quality_source import AirQualitySource, GriddedAir
from cleanair_core.errors import PlanRejected
from cleanair_core.geo import Point, distance_m
from cleanair_core.routes.frontier import Frontier, supported_routes
from cleanair_core.routes.network import Access, FloatArray, Path, PlanActivityType, StreetNetwork
from cleanair_core.routes.network_air import NetworkAir
from cleanair_core.routes.plans import PlanRequest
from cleanair_core.routes.results import PlanResult
from cleanair_sources.street_router import LoadedNetworks, ScipyRouter
from support.networks import city_grid

WALK, CYCLE = PlanActivityType.WALKING, PlanActivityType.CYCLING
START = datetime(2026, 11, 24, 6, 40, tzinfo=UTC)
#: Three times of day; the last two cross an hour within a long walk.
HOURS = (START, START + timedelta(hours=4, minutes=51), START + timedelta(hours=14, minutes=48))


def street_air(network: StreetNetwork) -> GriddedAir:
    from cleanair_core.air.street_level import street_level_air
    from cleanair_sources.embedded_model import EmbeddedModel
    from cleanair_sources.gazetteer import Gazetteer
    from cleanair_sources.street_increments import NetworkIncrements

    model = EmbeddedModel(Gazetteer.load())
    air = street_level_air(model, model, NetworkIncrements([network]))
    assert isinstance(air, GriddedAir)
    return air


@pytest.fixture(scope="module")
def helsinki() -> tuple[StreetNetwork, GriddedAir]:
    from cleanair_runtime.composition.bootstrap import DEFAULT_NETWORK_FILE
    from cleanair_sources.osm_import import import_network

    network = import_network(DEFAULT_NETWORK_FILE, "helsinki")
    return network, street_air(network)


@pytest.fixture(scope="module")
def city() -> tuple[StreetNetwork, GriddedAir]:
    # 160 x 160 nodes: more than `plan_area.SMALL_NETWORK_NODES`, so the plan's areas are
    # found near its ends, as on a city-scale network.
    network = city_grid(160)
    return network, street_air(network)


def walks(
    network: StreetNetwork, count: int, seed: int, shortest: float, longest: float
) -> list[tuple[Point, Point]]:
    rng = random.Random(seed)
    walkable = np.unique(network.edge_from[network.usable(WALK)]).tolist()
    found: list[tuple[Point, Point]] = []
    while len(found) < count:
        start, end = (network.node(int(rng.choice(walkable))) for _ in range(2))
        if shortest <= distance_m(start, end) <= longest:
            found.append((start, end))
    return found


def plans(
    network: StreetNetwork,
    air: AirQualitySource,
    pairs: list[tuple[Point, Point]],
    activities: tuple[PlanActivityType, ...] = (WALK,),
) -> Iterator[PlanResult | str]:
    networks = LoadedNetworks([network])
    for activity in activities:
        for at in HOURS:
            kept = NetworkAir()
            for start, end in pairs:
                request = PlanRequest(start, end, activity, at)
                try:
                    yield asyncio.run(planner.plan_routes(request, networks, air, network_air=kept))
                except PlanRejected as exc:
                    yield exc.detail


def price_every_edge(monkeypatch: pytest.MonkeyPatch) -> None:
    """The computation before: the doses and the tie-break's scale over every edge, each
    search's costs built for every edge, the budget search over every edge."""
    monkeypatch.setattr(
        planner, "edges_between", lambda network, _: np.arange(network.edge_count, dtype=np.intp)
    )

    def whole_network_frontier(
        search: Callable[[FloatArray, float | None], Path | None],
        lengths: FloatArray,
        doses: FloatArray,
        shortest: Path,
        *,
        edges: Any = None,
        scale: Any = None,
        **options: Any,
    ) -> Frontier:
        # The corridor reads its own edges' costs out of the whole network's.
        def every_edge(costs: FloatArray, limit: float | None) -> Path | None:
            return search(costs if edges is None else costs[edges], limit)

        return supported_routes(every_edge, lengths, doses, shortest, **options)

    monkeypatch.setattr(planner, "supported_routes", whole_network_frontier)
    budget_search = budgets.BudgetSearch
    monkeypatch.setattr(
        planner,
        "BudgetSearch",
        lambda *args, edges=None: budget_search(*args),
    )


def test_helsinki_plans_are_those_of_pricing_every_edge(
    helsinki: tuple[StreetNetwork, GriddedAir], monkeypatch: pytest.MonkeyPatch
) -> None:
    network, air = helsinki
    pairs = walks(network, 6, 41, 500, 3000)
    corridor = list(plans(network, air, pairs, (WALK, CYCLE)))
    assert sum(isinstance(r, PlanResult) for r in corridor) >= 30
    price_every_edge(monkeypatch)
    assert list(plans(network, air, pairs, (WALK, CYCLE))) == corridor


def test_city_plans_are_those_of_pricing_every_edge(
    city: tuple[StreetNetwork, GriddedAir], monkeypatch: pytest.MonkeyPatch
) -> None:
    network, air = city
    pairs = walks(network, 4, 43, 1500, 6000)
    corridor = list(plans(network, air, pairs))
    assert sum(isinstance(r, PlanResult) for r in corridor) >= 10
    price_every_edge(monkeypatch)
    assert list(plans(network, air, pairs)) == corridor


def test_a_city_plans_searches_are_given_its_corridors_costs_alone(
    city: tuple[StreetNetwork, GriddedAir], monkeypatch: pytest.MonkeyPatch
) -> None:
    network, air = city
    priced: list[int] = []
    corridor = type(ScipyRouter(network).corridor(WALK, np.arange(3, dtype=np.intp)))
    for name in ("path", "path_on_edges"):
        search = getattr(corridor, name, None)
        if search is None:
            continue  # before the corridor took its own edges' costs

        def spied(self: Any, *args: Any, search: Any = search, **kwargs: Any) -> Path | None:
            priced.append(len(args[2]))
            found: Path | None = search(self, *args, **kwargs)
            return found

        monkeypatch.setattr(corridor, name, spied)
    results = list(plans(network, air, walks(network, 2, 44, 1500, 2500)))
    assert any(isinstance(r, PlanResult) for r in results)
    # The baseline's search is priced by the network's own lengths; every other search of
    # the plan (the frontier's, the proof's) by its corridor's edges alone.
    others = [size for size in priced if size != network.edge_count]
    assert len(others) >= len(results)  # at least the least-dose route's search each
    assert max(others) < network.edge_count / 4


@settings(max_examples=100, deadline=None)
@given(st.integers(2, 9), st.data())
def test_a_corridor_finds_the_same_path_priced_by_its_own_edges(
    size: int, data: st.DataObject
) -> None:
    network = city_grid(size)
    n, m = network.node_count, network.edge_count
    access = np.array(
        [
            data.draw(st.sampled_from([Access.FOOT | Access.BIKE, Access.BIKE_FORWARD]))
            for _ in range(m)
        ],
        dtype=np.uint8,
    )
    network = StreetNetwork(
        "drawn",
        network.node_lat,
        network.node_lon,
        network.edge_from,
        network.edge_to,
        network.edge_length,
        network.edge_class,
        access,
    )
    router = ScipyRouter(network)
    costs = np.array([data.draw(st.floats(0.5, 50.0)) for _ in range(m)])
    nodes = np.array(sorted(set(data.draw(st.lists(st.integers(0, n - 1), min_size=2)))))
    origin, destination = (int(data.draw(st.sampled_from(nodes.tolist()))) for _ in range(2))
    limit = data.draw(st.none() | st.floats(1.0, 500.0))
    for activity in (WALK, CYCLE):
        corridor = router.corridor(activity, nodes.astype(np.intp))
        edges = corridor.edges
        assert edges.tolist() == sorted(set(edges.tolist()))
        ours = corridor.path_on_edges(origin, destination, costs[edges], limit)
        assert ours == corridor.path(origin, destination, costs, limit)

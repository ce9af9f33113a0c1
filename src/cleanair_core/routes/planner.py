"""Use case: cleaner alternatives to the direct route between two points (contract 2.12).

How (docs/routing.md gives the numbers and why):
1. Snap start and end to the nearest edge the activity may use, within SNAP_DISTANCE_M
   (steps 1-3's geometry: `plan_area.py`).
2. Baseline: the shortest usable path (for cycling too: one speed for every edge makes the
   quickest path the shortest).
3. Air at the nodes: the outdoor air at every node that a route at most MAX_DETOUR longer than
   the baseline can pass (the ellipse around start and end), when its shortest path from the
   start reaches it: the air the enrichment endpoint gives for that place and time
   (`plan_air.py`; interpolated within the hour for a source that computes its values). An
   edge's dose is its length times the mean air load of its two ends: summed along a route,
   the very trapezoid integral the reported dose is (concentration x ventilation x time;
   ventilation and speed are the same for every edge of one activity). Edges with an end
   outside the ellipse or without data cannot be used; if data covers less than
   MIN_DATA_COVERAGE of the ellipse the plan is rejected rather than silently detoured.
4. Alternatives: the supported length/dose frontier between the baseline and the least-dose
   route (`frontier.py`): each route found is exactly the least-dose route no longer than
   itself. For each of LENGTH_BUDGETS the exact least-dose route within it (`budgets.py`:
   LARAC's answer, the best supported route, with the hull's gap closed by enumeration)
   comes first; the other supported routes stand in where a budget's is not kept.
5. Every route is enriched (measures per waypoint at its estimated time, summary, dose) as
   the enrichment endpoint enriches it, from the same air as step 3: for a route reaching
   each node when its shortest path does, its dose is its search cost times one factor for
   the whole plan.
6. Honest choice, the budgets' routes first, each group cleanest first: an alternative is
   offered only when it cuts the dose by at least MATERIAL_REDUCTION_PCT, is at most
   MAX_DETOUR longer than the baseline and shares at most MAX_SHARED of its length with every
   route already kept (the baseline first) (`choice.py`, which also words the goals).
7. Result: the alternatives kept, cleanest first, then the baseline; at most MAX_ROUTES. The
   baseline's description says what the search proved when no alternative is kept.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, TypeAlias

import attrs

from cleanair_core.air.activities import speed_m_s
from cleanair_core.air.quality_source import AirQualitySource
from cleanair_core.errors import PlanRejected
from cleanair_core.offload import Offload, inline
from cleanair_core.routes.budgets import Budgeted, BudgetSearch
from cleanair_core.routes.choice import (
    LENGTH_BUDGETS,
    MATERIAL_REDUCTION_PCT,
    MAX_DETOUR,
    MAX_ROUTES,
    MAX_SHARED,
    candidates,
    choose,
    format_distance,
    may_be_offered,
    route_length,
    shared_share,
    walk,
)
from cleanair_core.routes.frontier import (
    Corner,
    Frontier,
    Search,
    best_within,
    dose_scale,
    hull_weight,
    lower_bound,
    supported_routes,
)
from cleanair_core.routes.network import (
    Corridor,
    FloatArray,
    Path,
    PlanActivityType,
    Router,
    StreetNetwork,
    StreetNetworks,
)
from cleanair_core.routes.network_air import NetworkAir
from cleanair_core.routes.plan_air import (
    dose_columns,
    edge_doses_on,
    edges_between,
    least_loads,
    node_loads,
    walked_air,
)
from cleanair_core.routes.plan_area import (
    SNAP_DISTANCE_M,
    Around,
    earliest_arrivals,
    ellipse,
    reach_of,
    shortest_path,
    snapped,
    union,
)
from cleanair_core.routes.plans import PlanRequest
from cleanair_core.routes.results import PlanResult

# NumPy is imported by the functions that compute: the operator CLI's commands import this
# module and start faster without NumPy (tests/cleanair_runtime/test_cli_startup.py).
if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

# The planner's public face: the offer rules live in `choice.py` and the snapping distance in
# `plan_area.py`, named here too, as callers have always found them.
__all__ = [
    "LENGTH_BUDGETS",
    "MATERIAL_REDUCTION_PCT",
    "MAX_CANDIDATES",
    "MAX_DETOUR",
    "MAX_ROUTES",
    "MAX_SEARCHES",
    "MAX_SHARED",
    "MIN_DATA_COVERAGE",
    "SNAP_DISTANCE_M",
    "PlanGraph",
    "budget_routes",
    "format_distance",
    "plan_graph",
    "plan_routes",
    "shared_share",
]

#: Below this share of the ellipse's nodes with air data, a plan is rejected.
MIN_DATA_COVERAGE = 0.7
#: Most routes enriched per plan (the budgets' routes first, then the cleanest supported).
MAX_CANDIDATES = 8
#: Most path searches spent on the frontier per plan.
MAX_SEARCHES = 24

EdgeIndices: TypeAlias = "npt.NDArray[np.intp]"


@attrs.frozen
class PlanGraph:
    """What a plan searches: the router, the snapped ends, the baseline, and per edge its
    length and dose (`inf` where it may not be used)."""

    router: Router
    origin: int
    destination: int
    baseline: Path
    lengths: FloatArray
    doses: FloatArray
    #: Per edge, the least dose a route within MAX_DETOUR can meet on it: its ends' least
    #: load over every hour such a route can reach them in (`doses` itself when that is one
    #: hour for every node).
    least_doses: FloatArray
    #: The plan's searches run on it: every edge with a finite dose, and every route no
    #: longer than MAX_DETOUR over the baseline, lies in it.
    corridor: Corridor
    #: `frontier.dose_scale(lengths, doses)`, measured on the edges that can have a dose
    #: (None: measure it over every edge).
    scale: float | None = None

    @property
    def shortest(self) -> float:
        """The baseline's length, metres."""
        import numpy as np

        return float(self.lengths[np.asarray(self.baseline.edges, dtype=np.int64)].sum())

    def search(self, activity: PlanActivityType) -> Search:
        """Cheapest paths between the ends for per-edge costs."""

        def search(costs: FloatArray, limit: float | None) -> Path | None:
            return self.corridor.path(self.origin, self.destination, costs, limit)

        return search

    def search_on_edges(self) -> Search:
        """As `search`, with costs given for the corridor's `edges` alone, in their order."""

        def search(costs: FloatArray, limit: float | None) -> Path | None:
            return self.corridor.path_on_edges(self.origin, self.destination, costs, limit)

        return search


async def plan_graph(
    request: PlanRequest,
    networks: StreetNetworks,
    source: AirQualitySource,
    offload: Offload | None = None,
    network_air: NetworkAir | None = None,
) -> PlanGraph:
    """Steps 1-3 of a plan (see the module documentation): snapped ends, the baseline and
    the edge doses. Raises PlanRejected as `plan_routes` does."""
    import numpy as np

    run: Offload = offload or inline
    router = networks.covering([request.start, request.end])
    if router is None:
        raise PlanRejected("No street network covers the start and the end")
    activity = request.activity
    network = router.network
    lengths = network.edge_length
    speed = speed_m_s(activity.activity)

    def prepare() -> tuple[int, int, Path, EdgeIndices, FloatArray, FloatArray, Corridor]:
        # CPU work (the first snap builds the snapping tree): not on the event loop.
        origin = snapped(router, request.start, activity, "start")
        destination = snapped(router, request.end, activity, "end")
        end = network.node(destination)
        ends = Around(router, network.node(origin), end)
        baseline_path = shortest_path(router, origin, destination, activity, ends)
        if baseline_path is None:
            raise PlanRejected(f"No {activity.value} route connects the start and the end")
        shortest = float(lengths[np.asarray(baseline_path.edges, dtype=np.int64)].sum())
        longest = shortest * (1 + MAX_DETOUR)
        nodes = union(
            network.node_count,
            ellipse(router, request.start, request.end, longest),
            np.asarray(baseline_path.nodes, dtype=np.intp),
        )
        earliest = earliest_arrivals(router, origin, activity, nodes, longest, ends)
        # A route no longer than `longest` still has at least the straight line to the end
        # to go from a node: it reaches the node by `longest` minus that, at the latest.
        latest = np.maximum(longest - ends.to_b(nodes), earliest)
        # Every search of the plan runs between these nodes only: an edge with an end
        # outside `nodes` has no dose (it is never used), and every route no longer than
        # `longest` keeps to the ellipse around the snapped ends, whatever the search.
        between = ends.between(reach_of(router, longest))
        corridor = router.corridor(activity, union(network.node_count, nodes, between))
        return origin, destination, baseline_path, nodes, earliest / speed, latest / speed, corridor

    origin, destination, baseline_path, nodes, earliest, latest, corridor = await run(prepare)
    kept = network_air or NetworkAir()
    air = await walked_air(kept, network, nodes, earliest, source, request.start_time, run)
    columns = dose_columns(air)
    loads = node_loads(network, nodes, air, columns)
    if (
        nodes.size == 0
        or np.count_nonzero(~np.isnan(loads[nodes])) < MIN_DATA_COVERAGE * nodes.size
    ):
        raise PlanRejected("Air-quality data covers too little of the area to plan routes")
    least = await least_loads(
        kept, network, nodes, (earliest, latest), source, request.start_time, (loads, columns), run
    )
    # Only the edges between the ellipse's nodes can have a dose (the others' have an end
    # without air): priced alone, and the network's other millions left at inf.
    priced = await run(lambda: edges_between(network, nodes))
    doses, scale = await run(lambda: _doses_of(network, loads, priced))
    if least is not loads:
        least_doses, _ = await run(lambda: _doses_of(network, least, priced))
    else:
        least_doses = doses
    return PlanGraph(
        router, origin, destination, baseline_path, lengths, doses, least_doses, corridor, scale
    )


def _doses_of(
    network: StreetNetwork, loads: FloatArray, priced: EdgeIndices
) -> tuple[FloatArray, float]:
    """`edge_doses(network, loads)` when only `priced` edges can have a finite dose, and its
    `dose_scale`: the same numbers, measured on those edges."""
    import numpy as np

    some = edge_doses_on(network, loads, priced)
    doses = np.full(network.edge_count, np.inf)
    doses[priced] = some
    return doses, dose_scale(network.edge_length[priced], some)


async def plan_routes(
    request: PlanRequest,
    networks: StreetNetworks,
    source: AirQualitySource,
    offload: Offload | None = None,
    network_air: NetworkAir | None = None,
) -> PlanResult:
    """Plan `request`. Raises PlanRejected (with a readable reason) when there is no street
    data near an end or no path, and SourceUnavailable when the air cannot be had.

    `network_air` keeps the air at the network's nodes for later plans of the same hour (a
    new one per call when not given)."""
    run: Offload = offload or inline
    network_air = network_air or NetworkAir()
    graph = await plan_graph(request, networks, source, offload, network_air)
    shortest = graph.shortest
    longest = shortest * (1 + MAX_DETOUR)
    search = graph.search_on_edges()
    frontier = await run(
        lambda: supported_routes(
            search,
            graph.lengths,
            graph.doses,
            graph.baseline,
            max_searches=MAX_SEARCHES,
            max_length=longest,
            edges=graph.corridor.edges,
            scale=graph.scale,
        )
    )
    budgets = await run(lambda: budget_routes(graph, request.activity, frontier))
    network = graph.router.network
    walked = walk(network, graph.baseline, request)
    chosen, standing_in = _worth_enriching(budgets, frontier.corners, graph.baseline, shortest)
    # Enriched together (one call to the source), less what the choice would pass over
    # whatever the air: enriching was the most of a plan's time outside its searches.
    groups = [
        [
            walk(network, path, request)
            for path in paths
            if may_be_offered(path, route_length(network, path), walked, graph.lengths)
        ]
        for paths in (chosen, standing_in)
    ]
    baseline, *enriched = await candidates([walked, *groups[0], *groups[1]], request, source)
    widest = budgets[_BUDGETS.index(MAX_DETOUR)]
    proven = await run(lambda: _proven(frontier, widest, longest, graph, search))
    split = len(groups[0])
    return choose(
        request.activity, baseline, enriched[:split], enriched[split:], proven, graph.lengths
    )


#: Every budget searched: the alternatives' and the detour limit, whose bound the words use.
_BUDGETS = tuple(sorted({*LENGTH_BUDGETS, MAX_DETOUR}))


def budget_routes(
    graph: PlanGraph, activity: PlanActivityType, frontier: Frontier
) -> list[Budgeted]:
    """Per budget of LENGTH_BUDGETS and MAX_DETOUR, in increasing order, the least-dose route
    no longer than the baseline by that share, with its proved bound.

    LARAC's answer (the best supported route within the budget) is proved exact by the hull
    when the frontier is complete and the hull's bound at the budget reaches its dose (a
    corner within the budget is the hull's lowest point there); otherwise `BudgetSearch`
    closes the gap, built once per plan and only then."""
    corners = frontier.corners
    search: BudgetSearch | None = None
    found: list[Budgeted] = []
    for share in _BUDGETS:
        budget = graph.shortest * (1 + share) * (1 + 1e-12)
        larac = best_within(corners, budget)
        hull = lower_bound(corners, budget) if frontier.complete else -math.inf
        if hull >= larac.dose * (1 - 1e-9) or not math.isfinite(larac.dose):
            found.append(Budgeted(larac.path, larac.length, larac.dose, min(hull, larac.dose)))
            continue
        if search is None:
            search = BudgetSearch(
                graph.router.network,
                activity,
                graph.doses,
                graph.origin,
                graph.destination,
                edges=graph.corridor.edges,
            )
        found.append(search.within(budget, larac, hull_weight(corners, budget)))
    return found


def _worth_enriching(
    budgets: list[Budgeted], corners: list[Corner], baseline: Path, shortest: float
) -> tuple[list[Path], list[Path]]:
    """The budgets' routes (the baseline left out), and the other supported routes within
    MAX_DETOUR cleanest first to stand in for them: at most MAX_CANDIDATES in all."""
    longest = shortest * (1 + MAX_DETOUR) * (1 + 1e-9)
    chosen: list[Path] = []
    for route in budgets:
        if route.path != baseline and route.path not in chosen and route.length <= longest:
            chosen.append(route.path)
    others = sorted(
        (c for c in corners[1:] if c.length <= longest and c.path not in chosen),
        key=lambda c: c.dose,
    )
    return chosen, [c.path for c in others][: max(0, MAX_CANDIDATES - len(chosen))]


def _proven(
    frontier: Frontier, widest: Budgeted, longest: float, graph: PlanGraph, search: Search
) -> float | None:
    """The least share of the baseline's dose any route up to `longest` can have, as far as
    the searches proved it; None when they proved nothing. `search` is given costs for the
    corridor's edges alone (`PlanGraph.search_on_edges`).

    Within one hour that is the bound of the budget search at `longest` (`widest`). Across
    an hour change a detour reaches some nodes later than the search weighed them, and may
    meet cleaner air there: every such route is then bounded, when the frontier is complete,
    with the least air it can meet (`least_doses`), by the Lagrangian bound at the weight of
    the frontier's edge at `longest` (one more search)."""
    import numpy as np

    baseline = frontier.corners[0]
    if not baseline.dose > 0 or not math.isfinite(baseline.dose):
        return None
    if graph.least_doses is graph.doses:
        return max(0.0, min(widest.bound, baseline.dose)) / baseline.dose
    if not frontier.complete:
        return None
    weight = hull_weight(frontier.corners, longest)
    priced = graph.corridor.edges
    path = search(graph.least_doses[priced] + weight * graph.lengths[priced], None)
    if path is None:
        return None
    edges = np.asarray(path.edges, dtype=np.int64)
    cheapest = float((graph.least_doses[edges] + weight * graph.lengths[edges]).sum())
    return min(cheapest - weight * longest, baseline.dose) / baseline.dose

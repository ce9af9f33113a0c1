"""Use case: cleaner alternatives to the direct route between two points (contract 2.12).

How (docs/routing.md gives the numbers and why):
1. Snap start and end to the nearest edge the activity may use, within SNAP_DISTANCE_M.
2. Baseline: the shortest usable path (for cycling too: one speed for every edge makes the
   quickest path the shortest).
3. Air at the nodes: the outdoor air at every node that a route at most MAX_DETOUR longer than
   the baseline can pass (the ellipse around start and end), when its shortest path from the
   start reaches it: the air the enrichment endpoint gives for that place and time
   (`_walked_air`; interpolated within the hour for a source that computes its values). An
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
   route already kept (the baseline first).
7. Result: the alternatives kept, cleanest first, then the baseline; at most MAX_ROUTES. The
   baseline's description says what the search proved when no alternative is kept.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, TypeAlias

import attrs

from cleanair_core.air.activities import speed_m_s
from cleanair_core.air.dose import GUIDELINE_LEVELS
from cleanair_core.air.exposure import EnvironmentType
from cleanair_core.air.point_score import current_hour
from cleanair_core.air.pollutants import SCORED
from cleanair_core.air.quality_source import AirQualitySource, GriddedAir, Sample
from cleanair_core.errors import PlanRejected, SourceUnavailable
from cleanair_core.geo import Point, distances_m
from cleanair_core.offload import Offload, inline
from cleanair_core.routes.budgets import Budgeted, BudgetSearch
from cleanair_core.routes.enrichment import EnrichedRoute, enrich_route
from cleanair_core.routes.frontier import (
    Corner,
    Frontier,
    Search,
    best_within,
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
from cleanair_core.routes.network_air import SLICE, NetworkAir, hours_reached
from cleanair_core.routes.plans import PlanRequest
from cleanair_core.routes.results import PlannedRoute, PlanResult, RouteGoal
from cleanair_core.routes.times import estimated_times

# NumPy is imported by the functions that compute: the operator CLI's commands import this
# module and start faster without NumPy (tests/cleanair_http/test_cli_startup.py).
if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

#: Alternatives aim at these length budgets over the baseline's length: each one's exact
#: least-dose route is a candidate.
LENGTH_BUDGETS = (0.05, 0.10, 0.25)
#: No alternative is longer than the baseline by more than this share (OSRM and GraphHopper
#: use the same limit); what the baseline's words prove is proved up to it.
MAX_DETOUR = 0.25
#: Every returned route shares at most this share of its length with any other returned one.
MAX_SHARED = 0.75
#: A dose cut smaller than this (percent) is not offered as cleaner: it lies within about one
#: standard error of a route's modelled dose (docs/routing.md, "The materiality threshold").
MATERIAL_REDUCTION_PCT = 3.0
#: A start or end farther than this from any usable street is rejected.
SNAP_DISTANCE_M = 250.0
#: Below this share of the ellipse's nodes with air data, a plan is rejected.
MIN_DATA_COVERAGE = 0.7
#: Alternatives plus the baseline.
MAX_ROUTES = len(LENGTH_BUDGETS) + 1
#: Most routes enriched per plan (the budgets' routes first, then the cleanest supported).
MAX_CANDIDATES = 8
#: Most path searches spent on the frontier per plan.
MAX_SEARCHES = 24
#: The baseline is first looked for among the nodes a path of SHORTEST_DETOUR times the
#: straight line plus SHORTEST_SLACK_M can pass (`_shortest`), a bound doubled while no path
#: keeps to it: city streets are typically 1.2-1.4 times the straight line (a grid's are at
#: most 1.41 times), and a short trip's may be far more (a river, a railway).
SHORTEST_DETOUR = 1.5
SHORTEST_SLACK_M = 1_000.0
#: A search over more than this share of a network's nodes searches the whole network: its
#: own corridor would cost more to build than it saves.
WHOLE_NETWORK_SHARE = 0.5

EdgeIndices: TypeAlias = "npt.NDArray[np.intp]"


@attrs.frozen
class _Candidate:
    path: Path
    distance: float
    route: EnrichedRoute

    @property
    def dose(self) -> float | None:
        return self.route.summary.inhaled_dose

    @property
    def score(self) -> float | None:
        banded = self.route.summary.clean_air_score
        return None if banded is None else banded.score


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
        origin = _snap(router, request.start, activity, "start")
        destination = _snap(router, request.end, activity, "end")
        baseline_path = _shortest(router, origin, destination, activity)
        if baseline_path is None:
            raise PlanRejected(f"No {activity.value} route connects the start and the end")
        shortest = float(lengths[np.asarray(baseline_path.edges, dtype=np.int64)].sum())
        longest = shortest * (1 + MAX_DETOUR)
        nodes = _ellipse(router, request.start, request.end, longest)
        nodes = np.union1d(nodes, np.asarray(baseline_path.nodes, dtype=np.intp))
        earliest = _earliest_arrivals(router, origin, activity, nodes, longest)
        # A route no longer than `longest` still has at least the straight line to the end
        # to go from a node: it reaches the node by `longest` minus that, at the latest.
        end = network.node(destination)
        to_end = distances_m(end.lat, end.lon, network.node_lat[nodes], network.node_lon[nodes])
        latest = np.maximum(longest - to_end, earliest)
        # Every search of the plan runs between these nodes only: an edge with an end
        # outside `nodes` has no dose (it is never used), and every route no longer than
        # `longest` keeps to the ellipse around the snapped ends, whatever the search.
        between = _between(router, network.node(origin), end, longest)
        corridor = router.corridor(activity, np.union1d(nodes, between))
        return origin, destination, baseline_path, nodes, earliest / speed, latest / speed, corridor

    origin, destination, baseline_path, nodes, earliest, latest, corridor = await run(prepare)
    kept = network_air or NetworkAir()
    air = await _walked_air(kept, network, nodes, earliest, source, request.start_time, run)
    columns = _dose_columns(air)
    loads = _loads(network, nodes, air, columns)
    if (
        nodes.size == 0
        or np.count_nonzero(~np.isnan(loads[nodes])) < MIN_DATA_COVERAGE * nodes.size
    ):
        raise PlanRejected("Air-quality data covers too little of the area to plan routes")
    least = await _least_loads(
        kept, network, nodes, (earliest, latest), source, request.start_time, (loads, columns), run
    )
    doses = await run(lambda: _edge_doses(network, loads))
    least_doses = doses if least is loads else await run(lambda: _edge_doses(network, least))
    return PlanGraph(
        router, origin, destination, baseline_path, lengths, doses, least_doses, corridor
    )


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
    search = graph.search(request.activity)
    frontier = await run(
        lambda: supported_routes(
            search,
            graph.lengths,
            graph.doses,
            graph.baseline,
            max_searches=MAX_SEARCHES,
            max_length=longest,
        )
    )
    budgets = await run(lambda: budget_routes(graph, request.activity, frontier))
    network = graph.router.network
    baseline = await _candidate(network, graph.baseline, request, source)
    chosen, standing_in = _worth_enriching(budgets, frontier.corners, graph.baseline, shortest)
    enriched = [
        [await _candidate(network, path, request, source) for path in paths]
        for paths in (chosen, standing_in)
    ]
    widest = budgets[_BUDGETS.index(MAX_DETOUR)]
    proven = await run(lambda: _proven(frontier, widest, longest, graph, search))
    return _result(request.activity, baseline, enriched[0], enriched[1], proven, graph.lengths)


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
                graph.router.network, activity, graph.doses, graph.origin, graph.destination
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
    the searches proved it; None when they proved nothing.

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
    path = search(graph.least_doses + weight * graph.lengths, None)
    if path is None:
        return None
    edges = np.asarray(path.edges, dtype=np.int64)
    cheapest = float((graph.least_doses[edges] + weight * graph.lengths[edges]).sum())
    return min(cheapest - weight * longest, baseline.dose) / baseline.dose


def _snap(router: Router, point: Point, activity: PlanActivityType, end: str) -> int:
    snap = router.snap(point, activity)
    if snap is None or snap.distance_m > SNAP_DISTANCE_M:
        raise PlanRejected(
            f"No street for {activity.value} within {SNAP_DISTANCE_M:.0f} m of the {end}"
        )
    return snap.node


def _shortest(
    router: Router, origin: int, destination: int, activity: PlanActivityType
) -> Path | None:
    """The shortest usable path, searched between the nodes a path no longer than a bound
    can pass (every node of such a path is within the bound of both ends, together), the
    bound doubled until the path is found or the corridor holds every node: the same path
    as a search of the whole network, which a city-scale network makes slow."""
    import numpy as np

    network = router.network
    here, there = network.node(origin), network.node(destination)
    straight = distances_m(here.lat, here.lon, np.array([there.lat]), np.array([there.lon]))[0]
    bound = SHORTEST_DETOUR * straight + SHORTEST_SLACK_M
    while True:
        nodes = _between(router, here, there, bound)
        if nodes.size > WHOLE_NETWORK_SHARE * network.node_count:
            # Most of the network: building its corridor costs more than it saves.
            return router.path(origin, destination, activity, network.edge_length)
        found = router.corridor(activity, nodes).path(
            origin, destination, network.edge_length, bound
        )
        if found is not None:
            return found
        bound *= 2


def _between(router: Router, a: Point, b: Point, bound: float) -> EdgeIndices:
    """The nodes whose straight-line distances to `a` and to `b` add up to at most `bound`
    (times the router's `chord_ratio`, with room for rounding): every node a path between
    them no longer than `bound` can pass."""
    import numpy as np

    reach = bound * router.chord_ratio * (1 + 1e-9) + 1e-6
    near = router.nodes_within(a, reach)
    lat, lon = router.network.node_lat[near], router.network.node_lon[near]
    total = distances_m(a.lat, a.lon, lat, lon) + distances_m(b.lat, b.lon, lat, lon)
    nodes: EdgeIndices = near[total <= reach].astype(np.intp)
    return nodes


def _earliest_arrivals(
    router: Router, origin: int, activity: PlanActivityType, nodes: EdgeIndices, longest: float
) -> FloatArray:
    """Per node of `nodes`, the metres of street a route covers before it can reach it: its
    shortest path's length from `origin`, which is how far every route of this plan that takes
    that path has come (the baseline included, all of whose nodes it reaches so). Beyond
    `longest` no route within the detour limit passes: the straight line stands in."""
    import numpy as np

    here = router.network.node(origin)
    # Each node's shortest path no longer than `longest` keeps to the disc of that radius.
    disc = router.nodes_within(here, longest * router.chord_ratio * (1 + 1e-9) + 1e-6)
    if disc.size > WHOLE_NETWORK_SHARE * router.network.node_count:
        along = router.lengths_from(origin, activity, longest)[nodes]
    else:
        along = router.corridor(activity, disc).lengths_from(origin, longest)[nodes]
    straight = distances_m(
        here.lat, here.lon, router.network.node_lat[nodes], router.network.node_lon[nodes]
    )
    metres: FloatArray = np.where(np.isfinite(along), along, straight)
    return metres


def _ellipse(router: Router, start: Point, end: Point, longest: float) -> EdgeIndices:
    """The nodes a route from start to end no longer than `longest` can pass (the sum of
    their straight-line distances to both ends is at most that, plus the snapping reach)."""
    import numpy as np

    reach = longest + 2 * SNAP_DISTANCE_M  # the ends may be snapped that far away
    near = router.nodes_within(start, reach)
    lat, lon = router.network.node_lat[near], router.network.node_lon[near]
    inside = distances_m(start.lat, start.lon, lat, lon) + distances_m(end.lat, end.lon, lat, lon)
    nodes: EdgeIndices = near[inside <= reach].astype(np.intp)
    return nodes


async def _least_loads(
    network_air: NetworkAir,
    network: StreetNetwork,
    nodes: EdgeIndices,
    window: tuple[FloatArray, FloatArray],
    source: AirQualitySource,
    start_time: datetime,
    loads: tuple[FloatArray, list[int]],
    offload: Offload,
) -> FloatArray:
    """Per node, the least load a route within the detour limit can meet there, reaching it
    `window` seconds after `start_time` (earliest, latest). `loads` are the earliest's (the
    search's own) and the `SCORED` columns they are of; they are returned themselves when
    no route meets cleaner air later."""
    import numpy as np

    earliest, latest = window
    searched, columns = loads
    least = searched

    def lower(among: EdgeIndices, air: FloatArray) -> None:
        nonlocal least
        found = _loads(network, nodes[among], air, columns)
        least = np.where(np.isnan(least), least, np.fmin(least, found))

    # Every hour's start a route can reach a node at, after the earliest: its air there.
    step = max(1, source.update_interval)
    first = current_hour(start_time, step)
    offset = (start_time - first).total_seconds()
    _, first_index = hours_reached(start_time, earliest, step)
    _, last_index = hours_reached(start_time, latest, step)
    starts = [
        first + timedelta(seconds=step * k) for k in range(int(last_index.max(initial=0)) + 1)
    ]
    for later in range(1, int((last_index - first_index).max(initial=0)) + 1):
        index = first_index + later
        among = np.flatnonzero(index <= last_index)
        at = await network_air.at_nodes(
            network, source, nodes[among], starts, index[among], offload
        )
        lower(among, at)
        if not isinstance(source, GriddedAir):
            # An hourly source's air jumps at the hour: the hour before ends at other air
            # than the hour's start (that hour's background, this instant's traffic), a
            # microsecond before it.
            began = index[among] * float(step) - offset
            ended = np.maximum(began - 1e-6, earliest[among])
            lower(among, await _air_at(network, nodes[among], ended, source, start_time))
    # Air moving within the hour (interpolated between the hours' starts, or an hourly
    # source's at each instant) is least at one of the times above or at an end of the
    # times a node can be reached: the latest one too.
    everywhere = np.arange(nodes.size)
    lower(
        everywhere,
        await _walked_air(network_air, network, nodes, latest, source, start_time, offload),
    )
    if np.array_equal(least, searched, equal_nan=True):
        return searched
    return least


async def _node_air(
    network_air: NetworkAir,
    network: StreetNetwork,
    nodes: EdgeIndices,
    seconds: FloatArray,
    source: AirQualitySource,
    start_time: datetime,
    offload: Offload,
) -> FloatArray:
    """The air at `nodes` (a row each, a column per `SCORED` pollutant) for the hour of
    `start_time + seconds`, node by node."""
    hours, hour_of_node = hours_reached(start_time, seconds, source.update_interval)
    return await network_air.at_nodes(network, source, nodes, hours, hour_of_node, offload)


async def _air_at(
    network: StreetNetwork,
    nodes: EdgeIndices,
    seconds: FloatArray,
    source: AirQualitySource,
    start_time: datetime,
) -> FloatArray:
    """The air at `nodes` (a row each, a column per `SCORED` pollutant, NaN unknown) asked
    of `source` at `start_time + seconds`, node by node: what the enrichment endpoint gets
    for a waypoint there and then. In slices, each handing the event loop back."""
    import asyncio

    import numpy as np

    result = np.full((nodes.size, len(SCORED)), np.nan)
    lats, lons = network.node_lat[nodes].tolist(), network.node_lon[nodes].tolist()
    offsets = np.asarray(seconds, dtype=np.float64).tolist()
    for first in range(0, nodes.size, SLICE):
        if first:
            await asyncio.sleep(0)
        last = min(first + SLICE, nodes.size)
        samples = [
            Sample(Point(lats[i], lons[i]), start_time + timedelta(seconds=offsets[i]))
            for i in range(first, last)
        ]
        airs = await source.concentrations(samples)
        if len(airs) != len(samples):
            raise SourceUnavailable()
        for column, pollutant in enumerate(SCORED):
            result[first:last, column] = [
                np.nan if (value := air.get(pollutant)) is None else value for air in airs
            ]
    return result


async def _walked_air(
    network_air: NetworkAir,
    network: StreetNetwork,
    nodes: EdgeIndices,
    seconds: FloatArray,
    source: AirQualitySource,
    start_time: datetime,
    offload: Offload,
) -> FloatArray:
    """The air at `nodes` when a walk reaches each, `seconds` after `start_time`.

    A source that waits on the network (Open-Meteo) is asked for each node at that instant,
    as the enrichment endpoint asks it for a waypoint: its background has one value per hour,
    but street level over it follows the traffic of the time of day, and fusion fades with
    the time since the stations' hour, so the air of the hour's start put a walk's dose up
    to 7.9 % off the endpoint's (bench/departures.py). It is asked only in the hours the
    walks reach, which its routes' enrichment asks too: Open-Meteo answers them from its
    cache per cell and hour, no more upstream data. A source that computes its values
    (`GriddedAir`) moves within the hour too: each node's air is interpolated in time
    between the starts of its hour and the next, so the search weighs the air at the time
    the node is walked (exact for air that changes at a steady rate through the hour; the
    embedded model's hourly tables are such, its weather blocks nearly so). Both hours are
    kept per network, so the next plans of the hour ask the source nothing."""
    import numpy as np

    if not isinstance(source, GriddedAir):
        return await _air_at(network, nodes, seconds, source, start_time)
    air = await _node_air(network_air, network, nodes, seconds, source, start_time, offload)
    step = max(1, source.update_interval)
    following = seconds + step
    later = await _node_air(network_air, network, nodes, following, source, start_time, offload)
    offset = (start_time - current_hour(start_time, step)).total_seconds()
    share = np.mod(offset + seconds, step)[:, np.newaxis] / step
    walked: FloatArray = np.where(np.isnan(later), air, air + share * (later - air))
    return walked


def _dose_columns(air: FloatArray) -> list[int]:
    """The dose pollutants (their `SCORED` columns): those known at every node that knows any."""
    import numpy as np

    some = ~np.isnan(air).all(axis=1)
    return [c for c in range(len(SCORED)) if some.any() and not np.isnan(air[some, c]).any()]


def _loads(
    network: StreetNetwork, nodes: EdgeIndices, air: FloatArray, columns: list[int]
) -> FloatArray:
    """Per node, its air load from `columns` of `air` (`nodes`' rows); NaN elsewhere or
    without data."""
    import numpy as np

    loads = np.full(network.node_count, np.nan)
    if columns:
        guideline = np.array([GUIDELINE_LEVELS[SCORED[c]] for c in columns])
        loads[nodes] = (np.maximum(air[:, columns], 0.0) / guideline).mean(axis=1)
    return loads


def _edge_doses(network: StreetNetwork, loads: FloatArray) -> FloatArray:
    """Per edge, length x the mean load of its ends (inf where either is unknown): summed
    along a route, proportional to its trapezoid dose."""
    import numpy as np

    mean = (loads[network.edge_from] + loads[network.edge_to]) / 2
    doses: FloatArray = np.where(np.isnan(mean), np.inf, network.edge_length * mean)
    return doses


async def _candidate(
    network: StreetNetwork, path: Path, request: PlanRequest, source: AirQualitySource
) -> _Candidate:
    """A route enriched as the route-enrichment use case enriches the same waypoints and
    times, so the dose a plan reports is the one `POST /v1/airquality/routes` reports.

    Every source is asked for each waypoint at its own time, as enrichment asks it: every
    source the service builds moves within its hour (the embedded model follows the time of
    day, street level the traffic over any background, fusion fades), and the node air of
    the hour's start was up to 10 % off a walk's dose from the embedded model and 7.9 %
    from an hourly one at street level (bench/departures.py). It is a few milliseconds per
    route; an hourly source answers from its cache the hours the search asked. The dose is
    then the search's own cost of the route, up to one factor for the whole plan, wherever
    each node is reached when the search assumed."""
    points = [network.node(i) for i in path.nodes]
    activity = request.activity.activity
    times = estimated_times(points, request.start_time, speed_m_s(activity))
    distance = float(sum(float(network.edge_length[e]) for e in path.edges))
    route = await enrich_route(source, points, times, activity, EnvironmentType.OUTDOOR)
    return _Candidate(path, distance, route)


def shared_share(route: Path, other: Path, lengths: FloatArray) -> float:
    """The share of `route`'s length on edges `other` also uses (0..1; 0 for an empty route)."""
    import numpy as np

    edges = np.asarray(route.edges, dtype=np.int64)
    total = float(lengths[edges].sum())
    if total <= 0:
        return 0.0
    common = np.isin(edges, np.asarray(other.edges, dtype=np.int64))
    return float(lengths[edges[common]].sum()) / total


def _result(
    activity: PlanActivityType,
    baseline: _Candidate,
    chosen: list[_Candidate],
    standing_in: list[_Candidate],
    proven: float | None,
    lengths: FloatArray,
) -> PlanResult:
    """The budgets' routes (`chosen`) first, then those `standing_in` for them, each group
    cleanest first: keep what is materially cleaner, short enough and different enough from
    every route kept before it (see the module documentation); offered cleanest first."""
    kept: list[_Candidate] = []
    ordered = [*sorted(chosen, key=_cleanliness), *sorted(standing_in, key=_cleanliness)]
    for candidate in ordered:
        if len(kept) == MAX_ROUTES - 1:
            break
        if not _materially_cleaner(candidate, baseline):
            continue
        if candidate.distance > baseline.distance * (1 + MAX_DETOUR) * (1 + 1e-9):
            continue
        if any(
            max(
                shared_share(candidate.path, other.path, lengths),
                shared_share(other.path, candidate.path, lengths),
            )
            > MAX_SHARED
            for other in [baseline, *kept]
        ):
            continue  # too alike, whichever of the two is measured against the other
        kept.append(candidate)
    kept.sort(key=_cleanliness)
    routes = [_planned(c, baseline, _alternative_goal(c, baseline, kept[0])) for c in kept]
    routes.append(_planned(baseline, baseline, _baseline_goal(baseline, activity, kept, proven)))
    return PlanResult(
        activity=activity,
        routes=routes,
        original_distance=round(baseline.distance, 1),
        original_clean_air_score=baseline.score,
        original_dose=baseline.dose,
        best_route_index=_best_index([*kept, baseline]),
    )


def _materially_cleaner(c: _Candidate, baseline: _Candidate) -> bool:
    """A dose at least MATERIAL_REDUCTION_PCT lower; without doses, a higher score."""
    if c.dose is not None and baseline.dose is not None:
        return baseline.dose > 0 and c.dose <= baseline.dose * (1 - MATERIAL_REDUCTION_PCT / 100)
    if c.score is not None and baseline.score is not None:
        return c.score > baseline.score
    return False


def _cleanliness(c: _Candidate) -> tuple[float, float]:
    return (
        math.inf if c.dose is None else c.dose,
        -(c.score if c.score is not None else -math.inf),
    )


def _best_index(candidates: list[_Candidate]) -> int:
    doses = [c.dose for c in candidates]
    if any(d is not None for d in doses):
        return min((i for i, d in enumerate(doses) if d is not None), key=lambda i: doses[i] or 0.0)
    scores = [c.score for c in candidates]
    if any(s is not None for s in scores):
        return max(
            (i for i, s in enumerate(scores) if s is not None), key=lambda i: scores[i] or 0.0
        )
    return 0


def score_delta_pct(score: float | None, baseline: float | None) -> float:
    """Percentage improvement of the Clean Air Score over the baseline's (0 when either is
    unknown or the baseline's is 0)."""
    gain = _score_gain(score, baseline)
    return 0.0 if gain is None else round(gain, 1)


def _score_gain(score: float | None, baseline: float | None) -> float | None:
    """The unrounded percentage behind `score_delta_pct` (None where that is 0 for want of
    scores)."""
    if score is None or baseline is None or baseline <= 0:
        return None
    return (score - baseline) / baseline * 100


def dose_delta_pct(dose: float | None, baseline: float | None) -> float | None:
    """Percentage less pollution inhaled than on the baseline; None without a comparable
    baseline dose (unknown, or zero)."""
    cut = _dose_cut(dose, baseline)
    return None if cut is None else round(cut, 1)


def _dose_cut(dose: float | None, baseline: float | None) -> float | None:
    """The unrounded percentage behind `dose_delta_pct`."""
    if dose is None or baseline is None or baseline <= 0:
        return None
    return (1 - dose / baseline) * 100


def _planned(c: _Candidate, baseline: _Candidate, goal: RouteGoal) -> PlannedRoute:
    return PlannedRoute(
        route=c.route,
        distance=round(c.distance, 1),
        distance_delta=round(c.distance - baseline.distance),
        clean_air_score_delta_pct=score_delta_pct(c.score, baseline.score),
        dose_delta_pct=dose_delta_pct(c.dose, baseline.dose),
        duration=round(c.route.duration_s, 1),
        goal=goal,
    )


def format_distance(metres: float) -> str:
    """240 m, 1.2 km."""
    if abs(metres) < 1000:
        return f"{round(metres):d} m"
    return f"{metres / 1000:.1f} km"


def _cost_phrase(c: _Candidate, baseline: _Candidate) -> str:
    extra = c.distance - baseline.distance
    minutes = round((c.route.duration_s - baseline.route.duration_s) / 60)
    if round(extra) <= 0:
        return "at no extra distance"
    timing = f" (about {minutes} min)" if minutes >= 1 else ""
    return f"for {format_distance(extra)} more{timing}"


def _gain_phrase(c: _Candidate, baseline: _Candidate) -> str:
    # Whole percents rounded from the exact ratio: rounding the route's one-decimal figure
    # again would make 3.49 % read "4 %" (3.5 first).
    cut = _dose_cut(c.dose, baseline.dose)
    if cut is not None:
        return f"{cut:.0f} % less pollution inhaled"
    gain = _score_gain(c.score, baseline.score) or 0.0
    return f"a {gain:.0f} % better Clean Air Score"


def _alternative_goal(c: _Candidate, baseline: _Candidate, cleanest: _Candidate) -> RouteGoal:
    if c is cleanest:
        title = "Cleanest air"
    elif c.distance < cleanest.distance:
        title = "Cleaner air, shorter detour"
    else:
        title = "Cleaner air"
    description = f"{_gain_phrase(c, baseline)} {_cost_phrase(c, baseline)}"
    return RouteGoal(title, description[0].upper() + description[1:])


def _baseline_goal(
    baseline: _Candidate,
    activity: PlanActivityType,
    kept: list[_Candidate],
    proven: float | None,
) -> RouteGoal:
    """What the direct route is, and, with no alternative kept, only what the search proved."""
    minutes = max(1, round(baseline.route.duration_s / 60))
    summary = f"{format_distance(baseline.distance)}, about {minutes} min {activity.value}"
    longer = f"{MAX_DETOUR * 100:.0f} % longer"
    if kept:
        return RouteGoal("Shortest route", f"The direct route: {summary}")
    if proven is not None and proven >= 1 - 1e-9:
        return RouteGoal(
            "Direct route is the cleanest",
            f"No route up to {longer} has less pollution inhaled than the direct route ({summary})",
        )
    if proven is not None and proven >= 1 - MATERIAL_REDUCTION_PCT / 100:
        return RouteGoal(
            "Direct route",
            f"No route up to {longer} cuts the pollution inhaled by "
            f"{MATERIAL_REDUCTION_PCT:.0f} % or more: the direct route ({summary}) is as "
            "clean as any",
        )
    return RouteGoal(
        "Direct route",
        f"No cleaner route up to {longer} that differs enough from the direct route "
        f"({summary}) was found",
    )

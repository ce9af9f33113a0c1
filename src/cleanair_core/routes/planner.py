"""Use case: cleaner alternatives to the direct route between two points (contract 2.12).

How (after Green Paths, science.md "Cleaner routes"; the numbers are ours, in docs/routing.md):
1. Snap start and end to the nearest edge the activity may use, within SNAP_DISTANCE_M.
2. Baseline: the shortest usable path (for cycling too: one speed for every edge makes the
   quickest path the shortest).
3. Air along the edges: the outdoor air at every edge's midpoint inside a corridor around
   start and end (and on the baseline), at the hour the route will be walked, as one batch to
   the air-quality source. An edge's exposure is its air load (multiples of the WHO guideline
   levels, as in the dose) over the largest load in the corridor, so 0..1. Edges outside the
   corridor or without data get a prohibitive (infinite) cost; if data covers less than
   MIN_DATA_COVERAGE of the corridor the plan is rejected rather than silently detoured.
4. Alternatives: one search per sensitivity s in SENSITIVITIES on cost length * (1 + s * e).
5. Every route is enriched (measures per waypoint at its estimated time, summary, dose).
6. Near-duplicates go: routes whose lengths differ by at most NEAR_DUPLICATE_LENGTH_M and one
   of which lies within NEAR_DUPLICATE_BUFFER_M of the other; the cleaner one stays, and an
   alternative that duplicates the baseline goes. Alternatives that are not cleaner than the
   baseline (a lower dose; a higher score when there is no dose) go too.
7. Result: the cleaner alternatives, cleanest first, then the baseline; at most MAX_ROUTES.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime

import attrs
import numpy as np
import numpy.typing as npt

from cleanair_core.air.activities import speed_m_s
from cleanair_core.air.dose import air_load, dose_pollutants
from cleanair_core.air.exposure import EnvironmentType
from cleanair_core.air.quality_source import AirQualitySource, Sample
from cleanair_core.errors import PlanRejected
from cleanair_core.geo import EARTH_RADIUS_M, Point, distance_m, distances_m
from cleanair_core.offload import Offload, inline
from cleanair_core.routes.enrichment import EnrichedRoute, enrich_route
from cleanair_core.routes.network import (
    FloatArray,
    Path,
    PlanActivityType,
    Router,
    StreetNetwork,
    StreetNetworks,
)
from cleanair_core.routes.plans import PlanRequest
from cleanair_core.routes.results import PlannedRoute, PlanResult, RouteGoal
from cleanair_core.routes.times import estimated_times

#: Green Paths 2 found these sensitivities to give distinct, sensible detours (science.md).
SENSITIVITIES = (1.5, 2.5, 5.0)
#: A start or end farther than this from any usable street is rejected.
SNAP_DISTANCE_M = 250.0
#: Two routes are near-duplicates when their lengths differ by at most this ...
NEAR_DUPLICATE_LENGTH_M = 25.0
#: ... and one lies within this distance of the other everywhere.
NEAR_DUPLICATE_BUFFER_M = 50.0
#: Below this share of corridor edges with air data, a plan is rejected.
MIN_DATA_COVERAGE = 0.7
#: The corridor: points whose distances to start and end add up to at most this factor of
#: the direct distance, plus CORRIDOR_MARGIN_M (a detour budget; longer detours are not
#: "alternatives" anyone walks).
CORRIDOR_FACTOR = 1.5
CORRIDOR_MARGIN_M = 1_000.0
#: Cleaner alternatives (at most one per sensitivity) plus the baseline.
MAX_ROUTES = len(SENSITIVITIES) + 1

EdgeIndices = npt.NDArray[np.intp]


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


async def plan_routes(
    request: PlanRequest,
    networks: StreetNetworks,
    source: AirQualitySource,
    offload: Offload | None = None,
) -> PlanResult:
    """Plan `request`. Raises PlanRejected (with a readable reason) when there is no street
    data near an end or no path, and SourceUnavailable when the air cannot be had."""
    run: Offload = offload or inline
    router = networks.covering([request.start, request.end])
    if router is None:
        raise PlanRejected("No street network covers the start and the end")
    activity = request.activity
    origin = _snap(router, request.start, activity, "start")
    destination = _snap(router, request.end, activity, "end")
    network = router.network
    lengths = network.edge_length

    baseline_path = await run(lambda: router.path(origin, destination, activity, lengths))
    if baseline_path is None:
        raise PlanRejected(f"No {activity.value} route connects the start and the end")

    midpoints = _midpoints(network)
    corridor = _corridor(midpoints, request.start, request.end, baseline_path)
    baseline_edges = np.asarray(baseline_path.edges, dtype=np.int64)
    exposure = await _edge_exposure(midpoints, corridor, source, request.start_time)

    def alternatives() -> list[Path]:
        found = []
        for sensitivity in SENSITIVITIES:
            costs = lengths * (1.0 + sensitivity * exposure)
            # The baseline under these costs is a path the search must beat: a safe bound.
            bound = float(costs[baseline_edges].sum()) * (1 + 1e-9) + 1e-6
            path = router.path(origin, destination, activity, costs, bound)
            if path is not None:
                found.append(path)
        return found

    paths = await run(alternatives)
    baseline = await _candidate(network, baseline_path, request, source)
    candidates = [baseline]
    for path in paths:
        if any(path.edges == c.path.edges for c in candidates):
            continue
        candidates.append(await _candidate(network, path, request, source))
    return _result(activity, baseline, candidates[1:])


def _snap(router: Router, point: Point, activity: PlanActivityType, end: str) -> int:
    snap = router.snap(point, activity)
    if snap is None or snap.distance_m > SNAP_DISTANCE_M:
        raise PlanRejected(
            f"No street for {activity.value} within {SNAP_DISTANCE_M:.0f} m of the {end}"
        )
    return snap.node


def _midpoints(network: StreetNetwork) -> tuple[FloatArray, FloatArray]:
    lat = (network.node_lat[network.edge_from] + network.node_lat[network.edge_to]) / 2
    lon = (network.node_lon[network.edge_from] + network.node_lon[network.edge_to]) / 2
    return lat, lon


def _corridor(
    midpoints: tuple[FloatArray, FloatArray], start: Point, end: Point, baseline: Path
) -> EdgeIndices:
    """Indices of the edges inside the detour ellipse, plus the baseline's edges."""
    lat, lon = midpoints
    budget = distance_m(start, end) * CORRIDOR_FACTOR + CORRIDOR_MARGIN_M
    inside = (
        distances_m(start.lat, start.lon, lat, lon) + distances_m(end.lat, end.lon, lat, lon)
        <= budget
    )
    inside[np.asarray(baseline.edges, dtype=np.int64)] = True
    corridor: EdgeIndices = np.flatnonzero(inside)
    return corridor


async def _edge_exposure(
    midpoints: tuple[FloatArray, FloatArray],
    corridor: EdgeIndices,
    source: AirQualitySource,
    at: datetime,
) -> FloatArray:
    """Per edge, 0..1 (inf outside the corridor or without data); see the module docstring."""
    lat, lon = midpoints
    samples = [Sample(Point(float(lat[i]), float(lon[i])), at) for i in corridor]
    airs = await source.concentrations(samples)
    loads = np.full(len(lat), np.inf)
    known = 0
    for edge, air in zip(corridor, airs, strict=True):
        pollutants = dose_pollutants([air])
        if pollutants:
            loads[int(edge)] = air_load(air, pollutants)
            known += 1
    if len(samples) == 0 or known < MIN_DATA_COVERAGE * len(samples):
        raise PlanRejected("Air-quality data covers too little of the area to plan routes")
    finite = np.isfinite(loads)
    peak = float(loads[finite].max())
    exposure: FloatArray = np.where(finite, loads / peak if peak > 0 else 0.0, np.inf)
    return exposure


async def _candidate(
    network: StreetNetwork, path: Path, request: PlanRequest, source: AirQualitySource
) -> _Candidate:
    points = [network.node(i) for i in path.nodes]
    activity = request.activity.activity
    times = estimated_times(points, request.start_time, speed_m_s(activity))
    route = await enrich_route(source, points, times, activity, EnvironmentType.OUTDOOR)
    distance = float(sum(float(network.edge_length[e]) for e in path.edges))
    return _Candidate(path, distance, route)


def _cleaner(a: _Candidate, b: _Candidate) -> bool:
    """Whether `a` is cleaner than `b`: a lower dose, else a higher score."""
    if a.dose is not None and b.dose is not None:
        return a.dose < b.dose
    if a.score is not None and b.score is not None:
        return a.score > b.score
    return False


def _near_duplicates(a: _Candidate, b: _Candidate) -> bool:
    if abs(a.distance - b.distance) > NEAR_DUPLICATE_LENGTH_M:
        return False
    a_points, b_points = a.route.points, b.route.points
    return within_buffer(a_points, b_points, NEAR_DUPLICATE_BUFFER_M) or within_buffer(
        b_points, a_points, NEAR_DUPLICATE_BUFFER_M
    )


def within_buffer(inner: Sequence[Point], outer: Sequence[Point], buffer_m: float) -> bool:
    """Whether every point of `inner` lies within `buffer_m` of the polyline `outer`."""
    if not inner or not outer:
        return False
    origin = outer[0]
    scale = math.cos(math.radians(origin.lat))

    def xy(points: Sequence[Point]) -> FloatArray:
        coords = np.array([(p.lon, p.lat) for p in points], dtype=np.float64)
        coords[:, 0] = np.radians(coords[:, 0] - origin.lon) * scale * EARTH_RADIUS_M
        coords[:, 1] = np.radians(coords[:, 1] - origin.lat) * EARTH_RADIUS_M
        return coords

    p, q = xy(inner), xy(outer)
    if len(q) == 1:
        nearest = np.linalg.norm(p - q[0], axis=1)
        return bool((nearest <= buffer_m).all())
    a, b = q[:-1], q[1:]
    ab = b - a
    length2 = np.maximum((ab**2).sum(axis=1), 1e-12)
    ap = p[:, None, :] - a[None, :, :]
    t = np.clip((ap * ab[None, :, :]).sum(axis=2) / length2[None, :], 0.0, 1.0)
    closest = a[None, :, :] + t[:, :, None] * ab[None, :, :]
    nearest = np.linalg.norm(p[:, None, :] - closest, axis=2).min(axis=1)
    return bool((nearest <= buffer_m).all())


def _result(
    activity: PlanActivityType, baseline: _Candidate, alternatives: list[_Candidate]
) -> PlanResult:
    kept: list[_Candidate] = []
    for candidate in sorted(alternatives, key=_cleanliness):
        if not _cleaner(candidate, baseline) or _near_duplicates(candidate, baseline):
            continue
        if any(_near_duplicates(candidate, other) for other in kept):
            continue  # sorted cleanest first, so the one kept is the cleaner
        kept.append(candidate)
    kept = kept[: MAX_ROUTES - 1]
    routes = [_planned(c, baseline, _alternative_goal(c, baseline, kept[0])) for c in kept]
    routes.append(_planned(baseline, baseline, _baseline_goal(baseline, activity, bool(kept))))
    return PlanResult(
        activity=activity,
        routes=routes,
        original_distance=round(baseline.distance, 1),
        original_clean_air_score=baseline.score,
        original_dose=baseline.dose,
        best_route_index=_best_index([*kept, baseline]),
    )


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
    if score is None or baseline is None or baseline <= 0:
        return 0.0
    return round((score - baseline) / baseline * 100, 1)


def dose_delta_pct(dose: float | None, baseline: float | None) -> float | None:
    """Percentage less pollution inhaled than on the baseline; None without a comparable
    baseline dose (unknown, or zero)."""
    if dose is None or baseline is None or baseline <= 0:
        return None
    return round((1 - dose / baseline) * 100, 1)


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
    dose = dose_delta_pct(c.dose, baseline.dose)
    if dose is not None:
        return f"{dose:.0f} % less pollution inhaled"
    return f"a {score_delta_pct(c.score, baseline.score):.0f} % better Clean Air Score"


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
    baseline: _Candidate, activity: PlanActivityType, has_alternatives: bool
) -> RouteGoal:
    minutes = max(1, round(baseline.route.duration_s / 60))
    summary = f"{format_distance(baseline.distance)}, about {minutes} min {activity.value}"
    if has_alternatives:
        return RouteGoal("Shortest route", f"The direct route: {summary}")
    return RouteGoal(
        "Direct route is the cleanest",
        f"No cleaner alternative was found: the direct route ({summary}) already has the "
        "least pollution inhaled",
    )

"""Which routes a plan offers and how it words them (steps 6-7 of `planner.py`).

Honest choice: the budgets' routes first, then those standing in for them, each group
cleanest first; an alternative is kept when it is materially cleaner than the baseline, at
most MAX_DETOUR longer, and shares at most MAX_SHARED of its length with every route kept
before it (the baseline first). The goals say what each route gains and costs, and for a
baseline alone only what the searches proved (docs/routing.md, "Goals").
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime

import attrs

from cleanair_core.air.activities import speed_m_s
from cleanair_core.air.exposure import EnvironmentType
from cleanair_core.air.quality_source import AirQualitySource
from cleanair_core.geo import Point
from cleanair_core.routes.enrichment import EnrichedRoute, enrich_routes
from cleanair_core.routes.network import FloatArray, Path, PlanActivityType, StreetNetwork
from cleanair_core.routes.plans import PlanRequest
from cleanair_core.routes.results import PlannedRoute, PlanResult, RouteGoal
from cleanair_core.routes.times import estimated_times

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
#: Alternatives plus the baseline.
MAX_ROUTES = len(LENGTH_BUDGETS) + 1


@attrs.frozen
class Candidate:
    """A route of the plan, enriched, with its length."""

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
class Walk:
    """A path as the traveller goes along it: its waypoints (the path's nodes), the time
    each is reached at the activity's speed from the plan's start time, and its length."""

    path: Path
    points: list[Point]
    times: list[datetime]
    distance: float


def walk(network: StreetNetwork, path: Path, request: PlanRequest) -> Walk:
    """`path` walked (or ridden) from `request`'s start time."""
    points = [network.node(i) for i in path.nodes]
    times = estimated_times(points, request.start_time, speed_m_s(request.activity.activity))
    return Walk(path, points, times, route_length(network, path))


def route_length(network: StreetNetwork, path: Path) -> float:
    """The length of `path`, metres: its edges' added in order (a route's `distance`)."""
    return float(sum(float(network.edge_length[e]) for e in path.edges))


def may_be_offered(path: Path, distance: float, baseline: Walk, lengths: FloatArray) -> bool:
    """Whether `choose` could keep the alternative `path` (`distance` long), whatever its
    air: not when it is too long or too like the baseline, tests `choose` makes of every
    alternative itself. One it passes over whatever its air need not be walked nor enriched:
    left out, it leaves the routes kept and their order as they were (it was 40 % of the
    alternatives Helsinki walks enriched)."""
    return _short_enough(distance, baseline.distance) and not _alike(path, baseline.path, lengths)


async def candidates(
    walks: Sequence[Walk], request: PlanRequest, source: AirQualitySource
) -> list[Candidate]:
    """The routes of `walks` enriched as the route-enrichment use case enriches the same
    waypoints and times, so the dose a plan reports is the one `POST /v1/airquality/routes`
    reports; the source is asked once for all of them (`enrich_routes`).

    Every source is asked for each waypoint at its own time, as enrichment asks it: every
    source the service builds moves within its hour (the embedded model follows the time of
    day, street level the traffic over any background, fusion fades), and the node air of
    the hour's start was up to 10 % off a walk's dose from the embedded model and 7.9 %
    from an hourly one at street level (bench/departures.py). It is a few milliseconds per
    route; an hourly source answers from its cache the hours the search asked. The dose is
    then the search's own cost of the route, up to one factor for the whole plan, wherever
    each node is reached when the search assumed."""
    routes = await enrich_routes(
        source,
        [(w.points, w.times) for w in walks],
        request.activity.activity,
        EnvironmentType.OUTDOOR,
    )
    return [Candidate(w.path, w.distance, r) for w, r in zip(walks, routes, strict=True)]


def shared_share(route: Path, other: Path, lengths: FloatArray) -> float:
    """The share of `route`'s length on edges `other` also uses (0..1; 0 for an empty route)."""
    import numpy as np

    edges = np.asarray(route.edges, dtype=np.int64)
    total = float(lengths[edges].sum())
    if total <= 0:
        return 0.0
    common = np.isin(edges, np.asarray(other.edges, dtype=np.int64))
    return float(lengths[edges[common]].sum()) / total


def choose(
    activity: PlanActivityType,
    baseline: Candidate,
    chosen: list[Candidate],
    standing_in: list[Candidate],
    proven: float | None,
    lengths: FloatArray,
) -> PlanResult:
    """The budgets' routes (`chosen`) first, then those `standing_in` for them, each group
    cleanest first: keep what is materially cleaner, short enough and different enough from
    every route kept before it (see the module documentation); offered cleanest first."""
    kept: list[Candidate] = []
    ordered = [*sorted(chosen, key=_cleanliness), *sorted(standing_in, key=_cleanliness)]
    for candidate in ordered:
        if len(kept) == MAX_ROUTES - 1:
            break
        if not _materially_cleaner(candidate, baseline):
            continue
        if not _short_enough(candidate.distance, baseline.distance):
            continue
        if any(_alike(candidate.path, other.path, lengths) for other in [baseline, *kept]):
            continue
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


def _short_enough(distance: float, baseline: float) -> bool:
    """At most MAX_DETOUR longer than the baseline (up to rounding)."""
    return distance <= baseline * (1 + MAX_DETOUR) * (1 + 1e-9)


def _alike(route: Path, other: Path, lengths: FloatArray) -> bool:
    """Too alike to offer both: over MAX_SHARED of either one's length on the other's edges,
    whichever of the two is measured against the other."""
    return (
        max(shared_share(route, other, lengths), shared_share(other, route, lengths)) > MAX_SHARED
    )


def _materially_cleaner(c: Candidate, baseline: Candidate) -> bool:
    """A dose at least MATERIAL_REDUCTION_PCT lower; without doses, a higher score."""
    if c.dose is not None and baseline.dose is not None:
        return baseline.dose > 0 and c.dose <= baseline.dose * (1 - MATERIAL_REDUCTION_PCT / 100)
    if c.score is not None and baseline.score is not None:
        return c.score > baseline.score
    return False


def _cleanliness(c: Candidate) -> tuple[float, float]:
    return (
        math.inf if c.dose is None else c.dose,
        -(c.score if c.score is not None else -math.inf),
    )


def _best_index(candidates: list[Candidate]) -> int:
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


def _planned(c: Candidate, baseline: Candidate, goal: RouteGoal) -> PlannedRoute:
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


def _cost_phrase(c: Candidate, baseline: Candidate) -> str:
    extra = c.distance - baseline.distance
    minutes = round((c.route.duration_s - baseline.route.duration_s) / 60)
    if round(extra) <= 0:
        return "at no extra distance"
    timing = f" (about {minutes} min)" if minutes >= 1 else ""
    return f"for {format_distance(extra)} more{timing}"


def _gain_phrase(c: Candidate, baseline: Candidate) -> str:
    # Whole percents rounded from the exact ratio: rounding the route's one-decimal figure
    # again would make 3.49 % read "4 %" (3.5 first).
    cut = _dose_cut(c.dose, baseline.dose)
    if cut is not None:
        return f"{cut:.0f} % less pollution inhaled"
    gain = _score_gain(c.score, baseline.score) or 0.0
    return f"a {gain:.0f} % better Clean Air Score"


def _alternative_goal(c: Candidate, baseline: Candidate, cleanest: Candidate) -> RouteGoal:
    if c is cleanest:
        title = "Cleanest air"
    elif c.distance < cleanest.distance:
        title = "Cleaner air, shorter detour"
    else:
        title = "Cleaner air"
    description = f"{_gain_phrase(c, baseline)} {_cost_phrase(c, baseline)}"
    return RouteGoal(title, description[0].upper() + description[1:])


def _baseline_goal(
    baseline: Candidate,
    activity: PlanActivityType,
    kept: list[Candidate],
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

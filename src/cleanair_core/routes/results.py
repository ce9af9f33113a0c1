"""What a completed plan holds: the planned routes and how they compare (contract 2.12), or
for a departures plan, every departure's figures and the best one's route.

Plain values, stored as they are (each storage adapter serialises them, with a version tag)
and mapped to the contract's response shape by the HTTP layer when a poll reads them.
"""

from __future__ import annotations

from datetime import datetime

import attrs

from cleanair_core.routes.enrichment import EnrichedRoute
from cleanair_core.routes.network import PlanActivityType


@attrs.frozen
class RouteGoal:
    title: str
    description: str


@attrs.frozen
class PlannedRoute:
    """An enriched route with what it costs and gains against the baseline."""

    route: EnrichedRoute
    distance: float
    distance_delta: int
    clean_air_score_delta_pct: float
    dose_delta_pct: float | None
    duration: float | None
    goal: RouteGoal


@attrs.frozen
class PlanResult:
    """The routes found for a plan, its direct route's figures, and which route is best."""

    activity: PlanActivityType
    routes: list[PlannedRoute]
    original_distance: float
    original_clean_air_score: float | None
    original_dose: float | None
    best_route_index: int


@attrs.frozen
class Departure:
    """One candidate start time and its least-dose route's figures (None: unknown)."""

    start_time: datetime
    dose: float | None
    clean_air_score: float | None
    distance: float


@attrs.frozen
class BestDeparture:
    """The departure with the least dose and its full planned route."""

    start_time: datetime
    dose: float | None
    route: PlannedRoute


@attrs.frozen
class DeparturesResult:
    """Every candidate departure in time order, the best one, and what it saves against the
    direct route leaving at `earliest` (`dose_saved_pct`: (baseline - best) / baseline x 100;
    None without both doses or with a zero baseline)."""

    departures: list[Departure]
    best: BestDeparture
    baseline_dose: float | None
    dose_saved_pct: float | None

"""A plan's result as a stored document: JSON in the contract's PlanResult shape (2.12).

The document is written once when a plan completes and read at every poll, so it is kept in
the shape the poll returns; numbers are rounded the way every response rounds them.
"""

from __future__ import annotations

import json
from typing import Any

from cleanair_core.routes.enrichment import EnrichedRoute, RouteSummary
from cleanair_core.routes.planner import PlannedRoute, PlanResult

#: Decimal places of a dose in a response: six keep ratios between routes exact to well under
#: 0.1 %, even for a minute of sedentary breathing in clean air.
DOSE_DECIMALS = 6


def summary_document(summary: RouteSummary) -> dict[str, Any]:
    """The contract's RouteSummary."""
    score = summary.clean_air_score
    return {
        "clean_air_score": None
        if score is None
        else {
            "score": score.score,
            "band": score.band,
            "description": score.description,
            "colour": score.colour,
        },
        "inhaled_dose": None
        if summary.inhaled_dose is None
        else round(summary.inhaled_dose, DOSE_DECIMALS),
        "average_pollutants": {p.value: v for p, v in summary.average_pollutants.items()},
    }


def route_document(route: EnrichedRoute) -> dict[str, Any]:
    """The contract's EnrichedRoute."""
    return {
        "waypoints": [[point.lat, point.lon] for point in route.points],
        "measures": route.measures,
        "summary": summary_document(route.summary),
    }


def _planned_route(planned: PlannedRoute) -> dict[str, Any]:
    return {
        **route_document(planned.route),
        "distance": planned.distance,
        "distance_delta": planned.distance_delta,
        "clean_air_score_delta_pct": planned.clean_air_score_delta_pct,
        "dose_delta_pct": planned.dose_delta_pct,
        "duration": planned.duration,
        "goal": {"title": planned.goal.title, "description": planned.goal.description},
    }


def plan_result_document(result: PlanResult) -> dict[str, Any]:
    """The contract's PlanResult."""
    return {
        "activity_type": result.activity.value,
        "routes": [_planned_route(route) for route in result.routes],
        "original_distance": result.original_distance,
        "original_clean_air_score": result.original_clean_air_score,
        "original_dose": None
        if result.original_dose is None
        else round(result.original_dose, DOSE_DECIMALS),
        "best_route_index": result.best_route_index,
    }


def encode_plan_result(result: PlanResult) -> str:
    return json.dumps(plan_result_document(result), separators=(",", ":"), allow_nan=False)


def decode_plan_result(document: str) -> dict[str, Any]:
    """The stored document back as plain data."""
    decoded: dict[str, Any] = json.loads(document)
    return decoded

"""Core route values as contract bodies; shared by route enrichment and route plans."""

from __future__ import annotations

from cleanair_core.plan_documents import DOSE_DECIMALS
from cleanair_core.route_enrichment import EnrichedRoute, RouteSummary
from cleanair_http import schemas


def summary_body(summary: RouteSummary) -> schemas.RouteSummary:
    score = summary.clean_air_score
    return schemas.RouteSummary(
        clean_air_score=None
        if score is None
        else schemas.BandedScore(score.score, score.band, score.description, score.colour),
        inhaled_dose=None
        if summary.inhaled_dose is None
        else round(summary.inhaled_dose, DOSE_DECIMALS),
        average_pollutants={p.value: v for p, v in summary.average_pollutants.items()},
    )


def enriched_route_body(route: EnrichedRoute) -> schemas.EnrichedRoute:
    return schemas.EnrichedRoute(
        waypoints=[(point.lat, point.lon) for point in route.points],
        measures=route.measures,
        summary=summary_body(route.summary),
    )

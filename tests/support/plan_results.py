"""Plan results for storage tests: every kind of value a `PlanResult` (or a departures plan's
`DeparturesResult`) holds, awkward ones too."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import strategies as st

from cleanair_core.air.pollutants import Pollutant
from cleanair_core.air.score import banded
from cleanair_core.geo import Point
from cleanair_core.routes.departures import saved_pct
from cleanair_core.routes.enrichment import EnrichedRoute, RouteSummary
from cleanair_core.routes.network import PlanActivityType
from cleanair_core.routes.results import (
    BestDeparture,
    Departure,
    DeparturesResult,
    PlannedRoute,
    PlanResult,
    RouteGoal,
)

START = datetime(2026, 3, 10, 9, 30, 15, 250_001, tzinfo=UTC)


def route(
    points: int = 3, *, dose: float | None = 0.123456789, score: float | None = 61.25
) -> EnrichedRoute:
    """An enriched route along a meridian, one waypoint a minute."""
    return EnrichedRoute(
        points=[Point(60.17 + i * 1e-4, 24.94) for i in range(points)],
        times=[START + timedelta(minutes=i) for i in range(points)],
        measures={
            "clean_air_score": [61.0, None, 62.5][:points] + [60.0] * max(0, points - 3),
            "pm2_5": [5.123456789] * points,
        },
        summary=RouteSummary(
            clean_air_score=None if score is None else banded(score),
            inhaled_dose=dose,
            average_pollutants={Pollutant.PM25: 5.123456789, Pollutant.NO2: 17.0},
        ),
    )


def plan_result(title: str = "Shortest route", *, alternatives: int = 1) -> PlanResult:
    """A completed plan's result: the direct route and `alternatives` cleaner ones."""
    routes = [
        PlannedRoute(
            route=route(3 + i, dose=None if i == 2 else 0.1 / (i + 1)),
            distance=1234.5678 + i,
            distance_delta=i * 10,
            clean_air_score_delta_pct=0.0 if i == 0 else 3.3333333,
            dose_delta_pct=None if i == 0 else -12.5,
            duration=None if i == 2 else 900.25,
            goal=RouteGoal(title if i == 0 else f"Cleaner {i}", "Über \u0000 the park ü"),
        )
        for i in range(1 + alternatives)
    ]
    return PlanResult(
        activity=PlanActivityType.WALKING,
        routes=routes,
        original_distance=1234.5678,
        original_clean_air_score=61.25,
        original_dose=0.1,
        best_route_index=alternatives,
    )


#: Results drawn for property tests: varied text, sizes and optional values.
plan_results = st.builds(
    plan_result,
    title=st.text(min_size=1, max_size=20),
    alternatives=st.integers(min_value=0, max_value=3),
)


def departures_result(departures: int = 3) -> DeparturesResult:
    """A completed departures plan's result: `departures` start times a quarter hour apart,
    one without data, the cleanest (the last with a dose) the best."""
    times = [START + timedelta(minutes=15 * k) for k in range(departures)]
    doses = [None if k == 1 else 0.2 / (k + 1) for k in range(departures)]
    listed = [
        Departure(at, dose, None if dose is None else 60.5 + k, 1234.5678 + k)
        for k, (at, dose) in enumerate(zip(times, doses, strict=True))
    ]
    best = max((k for k in range(departures) if doses[k] is not None), default=0)
    planned = plan_result("Cleanest air").routes[0]
    return DeparturesResult(
        departures=listed,
        best=BestDeparture(times[best], doses[best], planned),
        baseline_dose=0.2,
        dose_saved_pct=saved_pct(doses[best], 0.2),
    )


#: Departures results drawn for property tests.
departures_results = st.builds(departures_result, departures=st.integers(1, 6))

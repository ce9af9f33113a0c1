"""Use case: the best time to go (issue 24): the same trip planned at several start times.

For every candidate start time from `earliest` to `latest`, `step` apart, the trip is planned
as a route plan would be (`plan_routes`, so only routes within the planner's detour limit are
considered) and its least-dose route kept. The best departure is the one with the least dose;
it is compared with the direct route leaving at `earliest`, what the traveller would do
without asking.

Every candidate plans with one `NetworkAir`: departures of the same hour share the node air
of that hour, and a source is asked for each hour's nodes once.
"""

from __future__ import annotations

from datetime import datetime

from cleanair_core.air.quality_source import AirQualitySource
from cleanair_core.errors import PlanTooLong
from cleanair_core.geo import distance_m
from cleanair_core.offload import Offload
from cleanair_core.routes.network import StreetNetworks
from cleanair_core.routes.network_air import NetworkAir
from cleanair_core.routes.planner import plan_routes
from cleanair_core.routes.plans import MAX_PLAN_DISTANCE_M, DeparturesRequest, PlanRequest
from cleanair_core.routes.results import (
    BestDeparture,
    Departure,
    DeparturesResult,
    PlannedRoute,
    PlanResult,
)
from cleanair_core.routes.times import check_data_window


def check_departures(request: DeparturesRequest, now: datetime) -> None:
    """What a submitted route plan is checked for, at every candidate start time: raises
    PlanTooLong when start and end are over 15 km apart, OutsideDataWindow when the window
    of start times is not inside the data window (30 days ago to the forecast horizon)."""
    if distance_m(request.start, request.end) > MAX_PLAN_DISTANCE_M:
        raise PlanTooLong()
    check_data_window([request.earliest, request.latest], now)


async def plan_departures(
    request: DeparturesRequest,
    networks: StreetNetworks,
    source: AirQualitySource,
    offload: Offload | None = None,
    network_air: NetworkAir | None = None,
) -> DeparturesResult:
    """Plan the trip at every start time of `request` and choose the cleanest departure.

    Raises PlanRejected and SourceUnavailable as `plan_routes` does (a trip that cannot be
    planned at one of its start times cannot be compared across them)."""
    kept = network_air or NetworkAir()  # one for all: candidates of an hour share its air
    departures: list[Departure] = []
    routes: list[PlannedRoute] = []
    baseline_dose: float | None = None
    for start_time in request.start_times:
        plan = PlanRequest(request.start, request.end, request.activity, start_time)
        result = await plan_routes(plan, networks, source, offload, kept)
        if start_time == request.earliest:
            baseline_dose = result.original_dose
        route = _least_dose(result)
        banded = route.route.summary.clean_air_score
        departures.append(
            Departure(
                start_time=start_time,
                dose=route.route.summary.inhaled_dose,
                clean_air_score=None if banded is None else banded.score,
                distance=route.distance,
            )
        )
        routes.append(route)
    chosen = min(range(len(departures)), key=lambda i: _cleanliness(departures[i]))
    best = departures[chosen]
    return DeparturesResult(
        departures=departures,
        best=BestDeparture(best.start_time, best.dose, routes[chosen]),
        baseline_dose=baseline_dose,
        dose_saved_pct=saved_pct(best.dose, baseline_dose),
    )


def saved_pct(dose: float | None, baseline: float | None) -> float | None:
    """(baseline - dose) / baseline x 100; None without both or with a baseline of 0."""
    if dose is None or baseline is None or baseline <= 0:
        return None
    return (baseline - dose) / baseline * 100


def _least_dose(result: PlanResult) -> PlannedRoute:
    # The planner's best route is the one of least dose among those it offers (else of the
    # highest score), every one within its detour limit.
    return result.routes[result.best_route_index]


def _cleanliness(departure: Departure) -> tuple[bool, float, float]:
    # The least dose first; without doses the highest score; the earliest among equals
    # (`min` keeps the first of ties, and departures are in time order).
    return (
        departure.dose is None,
        0.0 if departure.dose is None else departure.dose,
        -(departure.clean_air_score or 0.0),
    )

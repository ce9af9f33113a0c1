"""Every mapping from a core value to the contract's response shapes (the msgspec structs).

The core returns plain values; this module alone decides how they look on the wire,
including how numbers are rounded, so a route looks the same whether an enrichment answers
with it or a plan poll does.
"""

from __future__ import annotations

import uuid

from cleanair_core.access.connections import IssuedConnection
from cleanair_core.access.scopes import format_scopes
from cleanair_core.air.conditions import Conditions
from cleanair_core.air.forecast import Forecast
from cleanair_core.air.fused_air import FusedValue
from cleanair_core.air.indexes import IndexValue
from cleanair_core.air.indexes.advice import Group, GroupAdvice, advice_of, pick
from cleanair_core.air.point_score import PointScore
from cleanair_core.air.score import BandedScore
from cleanair_core.credits.ledger import Quota
from cleanair_core.routes.enrichment import EnrichedRoute, RouteSummary
from cleanair_core.routes.plans import Plan
from cleanair_core.routes.results import DeparturesResult, PlannedRoute, PlanResult
from cleanair_http import extension_schemas as ext
from cleanair_http import schemas

#: Decimal places of a dose in a response: six keep ratios between routes exact to well under
#: 0.1 %, even for a minute of sedentary breathing in clean air.
DOSE_DECIMALS = 6


def connection(issued: IssuedConnection) -> schemas.Connection:
    """A redeemed pairing code's connection, with its raw token (shown only here)."""
    return schemas.Connection(
        connection_id=issued.connection.id,
        name=issued.connection.name,
        scopes=format_scopes(issued.connection.scopes),
        token=issued.token,
    )


def quota(pool: Quota) -> schemas.Quota:
    return schemas.Quota(
        used=pool.used,
        limit=pool.limit,
        remaining=pool.remaining,
        daily_used=pool.daily_used,
        daily_limit=pool.daily_limit,
        daily_remaining=pool.daily_remaining,
    )


def score(result: PointScore) -> schemas.ScoreResponse:
    return schemas.ScoreResponse(score=result.score, ttl=result.ttl)


def official_index(index: IndexValue, group: str | None = None) -> ext.OfficialIndex:
    """An index value as the extension's answers give it (conditions, history); `group` (a
    `Group` id, validated by the schema) keeps its advice to that group's (or the general
    population's where it names no such group)."""
    return ext.OfficialIndex(
        code=index.code,  # type: ignore[arg-type]  # one of the registry's codes
        name=index.name,
        value=index.value,
        category=index.category,
        colour=index.colour,
        dominant_pollutant=index.dominant_pollutant.value,
        concentrations={
            pollutant.value: ext.IndexConcentration(
                round(used.concentration, 2),
                used.averaging.value,
            )
            for pollutant, used in index.concentrations.items()
        },
        health=ext.HealthAdvice(index.health.general, index.health.sensitive),
        advice=_advice(advice_of(index), group),
    )


def conditions(result: Conditions, group: str | None = None) -> ext.ConditionsResponse:
    """The conditions answer; `group` keeps each index's advice to that group's
    (`official_index`)."""
    indexes = [official_index(index, group) for index in result.indexes]
    first = indexes[0] if indexes else None
    provenance = result.provenance
    return ext.ConditionsResponse(
        clean_air_score=result.clean_air_score,
        pollutants={
            pollutant.value: concentration(value, result.uncertainty[pollutant])
            for pollutant, value in result.pollutants.items()
            if value is not None
        },
        indexes=indexes,
        health=None
        if first is None
        else ext.IndexHealth(first.code, first.health.general, first.health.sensitive),
        provenance=ext.Provenance(
            source=provenance.source,
            data_time=provenance.data_time,
            age_seconds=provenance.age_seconds,
            stations=[
                ext.StationUsed(
                    s.id, s.name, round(s.distance_m, 1), round(s.weight, 4), s.last_hour_end
                )
                for s in provenance.stations
            ],
        ),
        clean_air_score_interval90=list(result.score_interval90),
    )


def _advice(advice: tuple[GroupAdvice, ...], group: str | None) -> list[ext.GroupAdvice]:
    chosen = advice if group is None else (pick(advice, Group(group)),)
    return [
        ext.GroupAdvice(
            a.group.value,
            a.text,
            ext.AdviceSource(a.source.document, a.source.section, a.source.url, a.source.summary),
        )
        for a in chosen
    ]


def concentration(value: float, known: FusedValue) -> ext.Concentration:
    return ext.Concentration(
        round(value, 2),
        "ug/m3",
        round(known.standard_error, 2),
        [round(known.low, 2), round(known.high, 2)],
        known.corrected,
    )


def forecast(result: Forecast) -> schemas.ForecastResponse:
    return schemas.ForecastResponse(
        location=result.location, timestamps=result.timestamps, measures=result.measures
    )


def dose(value: float | None) -> float | None:
    return None if value is None else round(value, DOSE_DECIMALS)


def banded_score(banded: BandedScore) -> schemas.BandedScore:
    return schemas.BandedScore(
        score=banded.score,
        band=banded.band,
        description=banded.description,
        colour=banded.colour,
    )


def route_summary(summary: RouteSummary) -> schemas.RouteSummary:
    score = summary.clean_air_score
    return schemas.RouteSummary(
        clean_air_score=None if score is None else banded_score(score),
        inhaled_dose=dose(summary.inhaled_dose),
        average_pollutants={p.value: v for p, v in summary.average_pollutants.items()},
    )


def measures(values: dict[str, list[float | None]]) -> dict[str, list[float | None]]:
    """Every measure as a JSON float (a score of 69 is written 69.0), whichever store or
    computation it came from, as the contract's number type says."""
    return {
        key: [None if value is None else float(value) for value in series]
        for key, series in values.items()
    }


def enriched_route(route: EnrichedRoute) -> schemas.EnrichedRoute:
    return schemas.EnrichedRoute(
        waypoints=[(point.lat, point.lon) for point in route.points],
        measures=measures(route.measures),
        summary=route_summary(route.summary),
    )


def planned_route(planned: PlannedRoute) -> schemas.PlannedRoute:
    route = planned.route
    return schemas.PlannedRoute(
        waypoints=[(point.lat, point.lon) for point in route.points],
        measures=measures(route.measures),
        summary=route_summary(route.summary),
        distance=planned.distance,
        distance_delta=planned.distance_delta,
        clean_air_score_delta_pct=planned.clean_air_score_delta_pct,
        goal=schemas.RouteGoal(title=planned.goal.title, description=planned.goal.description),
        dose_delta_pct=planned.dose_delta_pct,
        duration=planned.duration,
    )


def plan_result(result: PlanResult) -> schemas.PlanResult:
    return schemas.PlanResult(
        activity_type=result.activity,
        routes=[planned_route(route) for route in result.routes],
        original_distance=result.original_distance,
        original_clean_air_score=result.original_clean_air_score,
        original_dose=dose(result.original_dose),
        best_route_index=result.best_route_index,
    )


def plan_submitted(plan_id: uuid.UUID) -> schemas.PlanSubmitted:
    return schemas.PlanSubmitted(request_id=plan_id)


def plan_poll(plan: Plan) -> schemas.PlanPollResponse:
    """A poll's answer: the status, the result once completed, the error once failed."""
    result = plan.result
    if result is not None and not isinstance(result, PlanResult):
        raise TypeError("a route plan's poll got another kind of plan")  # poll_plan checks
    return schemas.PlanPollResponse(
        status=schemas.PlanRouteStatus(plan.status.value),
        result=None if result is None else plan_result(result),
        error=plan.error,
    )


def departures_submitted(plan_id: uuid.UUID) -> ext.DeparturesSubmitted:
    return ext.DeparturesSubmitted(request_id=plan_id)


def departures_result(result: DeparturesResult) -> ext.DeparturesResult:
    best = result.best
    return ext.DeparturesResult(
        departures=[
            ext.Departure(
                start_time=departure.start_time,
                dose=dose(departure.dose),
                clean_air_score=departure.clean_air_score,
                distance=round(departure.distance, 1),
            )
            for departure in result.departures
        ],
        best=ext.BestDeparture(
            start_time=best.start_time, dose=dose(best.dose), route=planned_route(best.route)
        ),
        baseline_dose=dose(result.baseline_dose),
        dose_saved_pct=None if result.dose_saved_pct is None else round(result.dose_saved_pct, 1),
    )


def departures_poll(plan: Plan) -> ext.DeparturesPollResponse:
    """A departures poll's answer, as a plan poll's."""
    result = plan.result
    if result is not None and not isinstance(result, DeparturesResult):
        raise TypeError("a departures poll got another kind of plan")  # poll_departures checks
    return ext.DeparturesPollResponse(
        status=schemas.PlanRouteStatus(plan.status.value),
        result=None if result is None else departures_result(result),
        error=plan.error,
    )

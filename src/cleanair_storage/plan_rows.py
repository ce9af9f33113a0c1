"""The stored form of a plan, shared by the SQLite and PostgreSQL adapters: one row of `plans`.

Both kinds of plan share the table. A departures plan keeps its earliest start time in
`start_time` and adds `latest_start_time` and `step_seconds`; a route plan has NULL there.
Each adapter passes how it stores an instant (SQLite: seconds since the epoch; PostgreSQL:
TIMESTAMPTZ as it is).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

from cleanair_core.geo import Point
from cleanair_core.routes.network import PlanActivityType
from cleanair_core.routes.plans import (
    AnyPlanRequest,
    DeparturesRequest,
    Plan,
    PlanKind,
    PlanRequest,
    PlanStatus,
)
from cleanair_storage.plan_results import decode_plan_result

#: The columns `plan_from_row` reads and `plan_row` writes, in their order.
PLAN_COLUMNS = (
    "id, owner, connection_id, start_lat, start_lon, end_lat, end_lon, activity, "
    "start_time, status, created_at, ledger_entry, result, error, finished_at, attempts, "
    "lease_until, claims, kind, latest_start_time, step_seconds"
)


def plan_row(plan: Plan, stored: Callable[[datetime], Any]) -> tuple[Any, ...]:
    """The values of `PLAN_COLUMNS` for a new plan (no result yet), instants as `stored`."""
    request = plan.request

    def maybe(at: datetime | None) -> Any:
        return None if at is None else stored(at)

    if isinstance(request, DeparturesRequest):
        first, latest, step = request.earliest, request.latest, request.step
    else:
        first, latest, step = request.start_time, None, None
    return (
        str(plan.id),
        plan.owner,
        plan.connection_id,
        request.start.lat,
        request.start.lon,
        request.end.lat,
        request.end.lon,
        request.activity.value,
        stored(first),
        plan.status.value,
        stored(plan.created_at),
        plan.ledger_entry,
        None,  # a new plan has no result (check_new_plan)
        plan.error,
        maybe(plan.finished_at),
        plan.attempts,
        maybe(plan.lease_until),
        plan.claims,
        plan.kind.value,
        maybe(latest),
        None if step is None else round(step.total_seconds()),
    )


def plan_from_row(row: Sequence[Any], instant: Callable[[Any], datetime]) -> Plan:
    """The plan a row of `PLAN_COLUMNS` holds, instants read with `instant`."""
    (
        plan_id,
        owner,
        connection_id,
        start_lat,
        start_lon,
        end_lat,
        end_lon,
        activity,
        start_time,
        status,
        created_at,
        ledger_entry,
        result,
        error,
        finished_at,
        attempts,
        lease_until,
        claims,
        kind,
        latest_start_time,
        step_seconds,
    ) = row

    def maybe(value: Any) -> datetime | None:
        return None if value is None else instant(value)

    start, end = Point(start_lat, start_lon), Point(end_lat, end_lon)
    plan_kind = PlanKind(str(kind))
    request: AnyPlanRequest
    if plan_kind is PlanKind.DEPARTURES:
        request = DeparturesRequest(
            start,
            end,
            PlanActivityType(str(activity)),
            instant(start_time),
            instant(latest_start_time),
            timedelta(seconds=int(step_seconds)),
        )
    else:
        request = PlanRequest(start, end, PlanActivityType(str(activity)), instant(start_time))
    return Plan(
        id=uuid.UUID(str(plan_id)),
        owner=str(owner),
        connection_id=str(connection_id),
        request=request,
        status=PlanStatus(str(status)),
        created_at=instant(created_at),
        ledger_entry=None if ledger_entry is None else int(ledger_entry),
        result=None if result is None else decode_plan_result(result, plan_kind),
        error=error,
        finished_at=maybe(finished_at),
        attempts=int(attempts),
        lease_until=maybe(lease_until),
        claims=int(claims),
    )

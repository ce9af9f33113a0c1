"""PostgreSQL: route plans (`PlanStore`).

A worker claims the oldest pending plan whose lease is free with `FOR UPDATE SKIP LOCKED`:
workers in any number of processes and machines each take a different plan, and none waits
for another's claim.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from cleanair_core.geo import Point
from cleanair_core.routes.network import PlanActivityType
from cleanair_core.routes.plans import Plan, PlanRequest, PlanStatus, check_new_plan
from cleanair_core.routes.results import PlanResult
from cleanair_storage.plan_results import decode_plan_result, encode_plan_result
from cleanair_storage.postgres.database import FAIL_PENDING_PLAN
from cleanair_storage.postgres.ledger import PostgresLedger
from cleanair_storage.postgres.wakeups import CHANNEL

_COLUMNS = (
    "id, owner, connection_id, start_lat, start_lon, end_lat, end_lon, activity, "
    "start_time, status, created_at, ledger_entry, result, error, finished_at, attempts, "
    "lease_until, claims"
)


def _plan(row: Sequence[Any]) -> Plan:
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
    ) = row
    return Plan(
        id=uuid.UUID(str(plan_id)),
        owner=str(owner),
        connection_id=str(connection_id),
        request=PlanRequest(
            start=Point(start_lat, start_lon),
            end=Point(end_lat, end_lon),
            activity=PlanActivityType(str(activity)),
            start_time=start_time,
        ),
        status=PlanStatus(str(status)),
        created_at=created_at,
        ledger_entry=None if ledger_entry is None else int(ledger_entry),
        result=None if result is None else decode_plan_result(result),
        error=error,
        finished_at=finished_at,
        attempts=int(attempts),
        lease_until=lease_until,
        claims=int(claims),
    )


class PostgresPlans(PostgresLedger):
    """Route plans: submitted with their debit, claimed under a lease, finished once."""

    def add_plan(self, plan: Plan) -> None:
        check_new_plan(plan)
        request = plan.request
        with self._conn() as conn:
            conn.execute(
                f"INSERT INTO plans ({_COLUMNS}) VALUES "  # noqa: S608
                "(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                (
                    str(plan.id),
                    plan.owner,
                    plan.connection_id,
                    request.start.lat,
                    request.start.lon,
                    request.end.lat,
                    request.end.lon,
                    request.activity.value,
                    request.start_time,
                    plan.status.value,
                    plan.created_at,
                    plan.ledger_entry,
                    None,  # a new plan has no result (check_new_plan)
                    plan.error,
                    plan.finished_at,
                    plan.attempts,
                    plan.lease_until,
                    plan.claims,
                ),
            )
            # Delivered when (and only if) this transaction commits; the payload is the plan.
            conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, str(plan.id)))

    def get_plan(self, plan_id: uuid.UUID) -> Plan | None:
        with self._conn() as conn:
            row = conn.execute(
                f"SELECT {_COLUMNS} FROM plans WHERE id = %s",  # noqa: S608
                (str(plan_id),),
            ).fetchone()
        return None if row is None else _plan(row)

    def claim_plan(self, now: datetime, lease: timedelta) -> Plan | None:
        with self._conn() as conn:
            row = conn.execute(
                "UPDATE plans SET lease_until = %s, attempts = attempts + 1, "  # noqa: S608
                "claims = claims + 1 WHERE id = (SELECT id FROM plans WHERE status = 'pending' "
                "AND (lease_until IS NULL OR lease_until <= %s) ORDER BY created_at, id "
                f"LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING {_COLUMNS}",
                (now + lease, now),
            ).fetchone()
        return None if row is None else _plan(row)

    def renew_lease(self, plan_id: uuid.UUID, until: datetime, claim: int | None = None) -> bool:
        with self._conn() as conn:
            cur = conn.execute(
                "UPDATE plans SET lease_until = %s WHERE id = %s AND status = 'pending' "
                "AND claims = coalesce(%s::integer, claims)",
                (until, str(plan_id), claim),
            )
            return cur.rowcount == 1

    def release_plan(self, plan_id: uuid.UUID, claim: int | None = None) -> bool:
        with self._conn() as conn:
            cur = conn.execute(
                "UPDATE plans SET lease_until = NULL, attempts = greatest(attempts - 1, 0) "
                "WHERE id = %s AND status = 'pending' "
                "AND claims = coalesce(%s::integer, claims)",
                (str(plan_id), claim),
            )
            if cur.rowcount == 1:  # claimable again: wake idle workers
                conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, str(plan_id)))
            return cur.rowcount == 1

    def complete_plan(
        self, plan_id: uuid.UUID, result: PlanResult, now: datetime, claim: int | None = None
    ) -> bool:
        with self._conn() as conn:
            cur = conn.execute(
                "UPDATE plans SET status = 'completed', result = %s, finished_at = %s, "
                "lease_until = NULL WHERE id = %s AND status = 'pending' "
                "AND claims = coalesce(%s::integer, claims)",
                (encode_plan_result(result), now, str(plan_id), claim),
            )
            return cur.rowcount == 1

    def fail_plan(
        self, plan_id: uuid.UUID, error: str, now: datetime, claim: int | None = None
    ) -> Plan | None:
        with self._conn() as conn:
            row = conn.execute(
                f"{FAIL_PENDING_PLAN} WHERE id = %s AND status = 'pending' "
                f"AND claims = coalesce(%s::integer, claims) RETURNING {_COLUMNS}",
                (error, now, str(plan_id), claim),
            ).fetchone()
        return None if row is None else _plan(row)

    def prune_plans(self, finished_before: datetime) -> int:
        with self._conn() as conn:
            cur = conn.execute("DELETE FROM plans WHERE finished_at < %s", (finished_before,))
            return cur.rowcount

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

from cleanair_core.routes.plans import AnyPlanResult, Plan, check_new_plan
from cleanair_storage.plan_results import encode_plan_result
from cleanair_storage.plan_rows import PLAN_COLUMNS, plan_from_row, plan_row
from cleanair_storage.postgres.database import FAIL_PENDING_PLAN
from cleanair_storage.postgres.ledger import PostgresLedger
from cleanair_storage.postgres.wakeups import CHANNEL


def _plan(row: Sequence[Any]) -> Plan:
    return plan_from_row(row, _as_is)


def _as_is(at: datetime) -> datetime:
    return at  # psycopg reads and writes TIMESTAMPTZ as aware datetimes


class PostgresPlans(PostgresLedger):
    """Route plans: submitted with their debit, claimed under a lease, finished once."""

    def add_plan(self, plan: Plan) -> None:
        check_new_plan(plan)
        with self._conn() as conn:
            conn.execute(
                f"INSERT INTO plans ({PLAN_COLUMNS}) "  # noqa: S608
                f"VALUES ({', '.join(['%s'] * (PLAN_COLUMNS.count(',') + 1))})",
                plan_row(plan, _as_is),
            )
            # Delivered when (and only if) this transaction commits; the payload is the plan.
            conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, str(plan.id)))

    def get_plan(self, plan_id: uuid.UUID) -> Plan | None:
        with self._conn() as conn:
            row = conn.execute(
                f"SELECT {PLAN_COLUMNS} FROM plans WHERE id = %s",  # noqa: S608
                (str(plan_id),),
            ).fetchone()
        return None if row is None else _plan(row)

    def claim_plan(self, now: datetime, lease: timedelta) -> Plan | None:
        with self._conn() as conn:
            row = conn.execute(
                "UPDATE plans SET lease_until = %s, attempts = attempts + 1, "  # noqa: S608
                "claims = claims + 1 WHERE id = (SELECT id FROM plans WHERE status = 'pending' "
                "AND (lease_until IS NULL OR lease_until <= %s) ORDER BY created_at, id "
                f"LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING {PLAN_COLUMNS}",
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
        self, plan_id: uuid.UUID, result: AnyPlanResult, now: datetime, claim: int | None = None
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
                f"AND claims = coalesce(%s::integer, claims) RETURNING {PLAN_COLUMNS}",
                (error, now, str(plan_id), claim),
            ).fetchone()
        return None if row is None else _plan(row)

    def prune_plans(self, finished_before: datetime) -> int:
        with self._conn() as conn:
            cur = conn.execute("DELETE FROM plans WHERE finished_at < %s", (finished_before,))
            return cur.rowcount

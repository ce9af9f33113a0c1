"""SQLite: route plans (`PlanStore`)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from cleanair_core.routes.plans import AnyPlanResult, Plan, check_new_plan
from cleanair_storage.plan_results import encode_plan_result
from cleanair_storage.plan_rows import PLAN_COLUMNS, plan_from_row, plan_row
from cleanair_storage.sqlite.database import FAIL_PENDING_PLAN, instant, timestamp
from cleanair_storage.sqlite.ledger import SqliteLedger


def _plan(row: Sequence[Any]) -> Plan:
    return plan_from_row(row, instant)


class SqlitePlans(SqliteLedger):
    """Route plans: submitted with their debit, claimed under a lease, finished once."""

    def add_plan(self, plan: Plan) -> None:
        check_new_plan(plan)
        with self._write() as conn:
            conn.execute(
                f"INSERT INTO plans ({PLAN_COLUMNS}) "  # noqa: S608
                f"VALUES ({', '.join(['?'] * (PLAN_COLUMNS.count(',') + 1))})",
                plan_row(plan, timestamp),
            )

    def get_plan(self, plan_id: uuid.UUID) -> Plan | None:
        row = (
            self._read()
            .execute(
                f"SELECT {PLAN_COLUMNS} FROM plans WHERE id = ?",  # noqa: S608
                (str(plan_id),),
            )
            .fetchone()
        )
        return None if row is None else _plan(row)

    def claim_plan(self, now: datetime, lease: timedelta) -> Plan | None:
        # BEGIN IMMEDIATE: no other process can take the same plan between the pick and the
        # update. The literal 'pending' lets the pick walk the plans_claim index in order.
        with self._write() as conn:
            rows = conn.execute(
                "UPDATE plans SET lease_until = ?, attempts = attempts + 1, "  # noqa: S608
                "claims = claims + 1 WHERE id = (SELECT id FROM plans WHERE status = 'pending' "
                "AND (lease_until IS NULL OR lease_until <= ?) ORDER BY created_at, id LIMIT 1) "
                f"RETURNING {PLAN_COLUMNS}",
                (timestamp(now + lease), timestamp(now)),
            ).fetchall()
        return _plan(rows[0]) if rows else None

    def renew_lease(self, plan_id: uuid.UUID, until: datetime, claim: int | None = None) -> bool:
        with self._write() as conn:
            cur = conn.execute(
                "UPDATE plans SET lease_until = ? WHERE id = ? AND status = 'pending' "
                "AND claims = coalesce(?, claims)",
                (timestamp(until), str(plan_id), claim),
            )
            return cur.rowcount == 1

    def release_plan(self, plan_id: uuid.UUID, claim: int | None = None) -> bool:
        with self._write() as conn:
            cur = conn.execute(
                "UPDATE plans SET lease_until = NULL, attempts = max(attempts - 1, 0) "
                "WHERE id = ? AND status = 'pending' "
                "AND claims = coalesce(?, claims)",
                (str(plan_id), claim),
            )
            return cur.rowcount == 1

    def complete_plan(
        self, plan_id: uuid.UUID, result: AnyPlanResult, now: datetime, claim: int | None = None
    ) -> bool:
        with self._write() as conn:
            cur = conn.execute(
                "UPDATE plans SET status = 'completed', result = ?, finished_at = ?, "
                "lease_until = NULL WHERE id = ? AND status = 'pending' "
                "AND claims = coalesce(?, claims)",
                (encode_plan_result(result), timestamp(now), str(plan_id), claim),
            )
            return cur.rowcount == 1

    def fail_plan(
        self, plan_id: uuid.UUID, error: str, now: datetime, claim: int | None = None
    ) -> Plan | None:
        with self._write() as conn:
            rows = conn.execute(
                f"{FAIL_PENDING_PLAN} WHERE id = ? AND status = 'pending' "
                "AND claims = coalesce(?, claims) "
                f"RETURNING {PLAN_COLUMNS}",
                (error, timestamp(now), str(plan_id), claim),
            ).fetchall()
        return _plan(rows[0]) if rows else None

    def prune_plans(self, finished_before: datetime) -> int:
        # Only a finished plan has `finished_at`; filtering on it alone walks plans_finished.
        with self._write() as conn:
            cur = conn.execute(
                "DELETE FROM plans WHERE finished_at < ?", (timestamp(finished_before),)
            )
            return cur.rowcount

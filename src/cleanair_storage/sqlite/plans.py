"""SQLite: route plans (`PlanStore`)."""

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
from cleanair_storage.sqlite.database import FAIL_PENDING_PLAN, instant, instant_or_none, timestamp
from cleanair_storage.sqlite.ledger import SqliteLedger


class SqlitePlans(SqliteLedger):
    """Route plans: submitted with their debit, claimed under a lease, finished once."""

    _PLAN_COLUMNS = (
        "id, owner, connection_id, start_lat, start_lon, end_lat, end_lon, activity, "
        "start_time, status, created_at, ledger_entry, result, error, finished_at, attempts, "
        "lease_until, claims"
    )

    @staticmethod
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
                start_time=instant(start_time),
            ),
            status=PlanStatus(str(status)),
            created_at=instant(created_at),
            ledger_entry=ledger_entry,
            result=None if result is None else decode_plan_result(result),
            error=error,
            finished_at=instant_or_none(finished_at),
            attempts=attempts,
            lease_until=instant_or_none(lease_until),
            claims=claims,
        )

    def add_plan(self, plan: Plan) -> None:
        check_new_plan(plan)
        request = plan.request
        with self._write() as conn:
            stored = plan
            conn.execute(
                f"INSERT INTO plans ({self._PLAN_COLUMNS}) "  # noqa: S608
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    str(stored.id),
                    stored.owner,
                    stored.connection_id,
                    request.start.lat,
                    request.start.lon,
                    request.end.lat,
                    request.end.lon,
                    request.activity.value,
                    timestamp(request.start_time),
                    stored.status.value,
                    timestamp(stored.created_at),
                    stored.ledger_entry,
                    None,  # a new plan has no result (check_new_plan)
                    stored.error,
                    None if stored.finished_at is None else timestamp(stored.finished_at),
                    stored.attempts,
                    None if stored.lease_until is None else timestamp(stored.lease_until),
                    stored.claims,
                ),
            )

    def get_plan(self, plan_id: uuid.UUID) -> Plan | None:
        row = (
            self._read()
            .execute(
                f"SELECT {self._PLAN_COLUMNS} FROM plans WHERE id = ?",  # noqa: S608
                (str(plan_id),),
            )
            .fetchone()
        )
        return None if row is None else self._plan(row)

    def claim_plan(self, now: datetime, lease: timedelta) -> Plan | None:
        # BEGIN IMMEDIATE: no other process can take the same plan between the pick and the
        # update. The literal 'pending' lets the pick walk the plans_claim index in order.
        with self._write() as conn:
            rows = conn.execute(
                "UPDATE plans SET lease_until = ?, attempts = attempts + 1, "  # noqa: S608
                "claims = claims + 1 WHERE id = (SELECT id FROM plans WHERE status = 'pending' "
                "AND (lease_until IS NULL OR lease_until <= ?) ORDER BY created_at, id LIMIT 1) "
                f"RETURNING {self._PLAN_COLUMNS}",
                (timestamp(now + lease), timestamp(now)),
            ).fetchall()
        return self._plan(rows[0]) if rows else None

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
        self, plan_id: uuid.UUID, result: PlanResult, now: datetime, claim: int | None = None
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
                f"RETURNING {self._PLAN_COLUMNS}",
                (error, timestamp(now), str(plan_id), claim),
            ).fetchall()
        return self._plan(rows[0]) if rows else None

    def prune_plans(self, finished_before: datetime) -> int:
        # Only a finished plan has `finished_at`; filtering on it alone walks plans_finished.
        with self._write() as conn:
            cur = conn.execute(
                "DELETE FROM plans WHERE finished_at < ?", (timestamp(finished_before),)
            )
            return cur.rowcount

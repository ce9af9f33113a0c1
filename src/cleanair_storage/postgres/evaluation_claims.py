"""PostgreSQL: the evaluation claims of alert subscriptions (`EvaluationClaims`).

Due subscriptions are claimed with `FOR UPDATE SKIP LOCKED`, as plans and deliveries are:
claimants in any number of processes and machines each lease different subscriptions, and
none waits for another's claim.
"""

from __future__ import annotations

import uuid
from datetime import datetime

from cleanair_core.alerts.rounds import ClaimedSubscription
from cleanair_storage.claim_rows import CLAIMED_COLUMNS, claim_order, claimed_from_row
from cleanair_storage.postgres.database import PostgresDatabase

# A MATERIALIZED pick: run once, so the LIMIT bounds what is leased (a subquery under IN may
# be run again by the planner, and SKIP LOCKED then picks other rows each time).
# `disabled_reason IS NULL` literally: the partial index subscriptions_due serves it.
_CLAIM = (
    "WITH picked AS MATERIALIZED (SELECT id FROM subscriptions "  # noqa: S608
    "WHERE disabled_reason IS NULL AND next_evaluation_at <= %s "
    "AND (lease_until IS NULL OR lease_until <= %s) "
    "ORDER BY next_evaluation_at, cell, id LIMIT %s FOR UPDATE SKIP LOCKED) "
    "UPDATE subscriptions SET lease_claimant = %s, lease_until = %s FROM picked "
    "WHERE subscriptions.id = picked.id "
    f"RETURNING {', '.join(f'subscriptions.{c}' for c in CLAIMED_COLUMNS.split(', '))}"
)


def _as_is(at: datetime) -> datetime:
    return at  # psycopg reads and writes TIMESTAMPTZ as aware datetimes


class PostgresEvaluationClaims(PostgresDatabase):
    """Due subscriptions leased to evaluation workers, finished by compare-and-set."""

    def claim_due_subscriptions(
        self, claimant: str, now: datetime, lease_until: datetime, limit: int
    ) -> list[ClaimedSubscription]:
        if limit <= 0:
            return []
        with self._statement() as conn:
            rows = conn.execute(_CLAIM, (now, now, limit, claimant, lease_until)).fetchall()
        # RETURNING gives rows in no promised order.
        return [claimed_from_row(row, _as_is) for row in sorted(rows, key=claim_order)]

    def finish_evaluation(
        self,
        subscription_id: uuid.UUID,
        claimant: str,
        expected_version: int,
        blob: str | None,
        next_evaluation_at: datetime,
    ) -> bool:
        # A claimant that took the subscription over holds its row lock while it claims:
        # this waits for that claim, then re-reads the row (READ COMMITTED) and finds
        # another claimant; a state saved since shows as another version. Either way no row
        # changes.
        with self._statement() as conn:
            cur = conn.execute(
                "UPDATE subscriptions SET state = coalesce(%s, state), "
                "state_version = state_version + %s, next_evaluation_at = %s, "
                "lease_claimant = NULL, lease_until = NULL "
                "WHERE id = %s AND lease_claimant = %s AND state_version = %s",
                (
                    blob,
                    0 if blob is None else 1,
                    next_evaluation_at,
                    str(subscription_id),
                    claimant,
                    expected_version,
                ),
            )
            return cur.rowcount == 1

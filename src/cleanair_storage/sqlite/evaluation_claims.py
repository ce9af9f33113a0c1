"""SQLite: the evaluation claims of alert subscriptions (`EvaluationClaims`).

A claim is one UPDATE ... RETURNING: SQLite runs it as one write transaction under the
database's write lock, so claimants in other threads and processes each lease different
subscriptions, and none reads a lease another is taking.
"""

from __future__ import annotations

import uuid
from datetime import datetime

from cleanair_core.alerts.rounds import ClaimedSubscription
from cleanair_storage.claim_rows import CLAIMED_COLUMNS, claim_order, claimed_from_row
from cleanair_storage.sqlite.database import SqliteDatabase, instant, timestamp

# `disabled_reason IS NULL` literally: the partial index subscriptions_due serves it.
_CLAIM = (
    "UPDATE subscriptions SET lease_claimant = ?, lease_until = ? WHERE id IN ("  # noqa: S608
    "SELECT id FROM subscriptions WHERE disabled_reason IS NULL AND next_evaluation_at <= ? "
    "AND (lease_until IS NULL OR lease_until <= ?) ORDER BY next_evaluation_at, cell, id "
    f"LIMIT ?) RETURNING {CLAIMED_COLUMNS}"
)


class SqliteEvaluationClaims(SqliteDatabase):
    """Due subscriptions leased to evaluation workers, finished by compare-and-set."""

    def claim_due_subscriptions(
        self, claimant: str, now: datetime, lease_until: datetime, limit: int
    ) -> list[ClaimedSubscription]:
        if limit <= 0:
            return []
        with self._autocommit() as conn:
            rows = conn.execute(
                _CLAIM, (claimant, timestamp(lease_until), timestamp(now), timestamp(now), limit)
            ).fetchall()
        return [claimed_from_row(row, instant) for row in sorted(rows, key=claim_order)]

    def finish_evaluation(
        self,
        subscription_id: uuid.UUID,
        claimant: str,
        expected_version: int,
        blob: str | None,
        next_evaluation_at: datetime,
    ) -> bool:
        # One statement compares the claimant and the version and writes: a claimant whose
        # lease was taken over, or a state saved since, finds no row to change.
        with self._autocommit() as conn:
            cur = conn.execute(
                "UPDATE subscriptions SET state = coalesce(?, state), "
                "state_version = state_version + ?, next_evaluation_at = ?, "
                "lease_claimant = NULL, lease_until = NULL "
                "WHERE id = ? AND lease_claimant = ? AND state_version = ?",
                (
                    blob,
                    0 if blob is None else 1,
                    timestamp(next_evaluation_at),
                    str(subscription_id),
                    claimant,
                    expected_version,
                ),
            )
            return cur.rowcount == 1

"""SQLite: the evaluation claims of alert subscriptions (`EvaluationClaims`).

A claim is one UPDATE ... RETURNING: SQLite runs it as one write transaction under the
database's write lock, so claimants in other threads and processes each lease different
subscriptions, and none reads a lease another is taking.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Sequence
from datetime import datetime

from cleanair_core.alerts.rounds import ClaimedSubscription, EvaluationFinish
from cleanair_storage.claim_rows import CLAIMED_COLUMNS, claim_order, claimed_from_row
from cleanair_storage.sqlite.database import SqliteDatabase, instant, timestamp

#: Outcomes one finishing statement stores: four host parameters each, far below SQLite's
#: limit (32,766 since 3.32; RETURNING needs 3.35).
FINISH_ROWS = 500
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

    def finish_evaluations(
        self, claimant: str, finishes: Sequence[EvaluationFinish]
    ) -> frozenset[uuid.UUID]:
        stored: set[uuid.UUID] = set()
        with self._autocommit() as conn:
            for first in range(0, len(finishes), FINISH_ROWS):
                part = finishes[first : first + FINISH_ROWS]
                values: list[object] = []
                for finish in part:
                    values += (
                        str(finish.subscription_id),
                        finish.expected_version,
                        finish.blob,
                        timestamp(finish.next_evaluation_at),
                    )
                rows = conn.execute(_finish_statement(len(part)), (*values, claimant))
                stored.update(uuid.UUID(row[0]) for row in rows)
        return frozenset(stored)


@functools.cache
def _finish_statement(rows: int) -> str:
    """One UPDATE for `rows` outcomes: it compares each one's claimant and version and
    writes, so a claimant whose lease was taken over, or a state saved since, finds no row
    to change; RETURNING names the rows changed."""
    values = ", ".join(["(?, ?, ?, ?)"] * rows)
    return (
        f"WITH finished(id, version, state, due) AS (VALUES {values}) "  # noqa: S608
        "UPDATE subscriptions SET state = coalesce(finished.state, subscriptions.state), "
        "state_version = subscriptions.state_version + (finished.state IS NOT NULL), "
        "next_evaluation_at = finished.due, lease_claimant = NULL, lease_until = NULL "
        "FROM finished WHERE subscriptions.id = finished.id "
        "AND subscriptions.lease_claimant = ? AND subscriptions.state_version = finished.version "
        "RETURNING id"
    )

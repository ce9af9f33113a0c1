"""PostgreSQL: the evaluation claims of alert subscriptions (`EvaluationClaims`).

Due subscriptions are claimed with `FOR UPDATE SKIP LOCKED`, as plans and deliveries are:
claimants in any number of processes and machines each lease different subscriptions, and
none waits for another's claim.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime

from cleanair_core.alerts.rounds import ClaimedSubscription, EvaluationFinish
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

# The outcomes as arrays, unnested into rows: one statement for any number. COLLATE "C" is
# the id column's own, so the join walks its primary key.
_FINISH = (
    "UPDATE subscriptions SET state = coalesce(finished.state, subscriptions.state), "
    "state_version = subscriptions.state_version "
    "+ CASE WHEN finished.state IS NULL THEN 0 ELSE 1 END, "
    "next_evaluation_at = finished.due, lease_claimant = NULL, lease_until = NULL "
    "FROM unnest(%s::text[], %s::bigint[], %s::text[], %s::timestamptz[]) "
    "AS finished(id, version, state, due) "
    'WHERE subscriptions.id = finished.id COLLATE "C" AND subscriptions.lease_claimant = %s '
    "AND subscriptions.state_version = finished.version RETURNING subscriptions.id"
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

    def finish_evaluations(
        self, claimant: str, finishes: Sequence[EvaluationFinish]
    ) -> frozenset[uuid.UUID]:
        if not finishes:
            return frozenset()
        # A claimant that took a subscription over holds its row lock while it claims:
        # this waits for that claim, then re-reads the row (READ COMMITTED) and finds
        # another claimant; a state saved since shows as another version. Either way that
        # row does not change. One statement, one round trip, for the whole batch.
        with self._statement() as conn:
            rows = conn.execute(
                _FINISH,
                (
                    [str(finish.subscription_id) for finish in finishes],
                    [finish.expected_version for finish in finishes],
                    [finish.blob for finish in finishes],
                    [finish.next_evaluation_at for finish in finishes],
                    claimant,
                ),
            ).fetchall()
        return frozenset(uuid.UUID(row[0]) for row in rows)

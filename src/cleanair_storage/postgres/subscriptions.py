"""PostgreSQL: alert subscriptions and their evaluator state (`SubscriptionStore`).

Creation takes a transaction-level advisory lock on the owner before it counts, so creations
for one owner from any number of processes and machines run one after the other, and the
per-user limit holds; other owners are not held up (one lock per owner, up to hash
collisions, which only make two owners wait for each other).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from cleanair_core.alerts.rounds import subscription_cell
from cleanair_core.alerts.subscriptions import (
    MAX_SUBSCRIPTIONS_PER_USER,
    Status,
    StoredState,
    Subscription,
    TooManySubscriptions,
    checked_page_limit,
)
from cleanair_storage.postgres.database import PostgresDatabase
from cleanair_storage.subscription_rows import (
    COLUMN_COUNT,
    SUBSCRIPTION_COLUMNS,
    page_query,
    subscription_from_row,
    subscription_row,
)

#: The first key of the owners' advisory locks (the second is the owner's hash): "alrt",
#: apart from every other advisory lock the store takes.
SUBSCRIPTION_LOCK = 0x616C7274

# With when it is first due (at once: its creation) and its cell, for the evaluation claims.
_INSERT = (
    f"INSERT INTO subscriptions ({SUBSCRIPTION_COLUMNS}, next_evaluation_at, cell) "  # noqa: S608
    f"VALUES ({', '.join(['%s'] * (COLUMN_COUNT + 2))})"
)


def _subscription(row: Sequence[Any]) -> Subscription:
    return subscription_from_row(row, _as_is)


def _as_is(at: datetime) -> datetime:
    return at  # psycopg reads and writes TIMESTAMPTZ as aware datetimes


class PostgresSubscriptions(PostgresDatabase):
    """Alert subscriptions, each with its evaluator state and the state's version."""

    def add_subscription(
        self, subscription: Subscription, limit: int = MAX_SUBSCRIPTIONS_PER_USER
    ) -> None:
        with self._conn() as conn:
            # READ COMMITTED alone would let two creations both count the same rows.
            conn.execute(
                "SELECT pg_advisory_xact_lock(%s, hashtext(%s))",
                (SUBSCRIPTION_LOCK, subscription.owner),
            )
            row = conn.execute(
                "SELECT count(*) FROM subscriptions WHERE owner = %s", (subscription.owner,)
            ).fetchone()
            if row is not None and row[0] >= limit:
                raise TooManySubscriptions(limit)
            conn.execute(
                _INSERT,
                (
                    *subscription_row(subscription, _as_is),
                    _as_is(subscription.created_at),
                    subscription_cell(subscription),
                ),
            )

    def get_subscription(self, subscription_id: uuid.UUID, owner: str) -> Subscription | None:
        with self._conn() as conn:
            row = conn.execute(
                f"SELECT {SUBSCRIPTION_COLUMNS} FROM subscriptions "  # noqa: S608
                "WHERE id = %s AND owner = %s",
                (str(subscription_id), owner),
            ).fetchone()
        return None if row is None else _subscription(row)

    def list_subscriptions(self, owner: str) -> list[Subscription]:
        with self._conn() as conn:
            rows = conn.execute(
                f"SELECT {SUBSCRIPTION_COLUMNS} FROM subscriptions "  # noqa: S608
                "WHERE owner = %s ORDER BY created_at, id",
                (owner,),
            ).fetchall()
        return [_subscription(row) for row in rows]

    def find_subscription(self, subscription_id: uuid.UUID) -> Subscription | None:
        with self._conn() as conn:
            row = conn.execute(
                f"SELECT {SUBSCRIPTION_COLUMNS} FROM subscriptions WHERE id = %s",  # noqa: S608
                (str(subscription_id),),
            ).fetchone()
        return None if row is None else _subscription(row)

    def all_subscriptions(
        self, after: uuid.UUID | None, limit: int, *, status: Status | None = None
    ) -> list[Subscription]:
        start = "" if after is None else str(after)
        with self._conn() as conn:
            rows = conn.execute(
                page_query("%s", status), (start, checked_page_limit(limit))
            ).fetchall()
        return [_subscription(row) for row in rows]

    def delete_subscription(self, subscription_id: uuid.UUID, owner: str) -> bool:
        with self._statement() as conn:
            cur = conn.execute(
                "DELETE FROM subscriptions WHERE id = %s AND owner = %s",
                (str(subscription_id), owner),
            )
            return cur.rowcount == 1

    def disable_subscription(self, subscription_id: uuid.UUID, reason: str, at: datetime) -> bool:
        with self._statement() as conn:
            cur = conn.execute(
                "UPDATE subscriptions SET disabled_reason = %s, disabled_at = %s "
                "WHERE id = %s AND disabled_reason IS NULL",
                (reason, at, str(subscription_id)),
            )
            return cur.rowcount == 1

    def rotate_subscription_secret(
        self, subscription_id: uuid.UUID, owner: str, previous_until: datetime
    ) -> Subscription | None:
        # The row lock of the UPDATE orders concurrent rotations: each adds one to what the
        # one before it committed.
        with self._statement() as conn:
            row = conn.execute(
                "UPDATE subscriptions SET secret_generation = secret_generation + 1, "  # noqa: S608
                "previous_generation_until = %s WHERE id = %s AND owner = %s "
                f"RETURNING {SUBSCRIPTION_COLUMNS}",
                (previous_until, str(subscription_id), owner),
            ).fetchone()
        return None if row is None else _subscription(row)

    def load_subscription_state(self, subscription_id: uuid.UUID) -> StoredState | None:
        with self._conn() as conn:
            row = conn.execute(
                "SELECT state_version, state FROM subscriptions WHERE id = %s",
                (str(subscription_id),),
            ).fetchone()
        return None if row is None else StoredState(int(row[0]), row[1])

    def save_subscription_state(
        self, subscription_id: uuid.UUID, expected_version: int, blob: str
    ) -> bool:
        # A second saver from the same version waits for the first's row lock, then re-reads
        # the row (READ COMMITTED), finds the version moved on and changes nothing.
        with self._statement() as conn:
            cur = conn.execute(
                "UPDATE subscriptions SET state = %s, state_version = state_version + 1 "
                "WHERE id = %s AND state_version = %s",
                (blob, str(subscription_id), expected_version),
            )
            return cur.rowcount == 1

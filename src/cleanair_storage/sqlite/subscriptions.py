"""SQLite: alert subscriptions and their evaluator state (`SubscriptionStore`)."""

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
from cleanair_storage.sqlite.database import SqliteDatabase, instant, timestamp
from cleanair_storage.subscription_rows import (
    COLUMN_COUNT,
    SUBSCRIPTION_COLUMNS,
    page_query,
    subscription_from_row,
    subscription_row,
)

# With when it is first due (at once: its creation) and its cell, for the evaluation claims.
_INSERT = (
    f"INSERT INTO subscriptions ({SUBSCRIPTION_COLUMNS}, next_evaluation_at, cell) "  # noqa: S608
    f"VALUES ({', '.join(['?'] * (COLUMN_COUNT + 2))})"
)


def _subscription(row: Sequence[Any]) -> Subscription:
    return subscription_from_row(row, instant)


class SqliteSubscriptions(SqliteDatabase):
    """Alert subscriptions, each with its evaluator state and the state's version."""

    def add_subscription(
        self, subscription: Subscription, limit: int = MAX_SUBSCRIPTIONS_PER_USER
    ) -> None:
        # BEGIN IMMEDIATE: the write lock is held from the count to the insert, so no other
        # thread or process adds one of the owner's subscriptions in between.
        with self._write() as conn:
            (count,) = conn.execute(
                "SELECT count(*) FROM subscriptions WHERE owner = ?", (subscription.owner,)
            ).fetchone()
            if count >= limit:
                raise TooManySubscriptions(limit)
            conn.execute(
                _INSERT,
                (
                    *subscription_row(subscription, timestamp),
                    timestamp(subscription.created_at),
                    subscription_cell(subscription),
                ),
            )

    def get_subscription(self, subscription_id: uuid.UUID, owner: str) -> Subscription | None:
        row = (
            self._read()
            .execute(
                f"SELECT {SUBSCRIPTION_COLUMNS} FROM subscriptions "  # noqa: S608
                "WHERE id = ? AND owner = ?",
                (str(subscription_id), owner),
            )
            .fetchone()
        )
        return None if row is None else _subscription(row)

    def list_subscriptions(self, owner: str) -> list[Subscription]:
        rows = (
            self._read()
            .execute(
                f"SELECT {SUBSCRIPTION_COLUMNS} FROM subscriptions "  # noqa: S608
                "WHERE owner = ? ORDER BY created_at, id",
                (owner,),
            )
            .fetchall()
        )
        return [_subscription(row) for row in rows]

    def find_subscription(self, subscription_id: uuid.UUID) -> Subscription | None:
        row = (
            self._read()
            .execute(
                f"SELECT {SUBSCRIPTION_COLUMNS} FROM subscriptions WHERE id = ?",  # noqa: S608
                (str(subscription_id),),
            )
            .fetchone()
        )
        return None if row is None else _subscription(row)

    def all_subscriptions(
        self, after: uuid.UUID | None, limit: int, *, status: Status | None = None
    ) -> list[Subscription]:
        start = "" if after is None else str(after)
        rows = (
            self._read()
            .execute(page_query("?", status), (start, checked_page_limit(limit)))
            .fetchall()
        )
        return [_subscription(row) for row in rows]

    def delete_subscription(self, subscription_id: uuid.UUID, owner: str) -> bool:
        with self._autocommit() as conn:
            cur = conn.execute(
                "DELETE FROM subscriptions WHERE id = ? AND owner = ?",
                (str(subscription_id), owner),
            )
            return cur.rowcount == 1

    def disable_subscription(self, subscription_id: uuid.UUID, reason: str, at: datetime) -> bool:
        with self._autocommit() as conn:
            cur = conn.execute(
                "UPDATE subscriptions SET disabled_reason = ?, disabled_at = ? "
                "WHERE id = ? AND disabled_reason IS NULL",
                (reason, timestamp(at), str(subscription_id)),
            )
            return cur.rowcount == 1

    def rotate_subscription_secret(
        self, subscription_id: uuid.UUID, owner: str, previous_until: datetime
    ) -> Subscription | None:
        with self._autocommit() as conn:
            rows = conn.execute(
                "UPDATE subscriptions SET secret_generation = secret_generation + 1, "  # noqa: S608
                "previous_generation_until = ? WHERE id = ? AND owner = ? "
                f"RETURNING {SUBSCRIPTION_COLUMNS}",
                (timestamp(previous_until), str(subscription_id), owner),
            ).fetchall()
        return _subscription(rows[0]) if rows else None

    def load_subscription_state(self, subscription_id: uuid.UUID) -> StoredState | None:
        row = (
            self._read()
            .execute(
                "SELECT state_version, state FROM subscriptions WHERE id = ?",
                (str(subscription_id),),
            )
            .fetchone()
        )
        return None if row is None else StoredState(int(row[0]), row[1])

    def save_subscription_state(
        self, subscription_id: uuid.UUID, expected_version: int, blob: str
    ) -> bool:
        # One statement: the version is compared and bumped atomically, so of two savers
        # from the same version exactly one changes the row.
        with self._autocommit() as conn:
            cur = conn.execute(
                "UPDATE subscriptions SET state = ?, state_version = state_version + 1 "
                "WHERE id = ? AND state_version = ?",
                (blob, str(subscription_id), expected_version),
            )
            return cur.rowcount == 1

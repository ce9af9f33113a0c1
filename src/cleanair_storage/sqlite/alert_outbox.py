"""SQLite: the alert feed and the outbox (`AlertOutbox`).

SQLite has one writer at a time (`BEGIN IMMEDIATE`), so a recording takes its owners'
cursors and commits before any other can take the next: cursors become visible in order with
no lock of their own. A claim is one UPDATE statement, atomic on its own: no two claimants,
in any thread or process, lease the same delivery.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from cleanair_core.alerts.outbox import DeliveryState, FeedEntry, NewEvent, OwedDelivery
from cleanair_storage.outbox_rows import (
    DELIVERY_COLUMNS,
    FEED_COLUMNS,
    check_finish,
    delivery_from_row,
    feed_entry_from_row,
    first_of_each,
)
from cleanair_storage.sqlite.database import SqliteDatabase, instant, timestamp

_NEXT_CURSOR = (
    "INSERT INTO alert_feed_ends (owner, last_cursor) VALUES (?, 1) "
    "ON CONFLICT (owner) DO UPDATE SET last_cursor = last_cursor + 1 RETURNING last_cursor"
)
_INSERT_FEED = (
    "INSERT INTO alert_feed (owner, cursor, event_id, subscription_id, payload, created_at) "
    "VALUES (?, ?, ?, ?, ?, ?)"
)
_INSERT_DELIVERY = (
    "INSERT INTO alert_deliveries (event_id, subscription_id, owner, url, payload, "
    "created_at, next_attempt_at) VALUES (?, ?, ?, ?, ?, ?, ?) "
    # An event told again once its feed entry was pruned (`prune_alert_events`) keeps the
    # delivery it had, delivered or not, rather than failing the recording.
    "ON CONFLICT (event_id) DO NOTHING"
)
# The oldest first (ties in a fixed order, as every adapter takes them), by the indexes
# alert_feed_recorded and alert_deliveries_finished (whose literal `state <> 'pending'` the
# query repeats for SQLite to use it): a batch reads only what it deletes.
_PRUNE_FEED = (
    "DELETE FROM alert_feed WHERE (owner, cursor) IN (SELECT owner, cursor FROM alert_feed "
    "WHERE created_at < ? ORDER BY created_at, owner, cursor LIMIT ?)"
)
_PRUNE_DELIVERIES = (
    "DELETE FROM alert_deliveries WHERE event_id IN (SELECT event_id FROM alert_deliveries "
    "WHERE state <> 'pending' AND created_at < ? ORDER BY created_at, event_id LIMIT ?)"
)
# The literal 'pending' lets the pick walk the partial index alert_deliveries_due in order.
_CLAIM = (
    "UPDATE alert_deliveries SET claimant = ?, lease_until = ? WHERE event_id IN ("  # noqa: S608
    "SELECT event_id FROM alert_deliveries WHERE state = 'pending' AND next_attempt_at <= ? "
    "AND (lease_until IS NULL OR lease_until <= ?) ORDER BY next_attempt_at, event_id LIMIT ?) "
    f"RETURNING {DELIVERY_COLUMNS}"
)


def _delivery(row: Sequence[Any]) -> OwedDelivery:
    return delivery_from_row(row, instant)


class SqliteAlertOutbox(SqliteDatabase):
    """The alert feed, numbered per owner, and the webhook deliveries owed, under leases."""

    def record_alert_events(self, events: Sequence[NewEvent]) -> list[uuid.UUID]:
        recorded: list[uuid.UUID] = []
        with self._write() as conn:
            for event in first_of_each(events):
                event_id = str(event.event_id)
                seen = conn.execute(
                    "SELECT 1 FROM alert_feed WHERE event_id = ?", (event_id,)
                ).fetchone()
                if seen is not None:
                    continue
                ((cursor,),) = conn.execute(_NEXT_CURSOR, (event.owner,)).fetchall()
                created_at = timestamp(event.created_at)
                subscription_id = str(event.subscription_id)
                conn.execute(
                    _INSERT_FEED,
                    (event.owner, cursor, event_id, subscription_id, event.payload, created_at),
                )
                if event.url is not None:
                    delivery = (event_id, subscription_id, event.owner, event.url, event.payload)
                    conn.execute(_INSERT_DELIVERY, (*delivery, created_at, created_at))
                recorded.append(event.event_id)
        return recorded

    def alert_feed(self, owner: str, after: int, limit: int) -> list[FeedEntry]:
        if limit <= 0:  # SQLite reads a negative LIMIT as none
            return []
        rows = (
            self._read()
            .execute(
                f"SELECT {FEED_COLUMNS} FROM alert_feed "  # noqa: S608
                "WHERE owner = ? AND cursor > ? ORDER BY cursor LIMIT ?",
                (owner, after, limit),
            )
            .fetchall()
        )
        return [feed_entry_from_row(row, instant) for row in rows]

    def claim_deliveries(
        self, claimant: str, now: datetime, lease_until: datetime, limit: int
    ) -> list[OwedDelivery]:
        if limit <= 0:
            return []
        with self._autocommit() as conn:
            rows = conn.execute(
                _CLAIM, (claimant, timestamp(lease_until), timestamp(now), timestamp(now), limit)
            ).fetchall()
        # RETURNING gives rows in no promised order.
        claimed = [_delivery(row) for row in rows]
        return sorted(claimed, key=lambda owed: (owed.next_attempt_at, str(owed.event_id)))

    def finish_delivery(
        self,
        event_id: uuid.UUID,
        claimant: str,
        state: DeliveryState,
        at: datetime,
        *,
        next_attempt_at: datetime | None = None,
        error: str | None = None,
    ) -> bool:
        check_finish(state, next_attempt_at)
        due = None if next_attempt_at is None else timestamp(next_attempt_at)
        with self._autocommit() as conn:
            cur = conn.execute(
                "UPDATE alert_deliveries SET state = ?, attempts = attempts + 1, "
                "next_attempt_at = coalesce(?, next_attempt_at), last_error = ?, "
                "claimant = NULL, lease_until = NULL "
                "WHERE event_id = ? AND claimant = ? AND state = 'pending'",
                (state.value, due, error, str(event_id), claimant),
            )
            return cur.rowcount == 1

    def alert_event_recorded(self, event_id: uuid.UUID) -> bool:
        row = (
            self._read()
            .execute("SELECT 1 FROM alert_feed WHERE event_id = ?", (str(event_id),))
            .fetchone()
        )
        return row is not None

    def owed_delivery(self, event_id: uuid.UUID) -> OwedDelivery | None:
        row = (
            self._read()
            .execute(
                f"SELECT {DELIVERY_COLUMNS} FROM alert_deliveries "  # noqa: S608
                "WHERE event_id = ?",
                (str(event_id),),
            )
            .fetchone()
        )
        return None if row is None else _delivery(row)

    def abandon_deliveries(self, subscription_id: uuid.UUID, at: datetime, error: str) -> int:
        with self._autocommit() as conn:
            cur = conn.execute(
                "UPDATE alert_deliveries SET state = 'failed', last_error = ?, "
                "claimant = NULL, lease_until = NULL "
                "WHERE subscription_id = ? AND state = 'pending'",
                (error, str(subscription_id)),
            )
            return cur.rowcount

    def prune_alert_events(self, before: datetime, limit: int) -> int:
        if limit <= 0:
            return 0
        at = timestamp(before)
        with self._write() as conn:
            feed = conn.execute(_PRUNE_FEED, (at, limit)).rowcount
            deliveries = conn.execute(_PRUNE_DELIVERIES, (at, limit)).rowcount
        return feed + deliveries

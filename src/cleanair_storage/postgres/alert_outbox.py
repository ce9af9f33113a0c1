"""PostgreSQL: the alert feed and the outbox (`AlertOutbox`).

Feed cursors are numbered from each owner's row of `alert_feed_ends`, which a recording
updates first (`UPDATE ... RETURNING`, through an upsert for a new owner) and holds locked
until it commits. A second recording of the same owner, in any process, waits for that
commit before it reads the end and numbers its own events; so cursors commit in the order
they were given, and a reader that sees cursor n sees every cursor below it. (A sequence
would not do: the transaction holding n + 1 may commit before the one holding n, and a
reader paging in between would step over n for good.) The owners' rows are taken in one
statement in a fixed order, so two recordings of several owners each cannot deadlock.

Deliveries are claimed with `FOR UPDATE SKIP LOCKED`, as plans are: claimants in any number
of processes and machines each take different deliveries, and none waits for another.
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
from cleanair_storage.postgres.database import PostgresDatabase

# The no-op update takes the row lock (and re-reads the row once a holder commits): the
# end it returns is final until this transaction ends.
_TAKE_FEED_ENDS = (
    "INSERT INTO alert_feed_ends (owner, last_cursor) "
    'SELECT owner, 0 FROM unnest(%s::text[]) AS owner ORDER BY owner COLLATE "C" '
    "ON CONFLICT (owner) DO UPDATE SET last_cursor = alert_feed_ends.last_cursor "
    "RETURNING owner, last_cursor"
)
_SET_FEED_ENDS = (
    "UPDATE alert_feed_ends SET last_cursor = ends.last_cursor "
    "FROM unnest(%s::text[], %s::bigint[]) AS ends (owner, last_cursor) "
    "WHERE alert_feed_ends.owner = ends.owner"
)
_INSERT_FEED = (
    "INSERT INTO alert_feed (owner, cursor, event_id, subscription_id, payload, created_at) "
    "VALUES (%s, %s, %s, %s, %s, %s)"
)
_INSERT_DELIVERY = (
    "INSERT INTO alert_deliveries (event_id, subscription_id, owner, url, payload, "
    "created_at, next_attempt_at) VALUES (%s, %s, %s, %s, %s, %s, %s) "
    # An event told again once its feed entry was pruned (`prune_alert_events`) keeps the
    # delivery it had, delivered or not, rather than failing the recording.
    "ON CONFLICT (event_id) DO NOTHING"
)
# The oldest first (ties in a fixed order, as every adapter takes them), by the indexes
# alert_feed_recorded and alert_deliveries_finished.
_PRUNE_FEED = (
    "DELETE FROM alert_feed WHERE (owner, cursor) IN (SELECT owner, cursor FROM alert_feed "
    'WHERE created_at < %s ORDER BY created_at, owner COLLATE "C", cursor LIMIT %s)'
)
_PRUNE_DELIVERIES = (
    "DELETE FROM alert_deliveries WHERE event_id IN (SELECT event_id FROM alert_deliveries "
    "WHERE state <> 'pending' AND created_at < %s ORDER BY created_at, event_id LIMIT %s)"
)
# A MATERIALIZED pick: run once, so the LIMIT bounds what is leased (a subquery under IN may
# be run again by the planner, and SKIP LOCKED then picks other rows each time).
_CLAIM = (
    "WITH picked AS MATERIALIZED (SELECT event_id FROM alert_deliveries "  # noqa: S608
    "WHERE state = 'pending' AND next_attempt_at <= %s "
    "AND (lease_until IS NULL OR lease_until <= %s) "
    "ORDER BY next_attempt_at, event_id LIMIT %s FOR UPDATE SKIP LOCKED) "
    "UPDATE alert_deliveries SET claimant = %s, lease_until = %s FROM picked "
    "WHERE alert_deliveries.event_id = picked.event_id "
    f"RETURNING {', '.join(f'alert_deliveries.{c}' for c in DELIVERY_COLUMNS.split(', '))}"
)


def _as_is(at: datetime) -> datetime:
    return at  # psycopg reads and writes TIMESTAMPTZ as aware datetimes


def _delivery(row: Sequence[Any]) -> OwedDelivery:
    return delivery_from_row(row, _as_is)


class PostgresAlertOutbox(PostgresDatabase):
    """The alert feed, numbered per owner, and the webhook deliveries owed, under leases."""

    def record_alert_events(self, events: Sequence[NewEvent]) -> list[uuid.UUID]:
        """See `AlertOutbox`. An id already recorded for another owner by a recording not yet
        committed is `DuplicateEntry` (an event's id names its subscription, so its owner:
        only a caller's mistake gets there)."""
        fresh = first_of_each(events)
        if not fresh:
            return []
        with self._conn() as conn:
            owners = sorted({event.owner for event in fresh})
            ends: dict[str, int] = {
                str(owner): int(end)
                for owner, end in conn.execute(_TAKE_FEED_ENDS, (owners,)).fetchall()
            }
            # Read after the owners' rows are held: a recording of the same events that
            # committed while this one waited is seen here.
            seen = {
                str(event_id)
                for (event_id,) in conn.execute(
                    "SELECT event_id FROM alert_feed WHERE event_id = ANY(%s::text[])",
                    ([str(event.event_id) for event in fresh],),
                )
            }
            new = [event for event in fresh if str(event.event_id) not in seen]
            if not new:
                return []
            feed_rows: list[tuple[Any, ...]] = []
            delivery_rows: list[tuple[Any, ...]] = []
            for event in new:
                ends[event.owner] += 1
                event_id, subscription_id = str(event.event_id), str(event.subscription_id)
                cursor = ends[event.owner]
                feed_rows.append(
                    (
                        event.owner,
                        cursor,
                        event_id,
                        subscription_id,
                        event.payload,
                        event.created_at,
                    )
                )
                if event.url is not None:
                    delivery = (event_id, subscription_id, event.owner, event.url, event.payload)
                    delivery_rows.append((*delivery, event.created_at, event.created_at))
            with conn.cursor() as cur:
                cur.executemany(_INSERT_FEED, feed_rows)
                if delivery_rows:
                    cur.executemany(_INSERT_DELIVERY, delivery_rows)
                moved = sorted({event.owner for event in new})
                cur.execute(_SET_FEED_ENDS, (moved, [ends[owner] for owner in moved]))
        return [event.event_id for event in new]

    def alert_feed(self, owner: str, after: int, limit: int) -> list[FeedEntry]:
        if limit <= 0:
            return []
        with self._conn() as conn:
            rows = conn.execute(
                f"SELECT {FEED_COLUMNS} FROM alert_feed "  # noqa: S608
                "WHERE owner = %s AND cursor > %s ORDER BY cursor LIMIT %s",
                (owner, after, limit),
            ).fetchall()
        return [feed_entry_from_row(row, _as_is) for row in rows]

    def claim_deliveries(
        self, claimant: str, now: datetime, lease_until: datetime, limit: int
    ) -> list[OwedDelivery]:
        if limit <= 0:
            return []
        with self._statement() as conn:
            rows = conn.execute(_CLAIM, (now, now, limit, claimant, lease_until)).fetchall()
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
        # A claimant that took the delivery over holds its row lock while it claims: this
        # waits for that claim, then re-reads the row and finds another claimant.
        with self._statement() as conn:
            cur = conn.execute(
                "UPDATE alert_deliveries SET state = %s, attempts = attempts + 1, "
                "next_attempt_at = coalesce(%s, next_attempt_at), last_error = %s, "
                "claimant = NULL, lease_until = NULL "
                "WHERE event_id = %s AND claimant = %s AND state = 'pending'",
                (state.value, next_attempt_at, error, str(event_id), claimant),
            )
            return cur.rowcount == 1

    def alert_event_recorded(self, event_id: uuid.UUID) -> bool:
        with self._conn() as conn:
            row = conn.execute(
                "SELECT 1 FROM alert_feed WHERE event_id = %s", (str(event_id),)
            ).fetchone()
        return row is not None

    def owed_delivery(self, event_id: uuid.UUID) -> OwedDelivery | None:
        with self._conn() as conn:
            row = conn.execute(
                f"SELECT {DELIVERY_COLUMNS} FROM alert_deliveries "  # noqa: S608
                "WHERE event_id = %s",
                (str(event_id),),
            ).fetchone()
        return None if row is None else _delivery(row)

    def abandon_deliveries(self, subscription_id: uuid.UUID, at: datetime, error: str) -> int:
        with self._statement() as conn:
            cur = conn.execute(
                "UPDATE alert_deliveries SET state = 'failed', last_error = %s, "
                "claimant = NULL, lease_until = NULL "
                "WHERE subscription_id = %s AND state = 'pending'",
                (error, str(subscription_id)),
            )
            return cur.rowcount

    def prune_alert_events(self, before: datetime, limit: int) -> int:
        if limit <= 0:
            return 0
        with self._conn() as conn:
            feed = conn.execute(_PRUNE_FEED, (before, limit)).rowcount
            deliveries = conn.execute(_PRUNE_DELIVERIES, (before, limit)).rowcount
        return feed + deliveries

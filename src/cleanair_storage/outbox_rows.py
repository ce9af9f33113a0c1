"""The stored form of the alert feed and outbox, shared by the SQLite and PostgreSQL adapters:
rows of `alert_feed` and `alert_deliveries` (the tables' comments are in the migrations).

Ids are UUID text. Each adapter passes how it reads an instant (SQLite: seconds since the
epoch; PostgreSQL: TIMESTAMPTZ as it is).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from cleanair_core.alerts.outbox import DeliveryState, FeedEntry, NewEvent, OwedDelivery

#: The columns `feed_entry_from_row` reads, in their order.
FEED_COLUMNS = "cursor, event_id, subscription_id, payload, created_at"
#: The columns `delivery_from_row` reads, in their order.
DELIVERY_COLUMNS = (
    "event_id, subscription_id, owner, url, payload, created_at, attempts, next_attempt_at, "
    "state, last_error"
)


def feed_entry_from_row(row: Sequence[Any], instant: Callable[[Any], datetime]) -> FeedEntry:
    """The feed entry a row of `FEED_COLUMNS` holds, instants read with `instant`."""
    cursor, event_id, subscription_id, payload, created_at = row
    return FeedEntry(
        cursor=int(cursor),
        event_id=uuid.UUID(str(event_id)),
        subscription_id=uuid.UUID(str(subscription_id)),
        payload=str(payload),
        created_at=instant(created_at),
    )


def delivery_from_row(row: Sequence[Any], instant: Callable[[Any], datetime]) -> OwedDelivery:
    """The delivery a row of `DELIVERY_COLUMNS` holds, instants read with `instant`."""
    (
        event_id,
        subscription_id,
        owner,
        url,
        payload,
        created_at,
        attempts,
        next_attempt_at,
        state,
        last_error,
    ) = row
    return OwedDelivery(
        event_id=uuid.UUID(str(event_id)),
        subscription_id=uuid.UUID(str(subscription_id)),
        owner=str(owner),
        url=str(url),
        payload=str(payload),
        created_at=instant(created_at),
        attempts=int(attempts),
        next_attempt_at=instant(next_attempt_at),
        state=DeliveryState(str(state)),
        last_error=None if last_error is None else str(last_error),
    )


def first_of_each(events: Sequence[NewEvent]) -> list[NewEvent]:
    """`events` without the repeats of an id, the first kept, in order: an id given twice in
    one call is recorded once, as the in-memory adapter does."""
    seen: set[uuid.UUID] = set()
    kept: list[NewEvent] = []
    for event in events:
        if event.event_id not in seen:
            seen.add(event.event_id)
            kept.append(event)
    return kept


def check_finish(state: DeliveryState, next_attempt_at: datetime | None) -> None:
    """Refuse a PENDING finish without its next attempt's time, before anything is written."""
    if state is DeliveryState.PENDING and next_attempt_at is None:
        raise ValueError("a delivery due again needs its next attempt's time")

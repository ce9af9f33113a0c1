"""The alert feed and the outbox: every event decided, kept in order per user for the feed
(`GET /ext/v1/alerts/events`), and the webhook deliveries still owed (issue 32).

Recording an event writes its feed entry and, when its subscription has a webhook, the
delivery owed, in one transaction with whatever else the caller's unit of work holds (the
subscription's new evaluator state, the charge): an event decided is never lost by a crash,
and an event recorded twice (a retried evaluation) is recorded once, by its id.

Deliveries are claimed as plans are, with a lease: a worker killed while it holds some
leaves them to another once the lease ends, so a delivery may go out twice (at-least-once),
always with the same `webhook-id` (the event id) for the receiver to de-duplicate.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from enum import StrEnum
from typing import Protocol

import attrs


@attrs.frozen(kw_only=True)
class NewEvent:
    """An event to record. `event_id` is stable (an `AlertEvent`'s id, or a notice's), and is
    the webhook's `webhook-id`; `payload` is the JSON text the feed shows and the webhook
    sends as its body; `url` the webhook it is owed to, None for a feed-only subscription."""

    event_id: uuid.UUID
    owner: str
    subscription_id: uuid.UUID
    payload: str
    created_at: datetime
    url: str | None = None


@attrs.frozen(kw_only=True)
class FeedEntry:
    """One event in its owner's feed. `cursor` numbers the owner's events from 1 with no
    gaps, in the order they were recorded."""

    cursor: int
    event_id: uuid.UUID
    subscription_id: uuid.UUID
    payload: str
    created_at: datetime


class DeliveryState(StrEnum):
    """Where a delivery stands."""

    PENDING = "pending"  # owed: due at `next_attempt_at`, perhaps leased to a worker now
    DELIVERED = "delivered"  # a 2xx came back
    FAILED = "failed"  # given up: a permanent failure, retries ran out, or the
    #                    subscription was disabled


@attrs.frozen(kw_only=True)
class OwedDelivery:
    """A delivery as the outbox holds it. `attempts` counts the attempts made so far;
    `created_at` is when its event was recorded (retries stop a while after it);
    `last_error` the reason of the last failed attempt."""

    event_id: uuid.UUID
    subscription_id: uuid.UUID
    owner: str
    url: str
    payload: str
    created_at: datetime
    attempts: int
    next_attempt_at: datetime
    state: DeliveryState = DeliveryState.PENDING
    last_error: str | None = None


class AlertOutbox(Protocol):
    """The feed and the outbox, shared by every process on one database."""

    def record_alert_events(self, events: Sequence[NewEvent]) -> list[uuid.UUID]:
        """Record the events whose ids are not recorded yet, each at the end of its owner's
        feed in the order given, with a delivery owed (due at once, at its `created_at`) for
        each that has a `url`; returns the ids newly recorded. All or nothing. Cursors
        become visible in order: a reader that sees an owner's cursor n (after the commit)
        sees every cursor below it too, whichever process recorded them."""
        ...

    def alert_event_recorded(self, event_id: uuid.UUID) -> bool:
        """Whether an event with that id is recorded (in any owner's feed)."""
        ...

    def alert_feed(self, owner: str, after: int, limit: int) -> list[FeedEntry]:
        """`owner`'s events with a cursor above `after`, in cursor order, at most `limit`."""
        ...

    def claim_deliveries(
        self, claimant: str, now: datetime, lease_until: datetime, limit: int
    ) -> list[OwedDelivery]:
        """Lease to `claimant` until `lease_until` up to `limit` pending deliveries due by
        `now` (`next_attempt_at` at or before it) whose lease, if any, ended by `now`; the
        earliest due first. Concurrent claims, in any process, never lease one delivery to
        two claimants at once."""
        ...

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
        """Record one attempt of a delivery `claimant` holds the lease of, made at `at`:
        DELIVERED or FAILED ends it; PENDING makes it due again at `next_attempt_at`
        (required then) with the lease released. Either way `attempts` counts one more and
        `error` (None on success) becomes `last_error`. False, with nothing written, when
        the lease has passed to another claimant or the delivery is no longer pending."""
        ...

    def owed_delivery(self, event_id: uuid.UUID) -> OwedDelivery | None:
        """The delivery of that event in whatever state, None when none was owed."""
        ...

    def abandon_deliveries(self, subscription_id: uuid.UUID, at: datetime, error: str) -> int:
        """Give up every pending delivery of a subscription (disabled, or deleted), each
        FAILED with `error`; how many were."""
        ...

    def prune_alert_events(self, before: datetime, limit: int) -> int:
        """Delete up to `limit` of the oldest feed entries recorded before `before`, and up
        to `limit` of the oldest deliveries created before it that are no longer owed
        (delivered or failed); how many rows went. A delivery still owed is kept whatever
        its age; an owner's cursors are never given again (the feed's end is kept). Once
        its entry is gone, an event counts as never recorded (`alert_event_recorded`)."""
        ...

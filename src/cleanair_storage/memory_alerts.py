"""The in-memory store's alert tables: subscriptions, their stored state, the alert feed and
outbox, and evaluation claims.

Half of `MemoryStore`, kept on the same object rather than in one of its own: every
operation holds the store's one lock, and `MemoryStore.transaction` undoes the alert tables
with the rest by copying the object's maps.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Sequence
from datetime import datetime

import attrs

from cleanair_core.alerts.outbox import DeliveryState, FeedEntry, NewEvent, OwedDelivery
from cleanair_core.alerts.rounds import ClaimedSubscription, EvaluationFinish, subscription_cell
from cleanair_core.alerts.subscriptions import (
    MAX_SUBSCRIPTIONS_PER_USER,
    Disabled,
    Status,
    StoredState,
    Subscription,
    TooManySubscriptions,
    checked_page_limit,
)
from cleanair_core.errors import DuplicateEntry


class MemoryAlertTables:
    """The alert half of `MemoryStore`; the store supplies `_lock`."""

    _lock: threading.RLock

    def __init__(self) -> None:
        self._subscriptions: dict[uuid.UUID, Subscription] = {}
        self._subscription_states: dict[uuid.UUID, StoredState] = {}
        # Flat maps of immutable values: `transaction` copies each map shallowly to undo.
        self._feed: dict[tuple[str, int], FeedEntry] = {}
        self._feed_ends: dict[str, int] = {}
        self._recorded: set[uuid.UUID] = set()
        self._deliveries: dict[uuid.UUID, OwedDelivery] = {}
        self._leases: dict[uuid.UUID, tuple[str, datetime]] = {}
        # Evaluation claims: when each subscription is next due, and who holds it until when.
        self._next_evaluations: dict[uuid.UUID, datetime] = {}
        self._evaluation_leases: dict[uuid.UUID, tuple[str, datetime]] = {}

    # alert subscriptions
    def add_subscription(
        self, subscription: Subscription, limit: int = MAX_SUBSCRIPTIONS_PER_USER
    ) -> None:
        with self._lock:
            held = sum(1 for s in self._subscriptions.values() if s.owner == subscription.owner)
            if held >= limit:
                raise TooManySubscriptions(limit)
            if subscription.id in self._subscriptions:
                raise DuplicateEntry("a subscription with this id is already stored")
            self._subscriptions[subscription.id] = subscription
            self._subscription_states[subscription.id] = StoredState(0, None)
            self._next_evaluations[subscription.id] = subscription.created_at

    def get_subscription(self, subscription_id: uuid.UUID, owner: str) -> Subscription | None:
        with self._lock:
            found = self._subscriptions.get(subscription_id)
            return found if found is not None and found.owner == owner else None

    def list_subscriptions(self, owner: str) -> list[Subscription]:
        with self._lock:
            return sorted(
                (s for s in self._subscriptions.values() if s.owner == owner),
                key=lambda s: (s.created_at, str(s.id)),
            )

    def find_subscription(self, subscription_id: uuid.UUID) -> Subscription | None:
        with self._lock:
            return self._subscriptions.get(subscription_id)

    def all_subscriptions(
        self, after: uuid.UUID | None, limit: int, *, status: Status | None = None
    ) -> list[Subscription]:
        checked_page_limit(limit)
        with self._lock:
            # uuid.UUID orders as its 128-bit number, as the SQL stores order the id's text.
            page = sorted(
                (
                    s
                    for s in self._subscriptions.values()
                    if (after is None or s.id > after) and (status is None or s.status is status)
                ),
                key=lambda s: s.id,
            )
            return page[:limit]

    def delete_subscription(self, subscription_id: uuid.UUID, owner: str) -> bool:
        with self._lock:
            if self.get_subscription(subscription_id, owner) is None:
                return False
            del self._subscriptions[subscription_id]
            del self._subscription_states[subscription_id]
            self._next_evaluations.pop(subscription_id, None)
            self._evaluation_leases.pop(subscription_id, None)
            return True

    def disable_subscription(self, subscription_id: uuid.UUID, reason: str, at: datetime) -> bool:
        with self._lock:
            found = self._subscriptions.get(subscription_id)
            if found is None or found.disabled is not None:
                return False
            self._subscriptions[subscription_id] = attrs.evolve(
                found, disabled=Disabled(reason, at)
            )
            return True

    def rotate_subscription_secret(
        self, subscription_id: uuid.UUID, owner: str, previous_until: datetime
    ) -> Subscription | None:
        with self._lock:
            found = self.get_subscription(subscription_id, owner)
            if found is None:
                return None
            rotated = attrs.evolve(
                found,
                secret_generation=found.secret_generation + 1,
                previous_generation_until=previous_until,
            )
            self._subscriptions[subscription_id] = rotated
            return rotated

    def load_subscription_state(self, subscription_id: uuid.UUID) -> StoredState | None:
        with self._lock:
            return self._subscription_states.get(subscription_id)

    def save_subscription_state(
        self, subscription_id: uuid.UUID, expected_version: int, blob: str
    ) -> bool:
        with self._lock:
            stored = self._subscription_states.get(subscription_id)
            if stored is None or stored.version != expected_version:
                return False
            self._subscription_states[subscription_id] = StoredState(expected_version + 1, blob)
            return True

    # the alert feed and outbox
    def record_alert_events(self, events: Sequence[NewEvent]) -> list[uuid.UUID]:
        with self._lock:
            recorded: list[uuid.UUID] = []
            for event in events:
                if event.event_id in self._recorded:
                    continue
                self._recorded.add(event.event_id)
                cursor = self._feed_ends.get(event.owner, 0) + 1
                self._feed_ends[event.owner] = cursor
                self._feed[(event.owner, cursor)] = FeedEntry(
                    cursor=cursor,
                    event_id=event.event_id,
                    subscription_id=event.subscription_id,
                    payload=event.payload,
                    created_at=event.created_at,
                )
                # As the SQL stores: an event told again once its feed entry was pruned
                # keeps the delivery it had.
                if event.url is not None and event.event_id not in self._deliveries:
                    self._deliveries[event.event_id] = OwedDelivery(
                        event_id=event.event_id,
                        subscription_id=event.subscription_id,
                        owner=event.owner,
                        url=event.url,
                        payload=event.payload,
                        created_at=event.created_at,
                        attempts=0,
                        next_attempt_at=event.created_at,
                    )
                recorded.append(event.event_id)
            return recorded

    def alert_event_recorded(self, event_id: uuid.UUID) -> bool:
        with self._lock:
            return event_id in self._recorded

    def alert_feed(self, owner: str, after: int, limit: int) -> list[FeedEntry]:
        with self._lock:
            # Pruning leaves gaps below an owner's first entry kept: the page is the entries
            # after `after` that remain, as an index range would give them.
            cursors = sorted(c for (o, c) in self._feed if o == owner and c > after)
            return [self._feed[(owner, cursor)] for cursor in cursors[: max(limit, 0)]]

    def claim_deliveries(
        self, claimant: str, now: datetime, lease_until: datetime, limit: int
    ) -> list[OwedDelivery]:
        with self._lock:
            due = sorted(
                (
                    owed
                    for owed in self._deliveries.values()
                    if owed.state is DeliveryState.PENDING
                    and owed.next_attempt_at <= now
                    and self._leases.get(owed.event_id, ("", now))[1] <= now
                ),
                key=lambda owed: (owed.next_attempt_at, str(owed.event_id)),
            )[: max(limit, 0)]
            for owed in due:
                self._leases[owed.event_id] = (claimant, lease_until)
            return due

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
        if state is DeliveryState.PENDING and next_attempt_at is None:
            raise ValueError("a delivery due again needs its next attempt's time")
        with self._lock:
            owed = self._deliveries.get(event_id)
            lease = self._leases.get(event_id)
            if owed is None or owed.state is not DeliveryState.PENDING:
                return False
            if lease is None or lease[0] != claimant:
                return False
            del self._leases[event_id]
            self._deliveries[event_id] = attrs.evolve(
                owed,
                state=state,
                attempts=owed.attempts + 1,
                next_attempt_at=next_attempt_at or owed.next_attempt_at,
                last_error=error,
            )
            return True

    def owed_delivery(self, event_id: uuid.UUID) -> OwedDelivery | None:
        with self._lock:
            return self._deliveries.get(event_id)

    def abandon_deliveries(self, subscription_id: uuid.UUID, at: datetime, error: str) -> int:
        with self._lock:
            abandoned = 0
            for event_id, owed in list(self._deliveries.items()):
                if owed.subscription_id == subscription_id and owed.state is DeliveryState.PENDING:
                    self._deliveries[event_id] = attrs.evolve(
                        owed, state=DeliveryState.FAILED, last_error=error
                    )
                    self._leases.pop(event_id, None)
                    abandoned += 1
            return abandoned

    def prune_alert_events(self, before: datetime, limit: int) -> int:
        with self._lock:
            old = sorted(
                (entry.created_at, key)
                for key, entry in self._feed.items()
                if entry.created_at < before
            )[: max(limit, 0)]
            for _, key in old:
                self._recorded.discard(self._feed.pop(key).event_id)
            done = sorted(
                (owed.created_at, str(owed.event_id), owed.event_id)
                for owed in self._deliveries.values()
                if owed.state is not DeliveryState.PENDING and owed.created_at < before
            )[: max(limit, 0)]
            for _, _, event_id in done:
                del self._deliveries[event_id]
            return len(old) + len(done)

    # evaluation claims
    def claim_due_subscriptions(
        self, claimant: str, now: datetime, lease_until: datetime, limit: int
    ) -> list[ClaimedSubscription]:
        with self._lock:
            due = sorted(
                (
                    subscription
                    for subscription in self._subscriptions.values()
                    if subscription.disabled is None
                    and self._next_evaluations.get(subscription.id, now) <= now
                    and self._evaluation_leases.get(subscription.id, ("", now))[1] <= now
                ),
                key=lambda s: (
                    self._next_evaluations.get(s.id, now),
                    subscription_cell(s),
                    str(s.id),
                ),
            )[: max(limit, 0)]
            for subscription in due:
                self._evaluation_leases[subscription.id] = (claimant, lease_until)
            return [
                ClaimedSubscription(subscription, self._subscription_states[subscription.id])
                for subscription in due
            ]

    def finish_evaluations(
        self, claimant: str, finishes: Sequence[EvaluationFinish]
    ) -> frozenset[uuid.UUID]:
        with self._lock:
            return frozenset(
                finish.subscription_id
                for finish in finishes
                if self._finish_evaluation(claimant, finish)
            )

    def _finish_evaluation(self, claimant: str, finish: EvaluationFinish) -> bool:
        subscription_id = finish.subscription_id
        lease = self._evaluation_leases.get(subscription_id)
        stored = self._subscription_states.get(subscription_id)
        if lease is None or lease[0] != claimant or stored is None:
            return False
        if stored.version != finish.expected_version:
            return False
        del self._evaluation_leases[subscription_id]
        if finish.blob is not None:
            self._subscription_states[subscription_id] = StoredState(
                finish.expected_version + 1, finish.blob
            )
        self._next_evaluations[subscription_id] = finish.next_evaluation_at
        return True

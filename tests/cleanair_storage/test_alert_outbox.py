"""`AlertOutbox` on every adapter (the `store` fixture runs each test on the memory, SQLite and
PostgreSQL stores): recording events once by id, the per-owner feed and its paging without
gaps under concurrent recorders, delivery claims under leases, their outcomes, and a state
machine holding each durable adapter to the in-memory one and to a model."""

from __future__ import annotations

import asyncio
import functools
import shutil
import sqlite3
import tempfile
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import TypeVar

import attrs
import psycopg
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule
from sqlite_utils import Database

from cleanair_core.alerts.outbox import DeliveryState, FeedEntry, NewEvent, OwedDelivery
from cleanair_core.offload import here_unless_blocked
from cleanair_core.ports import Store
from cleanair_storage.memory import MemoryStore
from cleanair_storage.migrations import sqlite_utils_migrations
from cleanair_storage.postgres import PostgresStore
from cleanair_storage.postgres.migrations import migrate
from cleanair_storage.postgres.schema import MIGRATIONS
from cleanair_storage.sqlite import SqliteStore
from cleanair_storage.sqlite.alert_outbox import _PRUNE_DELIVERIES, _PRUNE_FEED
from support.concurrency import run_together
from support.postgres import shared_server
from support.subscriptions import T0, make_subscription

SUBSCRIPTION = uuid.UUID("5b7cd0a4-0000-4000-8000-000000000001")
OTHER_SUBSCRIPTION = uuid.UUID("5b7cd0a4-0000-4000-8000-000000000002")
URL = "https://hooks.example.com/alerts?token=s3cr3t"
LEASE = timedelta(minutes=1)
TICK = timedelta(seconds=1)
T = TypeVar("T")


def new_event(
    owner: str = "alice",
    *,
    event_id: uuid.UUID | None = None,
    subscription_id: uuid.UUID = SUBSCRIPTION,
    at: datetime = T0,
    url: str | None = URL,
    payload: str | None = None,
) -> NewEvent:
    event_id = event_id or uuid.uuid4()
    return NewEvent(
        event_id=event_id,
        owner=owner,
        subscription_id=subscription_id,
        payload=payload if payload is not None else f'{{"id": "{event_id}"}}',
        created_at=at,
        url=url,
    )


def entry(event: NewEvent, cursor: int) -> FeedEntry:
    return FeedEntry(
        cursor=cursor,
        event_id=event.event_id,
        subscription_id=event.subscription_id,
        payload=event.payload,
        created_at=event.created_at,
    )


def owed(
    event: NewEvent,
    *,
    attempts: int = 0,
    next_attempt_at: datetime | None = None,
    state: DeliveryState = DeliveryState.PENDING,
    last_error: str | None = None,
) -> OwedDelivery:
    """The delivery `event` was recorded with (due at once, never attempted), or as changed
    since."""
    assert event.url is not None
    return OwedDelivery(
        event_id=event.event_id,
        subscription_id=event.subscription_id,
        owner=event.owner,
        url=event.url,
        payload=event.payload,
        created_at=event.created_at,
        attempts=attempts,
        next_attempt_at=next_attempt_at or event.created_at,
        state=state,
        last_error=last_error,
    )


def ids(deliveries: Sequence[OwedDelivery]) -> list[uuid.UUID]:
    return [delivery.event_id for delivery in deliveries]


# -- recording and the feed ---------------------------------------------------------------------


def test_events_go_to_the_end_of_their_owners_feed_in_order(store: Store) -> None:
    first, second = new_event("alice"), new_event("alice", url=None)
    bobs = new_event("bob")
    third = new_event("alice", at=T0 - timedelta(hours=1))  # recorded order, not time order
    recorded = store.record_alert_events([first, bobs, second])
    assert recorded == [first.event_id, bobs.event_id, second.event_id]
    assert store.record_alert_events([third]) == [third.event_id]
    assert store.alert_feed("alice", 0, 10) == [
        entry(first, 1),
        entry(second, 2),
        entry(third, 3),
    ]
    assert store.alert_feed("bob", 0, 10) == [entry(bobs, 1)]
    assert store.alert_feed("carol", 0, 10) == []


def test_an_event_is_recorded_once_by_its_id(store: Store) -> None:
    first, second, third = new_event(), new_event(), new_event()
    assert store.record_alert_events([first, second]) == [first.event_id, second.event_id]
    # A retried evaluation records the same ids again, perhaps beside new ones.
    again = [attrs.evolve(second, payload="changed"), third, first, third]
    assert store.record_alert_events(again) == [third.event_id]
    assert store.record_alert_events([first]) == []
    assert store.alert_feed("alice", 0, 10) == [
        entry(first, 1),
        entry(second, 2),
        entry(third, 3),
    ]
    assert store.owed_delivery(second.event_id) == owed(second)


def test_whether_an_event_is_recorded_whatever_its_owner(store: Store) -> None:
    alices, bobs, never = new_event("alice"), new_event("bob", url=None), new_event()
    store.record_alert_events([alices, bobs])
    assert store.alert_event_recorded(alices.event_id)
    assert store.alert_event_recorded(bobs.event_id)
    assert not store.alert_event_recorded(never.event_id)
    with store.transaction() as unit:
        unit.record_alert_events([never])
        assert unit.alert_event_recorded(never.event_id)  # inside its own unit of work


def test_recording_nothing_records_nothing(store: Store) -> None:
    assert store.record_alert_events([]) == []
    assert store.alert_feed("alice", 0, 10) == []


def test_a_delivery_is_owed_for_each_event_with_a_url_due_at_once(store: Store) -> None:
    hooked = new_event(at=T0 + timedelta(microseconds=7))
    feed_only = new_event(url=None)
    store.record_alert_events([hooked, feed_only])
    assert store.owed_delivery(hooked.event_id) == owed(hooked)
    assert store.owed_delivery(feed_only.event_id) is None
    assert store.owed_delivery(uuid.uuid4()) is None


def test_the_feed_pages_by_cursor(store: Store) -> None:
    events = [new_event(at=T0 + timedelta(seconds=i)) for i in range(7)]
    store.record_alert_events(events[:4])
    store.record_alert_events(events[4:])
    pages: list[list[int]] = []
    after = 0
    while page := store.alert_feed("alice", after, 3):
        pages.append([e.cursor for e in page])
        after = page[-1].cursor
    assert pages == [[1, 2, 3], [4, 5, 6], [7]]
    assert store.alert_feed("alice", 2, 2) == [entry(events[2], 3), entry(events[3], 4)]
    assert store.alert_feed("alice", 7, 3) == []
    assert store.alert_feed("alice", 100, 3) == []
    assert store.alert_feed("alice", 0, 0) == []
    assert store.alert_feed("alice", 0, -1) == []
    assert store.alert_feed("alice", -5, 2) == [entry(events[0], 1), entry(events[1], 2)]


def test_the_feed_outlives_a_deleted_subscription(store: Store) -> None:
    subscription = make_subscription()
    store.add_subscription(subscription)
    event = new_event(subscription_id=subscription.id)
    store.record_alert_events([event])
    assert store.delete_subscription(subscription.id, "alice")
    assert store.alert_feed("alice", 0, 10) == [entry(event, 1)]
    assert store.owed_delivery(event.event_id) == owed(event)


class _Undo(Exception):
    """Leaves a unit of work."""


def test_a_rolled_back_unit_of_work_records_nothing(store: Store) -> None:
    kept = new_event()
    store.record_alert_events([kept])
    undone, bobs = new_event(), new_event("bob")

    def record_then_fail() -> None:
        with store.transaction() as work:
            assert work.record_alert_events([undone, bobs]) == [undone.event_id, bobs.event_id]
            assert work.alert_feed("alice", 0, 10) == [entry(kept, 1), entry(undone, 2)]
            raise _Undo

    with pytest.raises(_Undo):
        record_then_fail()
    assert store.alert_feed("alice", 0, 10) == [entry(kept, 1)]
    assert store.alert_feed("bob", 0, 10) == []
    assert store.owed_delivery(undone.event_id) is None
    # Nothing of it stayed: not the id, not the cursor it took.
    assert store.record_alert_events([undone]) == [undone.event_id]
    assert store.alert_feed("alice", 0, 10) == [entry(kept, 1), entry(undone, 2)]


def test_a_recording_commits_with_the_rest_of_its_unit_of_work(store: Store) -> None:
    subscription = make_subscription()
    store.add_subscription(subscription)
    event = new_event(subscription_id=subscription.id)
    with store.transaction() as work:
        assert work.save_subscription_state(subscription.id, 0, "{}")
        assert work.record_alert_events([event]) == [event.event_id]
    stored = store.load_subscription_state(subscription.id)
    assert stored is not None
    assert stored.version == 1
    assert store.alert_feed("alice", 0, 10) == [entry(event, 1)]
    assert store.owed_delivery(event.event_id) == owed(event)


# -- claims ---------------------------------------------------------------------------------


def test_claims_take_the_due_deliveries_earliest_first(store: Store) -> None:
    late = new_event(at=T0 + timedelta(seconds=2))
    early = new_event(at=T0)
    middle = new_event(at=T0 + timedelta(seconds=1))
    store.record_alert_events([late, early, middle, new_event(url=None)])
    now = T0 + timedelta(seconds=1)
    claimed = store.claim_deliveries("w1", now, now + LEASE, 10)
    assert claimed == [owed(early), owed(middle)]
    assert store.claim_deliveries("w2", now, now + LEASE, 10) == []  # leased, or not due
    later = T0 + timedelta(seconds=2)
    assert store.claim_deliveries("w2", later, later + LEASE, 10) == [owed(late)]


def test_claims_take_at_most_the_limit_then_the_lowest_id(store: Store) -> None:
    same_time = sorted((new_event() for _ in range(5)), key=lambda e: str(e.event_id))
    store.record_alert_events(list(reversed(same_time)))
    assert ids(store.claim_deliveries("w1", T0, T0 + LEASE, 2)) == ids_of(same_time[:2])
    assert ids(store.claim_deliveries("w2", T0, T0 + LEASE, 0)) == []
    assert ids(store.claim_deliveries("w2", T0, T0 + LEASE, -1)) == []
    assert ids(store.claim_deliveries("w2", T0, T0 + LEASE, 2)) == ids_of(same_time[2:4])
    assert ids(store.claim_deliveries("w3", T0, T0 + LEASE, 2)) == ids_of(same_time[4:])


def ids_of(events: Sequence[NewEvent]) -> list[uuid.UUID]:
    return [event.event_id for event in events]


def test_a_lease_that_ended_is_taken_over_and_the_old_claimant_loses(store: Store) -> None:
    event = new_event()
    store.record_alert_events([event])
    assert ids(store.claim_deliveries("w1", T0, T0 + LEASE, 1)) == [event.event_id]
    assert store.claim_deliveries("w2", T0 + LEASE / 2, T0 + 2 * LEASE, 1) == []
    # Ended at T0 + LEASE exactly: another claimant takes it over.
    assert ids(store.claim_deliveries("w2", T0 + LEASE, T0 + 2 * LEASE, 1)) == [event.event_id]
    # The first claimant, slow, comes back with its outcome: refused, nothing written.
    at = T0 + LEASE + timedelta(seconds=1)
    assert not store.finish_delivery(event.event_id, "w1", DeliveryState.DELIVERED, at)
    assert store.owed_delivery(event.event_id) == owed(event)
    assert store.finish_delivery(event.event_id, "w2", DeliveryState.DELIVERED, at)
    assert store.owed_delivery(event.event_id) == owed(
        event, state=DeliveryState.DELIVERED, attempts=1
    )


def test_the_claimant_may_finish_after_its_lease_ended_if_nobody_took_over(
    store: Store,
) -> None:
    event = new_event()
    store.record_alert_events([event])
    store.claim_deliveries("w1", T0, T0 + LEASE, 1)
    late = T0 + 2 * LEASE
    assert store.finish_delivery(event.event_id, "w1", DeliveryState.DELIVERED, late)


def test_a_pending_outcome_reschedules_and_releases_the_lease(store: Store) -> None:
    event = new_event()
    store.record_alert_events([event])
    store.claim_deliveries("w1", T0, T0 + timedelta(hours=1), 1)
    retry_at = T0 + timedelta(minutes=5)
    assert store.finish_delivery(
        event.event_id,
        "w1",
        DeliveryState.PENDING,
        T0 + timedelta(seconds=3),
        next_attempt_at=retry_at,
        error="status 503",
    )
    assert store.owed_delivery(event.event_id) == owed(
        event, attempts=1, next_attempt_at=retry_at, last_error="status 503"
    )
    # Released: the attempt is not finished twice, and the retry does not wait for the
    # hour-long lease it was claimed with.
    at = T0 + timedelta(seconds=4)
    assert not store.finish_delivery(event.event_id, "w1", DeliveryState.DELIVERED, at)
    before = retry_at - timedelta(microseconds=1)
    assert store.claim_deliveries("w2", before, before + LEASE, 1) == []
    claimed = store.claim_deliveries("w2", retry_at, retry_at + LEASE, 1)
    assert claimed == [owed(event, attempts=1, next_attempt_at=retry_at, last_error="status 503")]
    assert store.finish_delivery(event.event_id, "w2", DeliveryState.DELIVERED, retry_at)
    assert store.owed_delivery(event.event_id) == owed(
        event, attempts=2, next_attempt_at=retry_at, state=DeliveryState.DELIVERED
    )


@pytest.mark.parametrize("state", [DeliveryState.DELIVERED, DeliveryState.FAILED])
def test_delivered_and_failed_end_a_delivery(store: Store, state: DeliveryState) -> None:
    event = new_event()
    store.record_alert_events([event])
    store.claim_deliveries("w1", T0, T0 + LEASE, 1)
    error = None if state is DeliveryState.DELIVERED else "status 404"
    assert store.finish_delivery(event.event_id, "w1", state, T0, error=error)
    ended = owed(event, state=state, attempts=1, last_error=error)
    assert store.owed_delivery(event.event_id) == ended
    far = T0 + timedelta(days=30)
    assert store.claim_deliveries("w2", far, far + LEASE, 10) == []
    assert not store.finish_delivery(event.event_id, "w1", DeliveryState.DELIVERED, far)
    assert store.owed_delivery(event.event_id) == ended


def test_a_finish_needs_the_lease(store: Store) -> None:
    event = new_event()
    store.record_alert_events([event])
    # Never claimed, claimed by another, or no such delivery.
    assert not store.finish_delivery(event.event_id, "w1", DeliveryState.DELIVERED, T0)
    store.claim_deliveries("w1", T0, T0 + LEASE, 1)
    assert not store.finish_delivery(event.event_id, "w2", DeliveryState.DELIVERED, T0)
    assert not store.finish_delivery(uuid.uuid4(), "w1", DeliveryState.DELIVERED, T0)
    assert store.owed_delivery(event.event_id) == owed(event)


def test_a_retry_needs_its_time_and_writes_nothing_without(store: Store) -> None:
    event = new_event()
    store.record_alert_events([event])
    store.claim_deliveries("w1", T0, T0 + LEASE, 1)
    with pytest.raises(ValueError, match="next attempt"):
        store.finish_delivery(event.event_id, "w1", DeliveryState.PENDING, T0, error="timeout")
    assert store.owed_delivery(event.event_id) == owed(event)
    assert store.finish_delivery(event.event_id, "w1", DeliveryState.DELIVERED, T0)


def test_abandoning_fails_a_subscriptions_pending_deliveries(store: Store) -> None:
    leased, waiting, done = new_event(), new_event(), new_event()
    others = new_event(subscription_id=OTHER_SUBSCRIPTION)
    store.record_alert_events([leased, waiting, done, others])
    claimed = store.claim_deliveries("w1", T0, T0 + LEASE, 10)
    assert {d.event_id for d in claimed} == {e.event_id for e in (leased, waiting, done, others)}
    assert store.finish_delivery(done.event_id, "w1", DeliveryState.DELIVERED, T0)
    assert store.finish_delivery(
        waiting.event_id,
        "w1",
        DeliveryState.PENDING,
        T0,
        next_attempt_at=T0 + timedelta(hours=1),
        error="timeout",
    )
    at = T0 + timedelta(seconds=30)
    assert store.abandon_deliveries(SUBSCRIPTION, at, "subscription deleted") == 2
    failed, reason = DeliveryState.FAILED, "subscription deleted"
    assert store.owed_delivery(leased.event_id) == owed(leased, state=failed, last_error=reason)
    assert store.owed_delivery(waiting.event_id) == owed(
        waiting,
        attempts=1,
        next_attempt_at=T0 + timedelta(hours=1),
        state=failed,
        last_error=reason,
    )
    assert store.owed_delivery(done.event_id) == owed(
        done, attempts=1, state=DeliveryState.DELIVERED
    )
    assert store.owed_delivery(others.event_id) == owed(others)
    # The worker holding one comes back: it is no longer pending.
    assert not store.finish_delivery(leased.event_id, "w1", DeliveryState.DELIVERED, at)
    far = T0 + timedelta(days=1)
    assert store.claim_deliveries("w2", far, far + LEASE, 10) == [owed(others)]
    assert store.abandon_deliveries(SUBSCRIPTION, at, "again") == 0


# -- retention -----------------------------------------------------------------------------------


DAY = timedelta(days=1)


def test_pruning_deletes_old_entries_and_finished_deliveries_but_never_an_owed_one(
    store: Store,
) -> None:
    delivered, failed, owed_old, unsent = (new_event(at=T0 + i * TICK) for i in range(4))
    recent = new_event(at=T0 + 2 * DAY)
    store.record_alert_events([delivered, failed, owed_old, unsent, recent])
    assert len(store.claim_deliveries("w1", T0 + DAY, T0 + DAY + LEASE, 2)) == 2
    assert store.finish_delivery(delivered.event_id, "w1", DeliveryState.DELIVERED, T0 + DAY)
    assert store.finish_delivery(failed.event_id, "w1", DeliveryState.FAILED, T0 + DAY)
    old_unsent = new_event(at=T0 + 5 * TICK, url=None)  # feed only
    store.record_alert_events([old_unsent])
    # The feed entries before the cutoff (five of them) and the two deliveries no longer owed.
    assert store.prune_alert_events(T0 + DAY, 100) == 5 + 2
    assert [e.event_id for e in store.alert_feed("alice", 0, 10)] == [recent.event_id]
    assert store.owed_delivery(delivered.event_id) is None
    assert store.owed_delivery(failed.event_id) is None
    assert store.owed_delivery(owed_old.event_id) == owed(owed_old)  # still owed: kept
    assert store.owed_delivery(unsent.event_id) == owed(unsent)
    assert store.owed_delivery(recent.event_id) == owed(recent)
    assert not store.alert_event_recorded(delivered.event_id)  # gone with its entry
    assert store.alert_event_recorded(recent.event_id)
    assert store.prune_alert_events(T0 + DAY, 100) == 0


def test_pruning_takes_the_oldest_first_a_batch_at_a_time(store: Store) -> None:
    events = [new_event(at=T0 + i * TICK, url=None) for i in range(5)]
    store.record_alert_events(events[::-1])  # recorded newest first: cursors do not say age
    assert store.prune_alert_events(T0 + DAY, 2) == 2
    kept = {e.event_id for e in store.alert_feed("alice", 0, 10)}
    assert kept == {e.event_id for e in events[2:]}
    assert store.prune_alert_events(T0 + DAY, 0) == 0
    assert store.prune_alert_events(T0 + DAY, 10) == 3
    assert store.alert_feed("alice", 0, 10) == []


def test_a_pruned_feed_pages_on_from_the_oldest_kept_and_never_gives_a_cursor_again(
    store: Store,
) -> None:
    old = [new_event(at=T0, url=None) for _ in range(3)]
    new = [new_event(at=T0 + 2 * DAY, url=None) for _ in range(3)]
    store.record_alert_events(old + new)
    assert store.prune_alert_events(T0 + DAY, 100) == 3
    assert store.alert_feed("alice", 0, 2) == [entry(new[0], 4), entry(new[1], 5)]
    assert store.alert_feed("alice", 5, 2) == [entry(new[2], 6)]
    later = new_event(at=T0 + 3 * DAY, url=None)
    store.record_alert_events([later])
    assert store.alert_feed("alice", 6, 10) == [entry(later, 7)]


# -- concurrency: threads, and on the shared stores their own connections -----------------------


def test_the_feed_pages_without_gaps_under_concurrent_recorders(
    stores: Callable[[], Store],
) -> None:
    """Recorders, each with its own connections, add one owner's events (in batches, some in
    a unit of work with other writes) while a reader pages the feed: every page continues
    exactly where the last ended, so the reader never steps over a cursor that a slower
    recorder commits later, and at the end it has read every event once."""
    recorders, batches, per_batch = 4, 12, 3
    writers = [stores() for _ in range(recorders)]
    reader = stores()
    done = threading.Event()
    written: list[uuid.UUID] = []
    read: list[FeedEntry] = []
    lock = threading.Lock()

    def record(index: int) -> None:
        store = writers[index]
        for batch in range(batches):
            events = [new_event(url=None if i % 2 else URL) for i in range(per_batch)]
            events.append(new_event("bob"))  # another owner's, interleaved
            if batch % 2:
                with store.transaction() as work:
                    work.record_alert_events(events)
                    work.hit(f"outbox-test:{index}", batch)  # other work in the unit
            else:
                store.record_alert_events(events)
            with lock:
                written.extend(e.event_id for e in events if e.owner == "alice")

    def page() -> None:
        after = 0
        while True:
            finished = done.is_set()  # read before the page: a last page after it ends
            entries = reader.alert_feed("alice", after, 5)
            cursors = [e.cursor for e in entries]
            # A gap here is a cursor the reader stepped over, to be found below later.
            assert cursors == list(range(after + 1, after + 1 + len(entries))), (after, cursors)
            read.extend(entries)
            if entries:
                after = cursors[-1]
            elif finished:
                return

    def recorders_then_done() -> None:
        try:
            run_together([functools.partial(record, i) for i in range(recorders)])
        finally:
            done.set()

    run_together([recorders_then_done, page])
    assert [e.cursor for e in read] == list(range(1, len(written) + 1))
    assert Counter(e.event_id for e in read) == Counter(written)
    assert [e.cursor for e in reader.alert_feed("bob", 0, 1000)] == list(
        range(1, recorders * batches + 1)
    )


def test_concurrent_recordings_of_the_same_events_record_each_once(
    stores: Callable[[], Store],
) -> None:
    """Workers retrying one evaluation each record the same events: every event is recorded
    by exactly one of them, once in the feed, with one delivery."""
    workers, rounds = 4, 6
    connections = [stores() for _ in range(workers)]
    reader = stores()
    recorded: Counter[uuid.UUID] = Counter()
    lock = threading.Lock()
    every: list[NewEvent] = []
    for _ in range(rounds):
        events = [new_event(), new_event("bob"), new_event(url=None)]
        every.extend(events)

        def record(index: int, events: list[NewEvent] = events) -> None:
            # Each in its own order: recordings of several owners must not deadlock.
            mine = events if index % 2 else list(reversed(events))
            newly = connections[index].record_alert_events(mine)
            with lock:
                recorded.update(newly)

        run_together([functools.partial(record, i) for i in range(workers)])
    assert recorded == Counter(e.event_id for e in every)
    alice = reader.alert_feed("alice", 0, 1000)
    assert [e.cursor for e in alice] == list(range(1, 2 * rounds + 1))
    assert {e.event_id for e in alice} == {e.event_id for e in every if e.owner == "alice"}
    hooked = [e for e in every if e.url is not None]
    assert all(reader.owed_delivery(e.event_id) == owed(e) for e in hooked)


def test_concurrent_claimants_never_share_a_delivery(stores: Callable[[], Store]) -> None:
    claimants, deliveries = 6, 60
    connections = [stores() for _ in range(claimants)]
    events = [new_event(at=T0 + timedelta(microseconds=i % 7)) for i in range(deliveries)]
    connections[0].record_alert_events(events)
    claimed: dict[str, list[uuid.UUID]] = {}

    def claim(index: int) -> None:
        name = f"w{index}"
        mine = claimed.setdefault(name, [])
        now = T0 + timedelta(seconds=1)  # every one due
        while batch := connections[index].claim_deliveries(name, now, now + LEASE, 3):
            mine.extend(ids(batch))
            for delivery in batch:
                assert connections[index].finish_delivery(
                    delivery.event_id, name, DeliveryState.DELIVERED, now
                )

    run_together([functools.partial(claim, i) for i in range(claimants)])
    every = [event_id for mine in claimed.values() for event_id in mine]
    assert Counter(every) == Counter(ids_of(events))  # each claimed once, by one claimant
    for event in events:
        delivered = connections[0].owed_delivery(event.event_id)
        assert delivered is not None
        assert delivered.attempts == 1
        assert delivered.state is DeliveryState.DELIVERED


# -- upgrades -----------------------------------------------------------------------------------


def test_a_sqlite_database_from_before_the_outbox_gets_it_empty(tmp_path: Path) -> None:
    path = tmp_path / "older.db"
    with sqlite3.connect(path) as conn:
        sqlite_utils_migrations().apply(Database(conn), stop_before="m014_alert_outbox")
    conn.close()
    store = SqliteStore(path)
    try:
        assert store.schema_is_current()
        assert store.alert_feed("alice", 0, 10) == []
        event = new_event()
        assert store.record_alert_events([event]) == [event.event_id]
        assert store.alert_feed("alice", 0, 10) == [entry(event, 1)]
        assert store.claim_deliveries("w1", T0, T0 + LEASE, 10) == [owed(event)]
    finally:
        store.close()


def test_a_postgres_database_from_before_the_outbox_gets_it_empty(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    version = next(m[0] for m in MIGRATIONS if m[1] == "alert feed and outbox")
    before_outbox = [m for m in MIGRATIONS if m[0] < version]
    with monkeypatch.context() as before:
        before.setattr("cleanair_storage.postgres.migrations.MIGRATIONS", tuple(before_outbox))
        with psycopg.connect(postgres_url) as conn:
            migrate(conn)
    store = PostgresStore(postgres_url)
    try:
        assert store.schema_is_current()
        assert store.alert_feed("alice", 0, 10) == []
        event = new_event()
        assert store.record_alert_events([event]) == [event.event_id]
        assert store.alert_feed("alice", 0, 10) == [entry(event, 1)]
        assert store.claim_deliveries("w1", T0, T0 + LEASE, 10) == [owed(event)]
    finally:
        store.close()


def test_a_sqlite_database_from_before_the_retention_gets_its_indexes(tmp_path: Path) -> None:
    path = tmp_path / "before.db"
    with sqlite3.connect(path) as conn:
        sqlite_utils_migrations().apply(Database(conn), stop_before="m016_alert_retention")
    store = SqliteStore(path)
    try:
        old = new_event(at=T0, url=None)
        store.record_alert_events([old])
        assert store.prune_alert_events(T0 + DAY, 10) == 1
    finally:
        store.close()
    with sqlite3.connect(path) as conn:
        # Each batch walks its index by age: it reads only what it deletes.
        for statement, index in (
            (_PRUNE_FEED, "alert_feed_recorded"),
            (_PRUNE_DELIVERIES, "alert_deliveries_finished"),
        ):
            plan = conn.execute(f"EXPLAIN QUERY PLAN {statement}", (0.0, 10)).fetchall()
            assert any(index in str(row[-1]) for row in plan), plan


def test_a_postgres_database_from_before_the_retention_gets_its_indexes(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    version = next(m[0] for m in MIGRATIONS if m[1] == "alert retention")
    with monkeypatch.context() as before:
        before.setattr(
            "cleanair_storage.postgres.migrations.MIGRATIONS",
            tuple(m for m in MIGRATIONS if m[0] < version),
        )
        with psycopg.connect(postgres_url) as conn:
            migrate(conn)
    store = PostgresStore(postgres_url)
    try:
        assert store.schema_is_current()
        store.record_alert_events([new_event(at=T0, url=None)])
        assert store.prune_alert_events(T0 + DAY, 10) == 1
    finally:
        store.close()
    with psycopg.connect(postgres_url) as conn:
        indexes = {
            row[0]
            for row in conn.execute(
                "SELECT indexname FROM pg_indexes WHERE tablename LIKE 'alert_%%'"
            )
        }
    assert {"alert_feed_recorded", "alert_deliveries_finished"} <= indexes


# -- never waiting on the event loop ------------------------------------------------------------


class _HandedOver(Exception):
    """The work was handed to the fallback offload (a worker thread, in the server)."""


async def _hand_over(work: Callable[[], T], /) -> T:
    raise _HandedOver


def test_told_not_to_wait_a_busy_sqlite_store_hands_every_write_over(tmp_path: Path) -> None:
    """SQLite store calls may run on the event loop (`here_unless_blocked`): an outbox write
    finding the database locked by another process must not wait there."""
    path = tmp_path / "busy.db"
    store = SqliteStore(path, busy_timeout=60)
    event = new_event()
    store.record_alert_events([event])
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # as another process writing
    here = here_unless_blocked(_hand_over)
    writes: list[Callable[[], object]] = [
        lambda: store.record_alert_events([new_event()]),
        lambda: store.claim_deliveries("w1", T0, T0 + LEASE, 10),
        lambda: store.finish_delivery(event.event_id, "w1", DeliveryState.DELIVERED, T0),
        lambda: store.abandon_deliveries(SUBSCRIPTION, T0, "disabled"),
    ]
    try:
        for write in writes:
            with pytest.raises(_HandedOver):
                asyncio.run(here(write))
        # Reads do not wait for a writer (WAL): the feed answers on the event loop.
        assert asyncio.run(here(lambda: store.alert_feed("alice", 0, 10))) == [entry(event, 1)]
    finally:
        other.execute("ROLLBACK")
        other.close()
    try:
        assert store.alert_feed("alice", 0, 10) == [entry(event, 1)]
        assert store.owed_delivery(event.event_id) == owed(event)
    finally:
        store.close()


# -- every adapter agrees with a model ----------------------------------------------------------

EVENT_IDS = [uuid.UUID(int=(0x5B7C << 112) | i) for i in range(10)]
OWNERS = ("alice", "bob")
SUBSCRIPTIONS = (SUBSCRIPTION, OTHER_SUBSCRIPTION)
CLAIMANTS = ("w1", "w2")


@attrs.define
class ModelDelivery:
    """The test's own record of a delivery and its lease."""

    owed: OwedDelivery
    claimant: str | None = None
    lease_until: datetime | None = None


class AlertOutboxMachine(RuleBasedStateMachine):
    """Each rule runs on the in-memory and a durable adapter, which must agree with each
    other and with a plain model. An event's owner, subscription and URL follow from its id,
    as an event id names its subscription."""

    @staticmethod
    def open_durable(directory: Path) -> Store:
        """The durable adapter checked against memory and the model (SQLite here)."""
        return SqliteStore(directory / "outbox.db")

    def __init__(self) -> None:
        super().__init__()
        self.now = T0
        self.memory = MemoryStore()
        self.directory = Path(tempfile.mkdtemp(prefix="cleanair-outbox-"))
        self.durable = self.open_durable(self.directory)
        self.feeds: dict[str, list[FeedEntry]] = {owner: [] for owner in OWNERS}
        self.ends = dict.fromkeys(OWNERS, 0)  # the last cursor given: pruning keeps it
        self.deliveries: dict[uuid.UUID, ModelDelivery] = {}

    def teardown(self) -> None:
        self.memory.close()
        self.durable.close()
        shutil.rmtree(self.directory, ignore_errors=True)

    def both(self) -> tuple[Store, Store]:
        return self.memory, self.durable

    @rule(seconds=st.integers(min_value=0, max_value=400))
    def wait(self, seconds: int) -> None:
        self.now += timedelta(seconds=seconds)

    @rule(chosen=st.lists(st.integers(min_value=0, max_value=len(EVENT_IDS) - 1), max_size=4))
    def record(self, chosen: list[int]) -> None:
        events = [
            NewEvent(
                event_id=EVENT_IDS[i],
                owner=OWNERS[i % 2],
                subscription_id=SUBSCRIPTIONS[i % 3 % 2],
                payload=f'{{"n": {i}, "at": "{self.now.isoformat()}"}}',
                created_at=self.now,
                url=None if i % 4 == 3 else f"https://hooks.example.com/{i}",
            )
            for i in chosen
        ]
        recorded = [store.record_alert_events(events) for store in self.both()]
        expected: list[uuid.UUID] = []
        recorded_before = {e.event_id for feed in self.feeds.values() for e in feed}
        for event in events:
            if event.event_id in recorded_before or event.event_id in expected:
                continue
            expected.append(event.event_id)
            self.ends[event.owner] += 1
            self.feeds[event.owner].append(
                FeedEntry(
                    cursor=self.ends[event.owner],
                    event_id=event.event_id,
                    subscription_id=event.subscription_id,
                    payload=event.payload,
                    created_at=event.created_at,
                )
            )
            # Told again once its entry was pruned: the delivery it had stays.
            if event.url is not None and event.event_id not in self.deliveries:
                self.deliveries[event.event_id] = ModelDelivery(
                    OwedDelivery(
                        event_id=event.event_id,
                        subscription_id=event.subscription_id,
                        owner=event.owner,
                        url=event.url,
                        payload=event.payload,
                        created_at=event.created_at,
                        attempts=0,
                        next_attempt_at=event.created_at,
                    )
                )
        assert recorded == [expected, expected]

    @rule(
        owner=st.sampled_from(OWNERS),
        after=st.integers(min_value=-1, max_value=8),
        limit=st.integers(min_value=0, max_value=4),
    )
    def page(self, owner: str, after: int, limit: int) -> None:
        expected = [e for e in self.feeds[owner] if e.cursor > after][:limit]
        for store in self.both():
            assert store.alert_feed(owner, after, limit) == expected

    @rule(
        claimant=st.sampled_from(CLAIMANTS),
        lease_s=st.integers(min_value=1, max_value=600),
        limit=st.integers(min_value=0, max_value=4),
    )
    def claim(self, claimant: str, lease_s: int, limit: int) -> None:
        until = self.now + timedelta(seconds=lease_s)
        due = sorted(
            (
                d
                for d in self.deliveries.values()
                if d.owed.state is DeliveryState.PENDING
                and d.owed.next_attempt_at <= self.now
                and (d.lease_until is None or d.lease_until <= self.now)
            ),
            key=lambda d: (d.owed.next_attempt_at, str(d.owed.event_id)),
        )[:limit]
        for delivery in due:
            delivery.claimant, delivery.lease_until = claimant, until
        expected = [d.owed for d in due]
        for store in self.both():
            assert store.claim_deliveries(claimant, self.now, until, limit) == expected

    @rule(
        index=st.integers(min_value=0, max_value=len(EVENT_IDS) - 1),
        claimant=st.sampled_from(CLAIMANTS),
        state=st.sampled_from(DeliveryState),
        retry_s=st.integers(min_value=0, max_value=900),
        error=st.sampled_from([None, "status 503", "timeout"]),
    )
    def finish(
        self, index: int, claimant: str, state: DeliveryState, retry_s: int, error: str | None
    ) -> None:
        event_id = EVENT_IDS[index]
        next_attempt_at: datetime | None = self.now + timedelta(seconds=retry_s)
        if state is not DeliveryState.PENDING and retry_s % 2:
            next_attempt_at = None  # optional when it ends the delivery
        delivery = self.deliveries.get(event_id)
        expected = (
            delivery is not None
            and delivery.owed.state is DeliveryState.PENDING
            and delivery.claimant == claimant
        )
        if expected and delivery is not None:
            delivery.owed = attrs.evolve(
                delivery.owed,
                state=state,
                attempts=delivery.owed.attempts + 1,
                next_attempt_at=next_attempt_at or delivery.owed.next_attempt_at,
                last_error=error,
            )
            delivery.claimant = delivery.lease_until = None
        for store in self.both():
            finished = store.finish_delivery(
                event_id, claimant, state, self.now, next_attempt_at=next_attempt_at, error=error
            )
            assert finished is expected

    @rule(subscription_id=st.sampled_from(SUBSCRIPTIONS))
    def abandon(self, subscription_id: uuid.UUID) -> None:
        pending = [
            d
            for d in self.deliveries.values()
            if d.owed.subscription_id == subscription_id and d.owed.state is DeliveryState.PENDING
        ]
        for delivery in pending:
            delivery.owed = attrs.evolve(
                delivery.owed, state=DeliveryState.FAILED, last_error="disabled"
            )
            delivery.claimant = delivery.lease_until = None
        for store in self.both():
            assert store.abandon_deliveries(subscription_id, self.now, "disabled") == len(pending)

    @rule(
        back_s=st.integers(min_value=0, max_value=600),
        limit=st.integers(min_value=0, max_value=4),
    )
    def prune(self, back_s: int, limit: int) -> None:
        before = self.now - timedelta(seconds=back_s)
        old = sorted(
            (e.created_at, owner, e.cursor)
            for owner, feed in self.feeds.items()
            for e in feed
            if e.created_at < before
        )[:limit]
        for _, owner, cursor in old:
            self.feeds[owner] = [e for e in self.feeds[owner] if e.cursor != cursor]
        done = sorted(
            (d.owed.created_at, str(d.owed.event_id))
            for d in self.deliveries.values()
            if d.owed.state is not DeliveryState.PENDING and d.owed.created_at < before
        )[:limit]
        for _, event_id in done:
            del self.deliveries[uuid.UUID(event_id)]
        for store in self.both():
            assert store.prune_alert_events(before, limit) == len(old) + len(done)

    @invariant()
    def every_delivery_agrees(self) -> None:
        for event_id in EVENT_IDS:
            delivery = self.deliveries.get(event_id)
            expected = None if delivery is None else delivery.owed
            for store in self.both():
                assert store.owed_delivery(event_id) == expected


AlertOutboxMachine.TestCase.settings = settings(
    max_examples=50, stateful_step_count=30, deadline=None
)
TestAlertOutboxOnSqlite = AlertOutboxMachine.TestCase


class PostgresAlertOutboxMachine(AlertOutboxMachine):
    """The same machine with PostgreSQL as the durable adapter (a fresh database each run)."""

    @staticmethod
    def open_durable(directory: Path) -> Store:
        return PostgresStore(shared_server().database())


PostgresAlertOutboxMachine.TestCase.settings = settings(
    max_examples=25, stateful_step_count=30, deadline=None
)
TestAlertOutboxOnPostgres = PostgresAlertOutboxMachine.TestCase

"""`EvaluationClaims` on every adapter (the `store` fixture runs each test on the memory, SQLite
and PostgreSQL stores): which subscriptions are due, the claim's order and limit, leases and
their takeover, the compare-and-set that finishes an evaluation, units of work, concurrent
claimants, upgrades of older databases, and a state machine holding SQLite (and PostgreSQL)
to the in-memory adapter."""

from __future__ import annotations

import functools
import shutil
import sqlite3
import tempfile
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from pathlib import Path

import attrs
import psycopg
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule
from sqlite_utils import Database

from cleanair_core.alerts.rounds import ClaimedSubscription, EvaluationFinish, subscription_cell
from cleanair_core.alerts.subscriptions import Place, StoredState, Subscription, Trip
from cleanair_core.errors import DuplicateEntry
from cleanair_core.geo import Point
from cleanair_core.ports import Store
from cleanair_core.routes.network import PlanActivityType
from cleanair_storage.memory import MemoryStore
from cleanair_storage.migrations import sqlite_utils_migrations
from cleanair_storage.postgres import PostgresStore
from cleanair_storage.postgres.migrations import migrate
from cleanair_storage.postgres.schema import MIGRATIONS
from cleanair_storage.sqlite import SqliteStore
from cleanair_storage.sqlite.database import timestamp
from cleanair_storage.subscription_rows import (
    COLUMN_COUNT,
    SUBSCRIPTION_COLUMNS,
    subscription_row,
)
from support.concurrency import run_together
from support.postgres import shared_server
from support.subscriptions import T0, make_subscription

LEASE = timedelta(minutes=5)
HOUR = timedelta(hours=1)
TICK = timedelta(microseconds=1)
FRESH = StoredState(0, None)


def at_place(
    point: Point, *, created_at: datetime = T0, subscription_id: uuid.UUID | None = None
) -> Subscription:
    return attrs.evolve(
        make_subscription(created_at=created_at, subscription_id=subscription_id),
        target=Place(point),
    )


def claimed(subscription: Subscription, state: StoredState = FRESH) -> ClaimedSubscription:
    return ClaimedSubscription(subscription, state)


def ids(claims: Sequence[ClaimedSubscription]) -> list[uuid.UUID]:
    return [claim.subscription.id for claim in claims]


def claim(store: Store, claimant: str, now: datetime, limit: int = 100) -> list[uuid.UUID]:
    return ids(store.claim_due_subscriptions(claimant, now, now + LEASE, limit))


def finish_one(
    store: Store,
    subscription_id: uuid.UUID,
    claimant: str,
    version: int,
    blob: str | None,
    next_at: datetime,
) -> bool:
    """One outcome through the batch call: whether it was stored."""
    finish = EvaluationFinish(subscription_id, version, blob, next_at)
    stored = store.finish_evaluations(claimant, [finish])
    assert stored <= {subscription_id}
    return bool(stored)


# -- what is due --------------------------------------------------------------------------------


def test_a_new_subscription_is_due_at_once_with_no_state(store: Store) -> None:
    subscription = make_subscription()
    store.add_subscription(subscription)
    assert store.claim_due_subscriptions("w1", T0 - TICK, T0 + LEASE, 10) == []
    assert store.claim_due_subscriptions("w1", T0, T0 + LEASE, 10) == [claimed(subscription)]


def test_a_finished_subscription_is_due_again_at_its_next_evaluation(store: Store) -> None:
    subscription = make_subscription()
    store.add_subscription(subscription)
    assert claim(store, "w1", T0) == [subscription.id]
    assert finish_one(store, subscription.id, "w1", 0, '{"n": 1}', T0 + HOUR)
    assert claim(store, "w2", T0 + HOUR - TICK) == []
    again = store.claim_due_subscriptions("w2", T0 + HOUR, T0 + HOUR + LEASE, 10)
    assert again == [claimed(subscription, StoredState(1, '{"n": 1}'))]


def test_a_disabled_subscription_is_never_claimed(store: Store) -> None:
    active, disabled = make_subscription(), make_subscription()
    store.add_subscription(active)
    store.add_subscription(disabled)
    assert store.disable_subscription(disabled.id, "disabled by an operator", T0)
    assert claim(store, "w1", T0 + 24 * HOUR) == [active.id]
    assert finish_one(store, active.id, "w1", 0, None, T0)
    assert claim(store, "w1", T0 + 48 * HOUR) == [active.id]


def test_claims_come_by_due_time_then_cell_then_id(store: Store) -> None:
    # Cells compare as text, as subscription_cell writes them and every adapter orders them:
    # "-100:500" < "4886:1000" < "4886:235".
    paris = Point(48.8566, 2.3522)
    south = at_place(Point(-1.0, 5.0))
    east = at_place(Point(48.8566, 10.0))
    in_paris = sorted((at_place(paris) for _ in range(3)), key=lambda s: str(s.id))
    trip = attrs.evolve(
        make_subscription(),
        target=Trip(
            start=Point(-1.0, 5.0),
            end=Point(-1.01, 5.01),
            activity=PlanActivityType.WALKING,
            departure=T0.time().replace(tzinfo=None, microsecond=0),
            days=frozenset({1, 2}),
        ),
    )
    earliest = at_place(paris, created_at=T0 - timedelta(seconds=1))
    assert [subscription_cell(s) for s in (south, east, in_paris[0], trip)] == [
        "-100:500",
        "4886:1000",
        "4886:235",
        "-100:500",  # a trip is in its start's cell
    ]
    every = [in_paris[2], east, earliest, trip, in_paris[0], south, in_paris[1]]
    for subscription in every:
        store.add_subscription(subscription)
    at_t0 = [earliest, *sorted([south, trip], key=lambda s: str(s.id)), east, *in_paris]
    assert claim(store, "w1", T0, limit=3) == [s.id for s in at_t0[:3]]
    assert claim(store, "w2", T0, limit=0) == []
    assert claim(store, "w2", T0, limit=-1) == []
    assert claim(store, "w2", T0, limit=3) == [s.id for s in at_t0[3:6]]
    assert claim(store, "w3", T0, limit=3) == [s.id for s in at_t0[6:]]


def test_a_claim_returns_each_subscription_with_its_own_state(store: Store) -> None:
    first, second = make_subscription(), make_subscription("bob")
    store.add_subscription(first)
    store.add_subscription(second)
    assert store.save_subscription_state(first.id, 0, '{"first": 1}')
    assert store.save_subscription_state(first.id, 1, '{"first": 2}')
    got = store.claim_due_subscriptions("w1", T0, T0 + LEASE, 10)
    expected = [
        claimed(first, StoredState(2, '{"first": 2}')),
        claimed(second),
    ]
    assert sorted(got, key=lambda c: str(c.subscription.id)) == sorted(
        expected, key=lambda c: str(c.subscription.id)
    )


# -- leases and the compare-and-set -------------------------------------------------------------


def test_a_lease_that_ended_is_taken_over_and_the_old_claimant_is_refused(store: Store) -> None:
    subscription = make_subscription()
    store.add_subscription(subscription)
    assert claim(store, "w1", T0) == [subscription.id]
    assert claim(store, "w2", T0 + LEASE - TICK) == []
    # Ended at T0 + LEASE exactly: another claimant takes it over.
    assert claim(store, "w2", T0 + LEASE) == [subscription.id]
    # The first claimant, slow, comes back with its outcome: refused, nothing written.
    assert not finish_one(store, subscription.id, "w1", 0, '{"w1": 1}', T0 + HOUR)
    assert store.load_subscription_state(subscription.id) == FRESH
    assert finish_one(store, subscription.id, "w2", 0, '{"w2": 1}', T0 + HOUR)
    assert store.load_subscription_state(subscription.id) == StoredState(1, '{"w2": 1}')
    # Finished: the lease is gone, for the one who took it over too.
    assert not finish_one(store, subscription.id, "w2", 1, '{"w2": 2}', T0 + HOUR)


def test_the_claimant_may_finish_after_its_lease_ended_if_nobody_took_over(
    store: Store,
) -> None:
    subscription = make_subscription()
    store.add_subscription(subscription)
    assert claim(store, "w1", T0) == [subscription.id]
    assert finish_one(store, subscription.id, "w1", 0, "{}", T0 + HOUR)
    assert claim(store, "w2", T0 + HOUR) == [subscription.id]


def test_a_finish_from_a_stale_version_is_refused_and_writes_nothing(store: Store) -> None:
    subscription = make_subscription()
    store.add_subscription(subscription)
    assert claim(store, "w1", T0) == [subscription.id]
    # Someone saved a state since the claim read version 0.
    assert store.save_subscription_state(subscription.id, 0, '{"other": 1}')
    assert not finish_one(store, subscription.id, "w1", 0, '{"w1": 1}', T0 + HOUR)
    assert store.load_subscription_state(subscription.id) == StoredState(1, '{"other": 1}')
    # Nor was the lease released or the due time moved: still w1's until it ends, then due.
    assert claim(store, "w2", T0 + LEASE - TICK) == []
    assert store.claim_due_subscriptions("w2", T0 + LEASE, T0 + 2 * LEASE, 10) == [
        claimed(subscription, StoredState(1, '{"other": 1}'))
    ]


def test_a_finish_needs_a_claim(store: Store) -> None:
    subscription = make_subscription()
    store.add_subscription(subscription)
    assert not finish_one(store, subscription.id, "w1", 0, "{}", T0 + HOUR)
    assert not finish_one(store, uuid.uuid4(), "w1", 0, "{}", T0 + HOUR)
    assert store.load_subscription_state(subscription.id) == FRESH
    assert claim(store, "w1", T0) == [subscription.id]  # still due: nothing was written


def test_no_new_state_keeps_the_state_and_its_version(store: Store) -> None:
    subscription = make_subscription()
    store.add_subscription(subscription)
    assert claim(store, "w1", T0) == [subscription.id]
    assert finish_one(store, subscription.id, "w1", 0, None, T0 + HOUR)
    assert store.load_subscription_state(subscription.id) == FRESH
    assert claim(store, "w1", T0 + HOUR) == [subscription.id]
    assert finish_one(store, subscription.id, "w1", 0, '{"n": 1}', T0 + 2 * HOUR)
    assert claim(store, "w1", T0 + 2 * HOUR) == [subscription.id]
    assert finish_one(store, subscription.id, "w1", 1, None, T0 + 3 * HOUR)
    assert store.load_subscription_state(subscription.id) == StoredState(1, '{"n": 1}')
    assert claim(store, "w1", T0 + 3 * HOUR - TICK) == []  # the due time did move


def test_a_batch_stores_the_outcomes_whose_claim_and_version_hold_and_only_those(
    store: Store,
) -> None:
    theirs = make_subscription("user0", created_at=T0 - HOUR)  # due first: w2 claims it
    mine, stale, gone, unclaimed = (make_subscription(f"user{i}") for i in range(1, 5))
    for subscription in (theirs, mine, stale, gone):
        store.add_subscription(subscription)
    assert claim(store, "w2", T0, limit=1) == [theirs.id]
    assert sorted(claim(store, "w1", T0)) == sorted([mine.id, stale.id, gone.id])
    assert store.delete_subscription(gone.id, gone.owner)
    finishes = [
        EvaluationFinish(mine.id, 0, '{"n": 1}', T0 + HOUR),
        EvaluationFinish(stale.id, 1, '{"n": 1}', T0 + HOUR),  # its version is 0
        EvaluationFinish(theirs.id, 0, '{"n": 1}', T0 + HOUR),
        EvaluationFinish(gone.id, 0, "{}", T0 + HOUR),
        EvaluationFinish(unclaimed.id, 0, "{}", T0 + HOUR),
    ]
    assert store.finish_evaluations("w1", finishes) == {mine.id}
    assert store.load_subscription_state(mine.id) == StoredState(1, '{"n": 1}')
    assert store.load_subscription_state(stale.id) == FRESH
    assert store.load_subscription_state(theirs.id) == FRESH
    # The refused ones keep their leases: w2 still finishes its own.
    assert finish_one(store, theirs.id, "w2", 0, None, T0 + HOUR)
    assert claim(store, "w3", T0 + LEASE) == [stale.id]  # only w1's unfinished one is due


def test_a_batch_larger_than_one_statement_stores_every_outcome(store: Store) -> None:
    count = 1_100  # over FINISH_ROWS, SQLite's outcomes per statement, twice
    every = [make_subscription(f"user{i}") for i in range(count)]
    with store.transaction() as work:
        for subscription in every:
            work.add_subscription(subscription)
    claimed = store.claim_due_subscriptions("w1", T0, T0 + LEASE, count)
    assert len(claimed) == count
    finishes = [
        EvaluationFinish(item.subscription.id, 0, f'{{"i": {i}}}', T0 + HOUR + i * TICK)
        for i, item in enumerate(claimed)
    ]
    assert store.finish_evaluations("w1", finishes) == {s.id for s in every}
    for i, item in enumerate(claimed[::97]):
        assert store.load_subscription_state(item.subscription.id) == StoredState(
            1, f'{{"i": {i * 97}}}'
        )
    assert store.finish_evaluations("w1", []) == frozenset()
    assert claim(store, "w2", T0 + HOUR - TICK) == []
    assert claim(store, "w2", T0 + HOUR + 2 * TICK) == ids(claimed[:3])


def test_deleting_a_subscription_removes_its_claim(store: Store) -> None:
    subscription = make_subscription()
    store.add_subscription(subscription)
    assert claim(store, "w1", T0) == [subscription.id]
    assert store.delete_subscription(subscription.id, "alice")
    assert not finish_one(store, subscription.id, "w1", 0, "{}", T0 + HOUR)
    assert claim(store, "w2", T0 + 24 * HOUR) == []
    # Its id, stored again, is a new subscription: due at once, nobody's lease on it.
    store.add_subscription(subscription)
    assert claim(store, "w2", T0) == [subscription.id]


# -- units of work ------------------------------------------------------------------------------


class _Undo(Exception):
    """Leaves a unit of work."""


def test_a_rolled_back_unit_of_work_undoes_a_finish(store: Store) -> None:
    subscription = make_subscription()
    store.add_subscription(subscription)
    assert claim(store, "w1", T0) == [subscription.id]

    def finish_then_fail() -> None:
        with store.transaction() as work:
            assert finish_one(work, subscription.id, "w1", 0, '{"n": 1}', T0 + HOUR)
            assert work.load_subscription_state(subscription.id) == StoredState(1, '{"n": 1}')
            raise _Undo

    with pytest.raises(_Undo):
        finish_then_fail()
    assert store.load_subscription_state(subscription.id) == FRESH
    assert claim(store, "w2", T0 + LEASE - TICK) == []  # the lease is w1's again
    assert finish_one(store, subscription.id, "w1", 0, '{"n": 1}', T0 + HOUR)
    assert store.load_subscription_state(subscription.id) == StoredState(1, '{"n": 1}')


def test_a_rolled_back_unit_of_work_undoes_a_claim(store: Store) -> None:
    subscription = make_subscription()
    store.add_subscription(subscription)

    def claim_then_fail() -> None:
        with store.transaction() as work:
            assert claim(work, "w1", T0) == [subscription.id]
            assert claim(work, "w2", T0) == []
            raise _Undo

    with pytest.raises(_Undo):
        claim_then_fail()
    assert claim(store, "w2", T0) == [subscription.id]
    assert not finish_one(store, subscription.id, "w1", 0, "{}", T0 + HOUR)


def test_a_finish_commits_with_the_rest_of_its_unit_of_work(store: Store) -> None:
    subscription, other = make_subscription(), make_subscription("bob")
    store.add_subscription(subscription)
    store.add_subscription(other)
    assert len(claim(store, "w1", T0)) == 2
    with store.transaction() as work:
        assert finish_one(work, subscription.id, "w1", 0, '{"n": 1}', T0 + HOUR)
        assert finish_one(work, other.id, "w1", 0, None, T0 + 2 * HOUR)
        assert work.disable_subscription(other.id, "disabled by an operator", T0)
    assert store.load_subscription_state(subscription.id) == StoredState(1, '{"n": 1}')
    assert claim(store, "w2", T0 + 5 * HOUR) == [subscription.id]


# -- concurrency: threads, and on the shared stores their own connections -----------------------


def test_concurrent_claimants_never_share_a_subscription(stores: Callable[[], Store]) -> None:
    claimants, count = 6, 60
    connections = [stores() for _ in range(claimants)]
    owners = [f"user{i}" for i in range(count // 10)]
    every = [
        at_place(Point(48.85 + (i % 4) / 100, 2.35), created_at=T0 + TICK * (i % 7))
        for i in range(count)
    ]
    for i, subscription in enumerate(every):
        connections[0].add_subscription(attrs.evolve(subscription, owner=owners[i % len(owners)]))
    claimed_by: dict[str, list[uuid.UUID]] = {}
    now = T0 + timedelta(seconds=1)  # every one due

    def work(index: int) -> None:
        name = f"w{index}"
        mine = claimed_by.setdefault(name, [])
        store = connections[index]
        while batch := store.claim_due_subscriptions(name, now, now + LEASE, 3):
            mine.extend(ids(batch))
            for item in batch:
                assert item.state == FRESH
                assert finish_one(store, item.subscription.id, name, 0, name, now + HOUR)

    run_together([functools.partial(work, i) for i in range(claimants)])
    taken = [subscription_id for mine in claimed_by.values() for subscription_id in mine]
    assert Counter(taken) == Counter(s.id for s in every)  # each claimed once, by one claimant
    for name, mine in claimed_by.items():
        for subscription_id in mine:
            assert connections[0].load_subscription_state(subscription_id) == StoredState(1, name)


def test_a_takeover_racing_the_old_claimants_finish_lets_one_of_them_win(
    stores: Callable[[], Store],
) -> None:
    """The first claimant finishes just as its lease ends and a second takes the
    subscription over: exactly one of them decides from version 0."""
    rounds = 12
    first, second = stores(), stores()
    subscriptions = [make_subscription(f"user{i}") for i in range(rounds)]
    for subscription in subscriptions:
        first.add_subscription(subscription)
    assert sorted(claim(first, "w1", T0)) == sorted(s.id for s in subscriptions)
    outcomes: dict[str, list[bool]] = {"w1": [], "w2": []}

    def late_finish() -> None:
        for subscription in subscriptions:
            outcomes["w1"].append(finish_one(first, subscription.id, "w1", 0, "w1", T0 + HOUR))

    def take_over() -> None:
        for _ in subscriptions:
            got = second.claim_due_subscriptions("w2", T0 + LEASE, T0 + 2 * LEASE, 1)
            won = bool(got) and finish_one(second, got[0].subscription.id, "w2", 0, "w2", T0 + HOUR)
            outcomes["w2"].append(won)

    run_together([late_finish, take_over])
    for subscription in subscriptions:
        state = first.load_subscription_state(subscription.id)
        assert state is not None
        assert state.version == 1  # one finish won; the other was refused
    assert sum(outcomes["w1"]) + sum(outcomes["w2"]) == rounds


# -- upgrades -----------------------------------------------------------------------------------

# Lat 0.125 is 12.5 hundredths: Python rounds it to 12 (half to even), SQL's round() to 13.
# A back-fill that computed the cell in SQL would put this subscription in another cell.
HALFWAY = Point(0.125, 2.3522)


def _older_subscriptions() -> list[Subscription]:
    return [
        at_place(HALFWAY, created_at=T0 + HOUR),
        at_place(Point(48.8566, 2.3522), created_at=T0),
        make_subscription(created_at=T0),
    ]


def _check_upgraded(store: Store, older: list[Subscription]) -> None:
    halfway, paris, other_paris = older
    # Each due at its creation.
    assert claim(store, "w1", T0 - TICK) == []
    in_paris = store.claim_due_subscriptions("w1", T0, T0 + 3 * HOUR, 10)  # leased past T0 + 1 h
    assert ids(in_paris) == sorted([paris.id, other_paris.id], key=str)
    assert claim(store, "w1", T0 + HOUR - TICK) == []
    assert claim(store, "w1", T0 + HOUR) == [halfway.id]
    assert finish_one(store, halfway.id, "w1", 0, None, T0 + HOUR)
    # Its back-filled cell is the one add_subscription writes: beside a new subscription at
    # the same place, and before the next cell ("12:900"), where SQL's "13:235" would not be.
    newer = at_place(HALFWAY, created_at=T0 + HOUR)
    between = at_place(Point(0.12, 9.0), created_at=T0 + HOUR)
    assert [subscription_cell(s) for s in (halfway, newer, between)] == [
        "12:235",
        "12:235",
        "12:900",
    ]
    store.add_subscription(newer)
    store.add_subscription(between)
    expected = [*sorted([halfway.id, newer.id], key=str), between.id]
    assert claim(store, "w2", T0 + HOUR) == expected


def test_a_sqlite_database_from_before_the_claims_gets_them(tmp_path: Path) -> None:
    path = tmp_path / "older.db"
    older = _older_subscriptions()
    with sqlite3.connect(path) as conn:
        sqlite_utils_migrations().apply(Database(conn), stop_before="m015_evaluation_claims")
        conn.executemany(
            f"INSERT INTO subscriptions ({SUBSCRIPTION_COLUMNS}) "
            f"VALUES ({', '.join(['?'] * COLUMN_COUNT)})",
            [subscription_row(s, timestamp) for s in older],
        )
    conn.close()
    store = SqliteStore(path)
    try:
        assert store.schema_is_current()
        _check_upgraded(store, older)
    finally:
        store.close()


def test_a_postgres_database_from_before_the_claims_gets_them(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    version = next(m[0] for m in MIGRATIONS if m[1] == "alert evaluation claims")
    older = _older_subscriptions()
    with monkeypatch.context() as before:
        before.setattr(
            "cleanair_storage.postgres.migrations.MIGRATIONS",
            tuple(m for m in MIGRATIONS if m[0] < version),
        )
        with psycopg.connect(postgres_url) as conn:
            migrate(conn)
            conn.cursor().executemany(
                f"INSERT INTO subscriptions ({SUBSCRIPTION_COLUMNS}) "
                f"VALUES ({', '.join(['%s'] * COLUMN_COUNT)})",
                [subscription_row(s, lambda at: at) for s in older],
            )
    store = PostgresStore(postgres_url)
    try:
        assert store.schema_is_current()
        _check_upgraded(store, older)
    finally:
        store.close()


# -- the durable adapters against the in-memory one ---------------------------------------------

SUBSCRIPTION_IDS = [uuid.UUID(int=(0x5B7C << 112) | i) for i in range(6)]
PLACES = (Point(48.8566, 2.3522), Point(48.8566, 10.0), Point(-1.0, 5.0))
CLAIMANTS = ("w1", "w2")


class EvaluationClaimsMachine(RuleBasedStateMachine):
    """Each rule runs on the in-memory and a durable adapter, which must agree: what is
    claimed, in which order, with which state, and which finishes are refused."""

    @staticmethod
    def open_durable(directory: Path) -> Store:
        """The durable adapter checked against memory (SQLite here)."""
        return SqliteStore(directory / "claims.db")

    def __init__(self) -> None:
        super().__init__()
        self.now = T0
        self.memory = MemoryStore()
        self.directory = Path(tempfile.mkdtemp(prefix="cleanair-claims-"))
        self.durable = self.open_durable(self.directory)
        self.versions = 0  # blobs are numbered, so every written state differs

    def teardown(self) -> None:
        self.memory.close()
        self.durable.close()
        shutil.rmtree(self.directory, ignore_errors=True)

    def both(self) -> tuple[Store, Store]:
        return self.memory, self.durable

    @rule(seconds=st.integers(min_value=0, max_value=900))
    def wait(self, seconds: int) -> None:
        self.now += timedelta(seconds=seconds)

    @rule(index=st.integers(min_value=0, max_value=len(SUBSCRIPTION_IDS) - 1))
    def add(self, index: int) -> None:
        subscription = at_place(
            PLACES[index % len(PLACES)],
            created_at=self.now - timedelta(seconds=index),
            subscription_id=SUBSCRIPTION_IDS[index],
        )
        outcomes = []
        for store in self.both():
            try:
                store.add_subscription(subscription)
                outcomes.append("added")
            except DuplicateEntry:
                outcomes.append("duplicate")
        assert outcomes[0] == outcomes[1]

    @rule(index=st.integers(min_value=0, max_value=len(SUBSCRIPTION_IDS) - 1))
    def delete(self, index: int) -> None:
        deleted = [
            store.delete_subscription(SUBSCRIPTION_IDS[index], "alice") for store in self.both()
        ]
        assert deleted[0] == deleted[1]

    @rule(index=st.integers(min_value=0, max_value=len(SUBSCRIPTION_IDS) - 1))
    def disable(self, index: int) -> None:
        done = [
            store.disable_subscription(SUBSCRIPTION_IDS[index], "disabled by an operator", self.now)
            for store in self.both()
        ]
        assert done[0] == done[1]

    @rule(
        claimant=st.sampled_from(CLAIMANTS),
        lease_s=st.integers(min_value=1, max_value=1800),
        limit=st.integers(min_value=0, max_value=4),
    )
    def claim(self, claimant: str, lease_s: int, limit: int) -> None:
        until = self.now + timedelta(seconds=lease_s)
        got = [
            store.claim_due_subscriptions(claimant, self.now, until, limit) for store in self.both()
        ]
        assert got[0] == got[1]

    @rule(
        index=st.integers(min_value=0, max_value=len(SUBSCRIPTION_IDS) - 1),
        claimant=st.sampled_from(CLAIMANTS),
        version_offset=st.sampled_from([0, 0, 0, -1, 1]),
        new_state=st.booleans(),
        next_s=st.integers(min_value=0, max_value=7200),
    )
    def finish(
        self, index: int, claimant: str, version_offset: int, new_state: bool, next_s: int
    ) -> None:
        subscription_id = SUBSCRIPTION_IDS[index]
        stored = self.memory.load_subscription_state(subscription_id)
        version = (0 if stored is None else stored.version) + version_offset
        self.versions += 1
        blob = f'{{"n": {self.versions}}}' if new_state else None
        next_at = self.now + timedelta(seconds=next_s)
        done = [
            finish_one(store, subscription_id, claimant, version, blob, next_at)
            for store in self.both()
        ]
        assert done[0] == done[1]

    @rule(
        indexes=st.lists(
            st.integers(min_value=0, max_value=len(SUBSCRIPTION_IDS) - 1),
            min_size=1,
            max_size=len(SUBSCRIPTION_IDS),
            unique=True,
        ),
        claimant=st.sampled_from(CLAIMANTS),
        version_offsets=st.lists(st.sampled_from([0, 0, 0, -1, 1]), min_size=8, max_size=8),
        new_state=st.booleans(),
    )
    def finish_many(
        self, indexes: list[int], claimant: str, version_offsets: list[int], new_state: bool
    ) -> None:
        finishes = []
        for n, index in enumerate(indexes):
            subscription_id = SUBSCRIPTION_IDS[index]
            stored = self.memory.load_subscription_state(subscription_id)
            version = (0 if stored is None else stored.version) + version_offsets[n % 8]
            self.versions += 1
            blob = f'{{"n": {self.versions}}}' if new_state else None
            finishes.append(
                EvaluationFinish(subscription_id, version, blob, self.now + n * HOUR / 8)
            )
        done = [store.finish_evaluations(claimant, finishes) for store in self.both()]
        assert done[0] == done[1]

    @rule(index=st.integers(min_value=0, max_value=len(SUBSCRIPTION_IDS) - 1))
    def save(self, index: int) -> None:
        subscription_id = SUBSCRIPTION_IDS[index]
        stored = self.memory.load_subscription_state(subscription_id)
        version = 0 if stored is None else stored.version
        self.versions += 1
        blob = f'{{"saved": {self.versions}}}'
        saved = [
            store.save_subscription_state(subscription_id, version, blob) for store in self.both()
        ]
        assert saved[0] == saved[1]

    @invariant()
    def every_state_agrees(self) -> None:
        for subscription_id in SUBSCRIPTION_IDS:
            states = [store.load_subscription_state(subscription_id) for store in self.both()]
            assert states[0] == states[1]


EvaluationClaimsMachine.TestCase.settings = settings(
    max_examples=50, stateful_step_count=30, deadline=None
)
TestEvaluationClaimsOnSqlite = EvaluationClaimsMachine.TestCase


class PostgresEvaluationClaimsMachine(EvaluationClaimsMachine):
    """The same machine with PostgreSQL as the durable adapter (a fresh database each run)."""

    @staticmethod
    def open_durable(directory: Path) -> Store:
        return PostgresStore(shared_server().database())


PostgresEvaluationClaimsMachine.TestCase.settings = settings(
    max_examples=20, stateful_step_count=30, deadline=None
)
TestEvaluationClaimsOnPostgres = PostgresEvaluationClaimsMachine.TestCase

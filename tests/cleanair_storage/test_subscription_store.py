"""`SubscriptionStore` on every adapter (the `store` fixture runs each test on the memory,
SQLite and PostgreSQL stores): alert subscriptions, their owners, the per-user limit under
concurrency, secret rotation and the evaluator state's compare-and-set."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import time, timedelta
from pathlib import Path
from typing import TypeVar

import attrs
import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlite_utils import Database

from cleanair_core.alerts.alert_states import decode_state, encode_state
from cleanair_core.alerts.episodes import ObservedState
from cleanair_core.alerts.events import Direction
from cleanair_core.alerts.subscriptions import (
    MAX_SUBSCRIPTIONS_PER_USER,
    Audience,
    Disabled,
    Forecast,
    Observed,
    Status,
    StoredState,
    Subscription,
    TargetDay,
    TooManySubscriptions,
    Trip,
)
from cleanair_core.errors import DuplicateEntry
from cleanair_core.geo import Point
from cleanair_core.offload import here_unless_blocked
from cleanair_core.ports import Store
from cleanair_core.routes.network import PlanActivityType
from cleanair_storage.memory import MemoryStore
from cleanair_storage.migrations import sqlite_utils_migrations
from cleanair_storage.postgres import PostgresStore
from cleanair_storage.postgres.migrations import migrate
from cleanair_storage.postgres.schema import MIGRATIONS
from cleanair_storage.sqlite import SqliteStore
from cleanair_storage.sqlite.database import instant, timestamp
from cleanair_storage.subscription_rows import subscription_from_row, subscription_row
from support.subscriptions import T0, make_subscription, subscriptions


def test_a_subscription_is_stored_as_given(store: Store) -> None:
    subscription = make_subscription()
    store.add_subscription(subscription)
    assert store.get_subscription(subscription.id, "alice") == subscription
    assert store.list_subscriptions("alice") == [subscription]


def test_every_shape_survives_every_store(store: Store) -> None:
    place = make_subscription()
    trip = attrs.evolve(
        make_subscription(webhook_url=None),
        created_at=T0 + timedelta(microseconds=1),
        target=Trip(
            start=Point(51.5072, -0.1276),
            end=Point(51.5155, -0.0922),
            activity=PlanActivityType.CYCLING,
            departure=time(7, 45),
            days=frozenset({1, 2, 3, 4, 5}),
        ),
        index=None,
        threshold=0,
        direction=Direction.BETTER,
        audience=Audience.SENSITIVE,
        kind=Forecast(TargetDay.TOMORROW, time(21, 0, 30)),
        timezone="Europe/London",
        quiet_hours=None,
        secret_generation=7,
        previous_generation_until=T0 + timedelta(hours=24),
        disabled=Disabled("status 410", T0 + timedelta(hours=1)),
    )
    observed_trip = attrs.evolve(
        trip,
        id=uuid.uuid4(),
        created_at=T0 + timedelta(seconds=1),
        kind=Observed(hysteresis_categories=2, hysteresis_hours=48),
        direction=Direction.WORSE,
        threshold=3,
        index="us_epa_2024",
        disabled=None,
        webhook_url="https://example.org:8443/in?token=s3cr3t",
    )
    forecast_place = attrs.evolve(
        place,
        id=uuid.uuid4(),
        created_at=T0 + timedelta(seconds=2),
        kind=Forecast(TargetDay.TODAY, time(6, 30)),
        index="uk_daqi",
    )
    shapes = [place, trip, observed_trip, forecast_place]
    for subscription in shapes:
        store.add_subscription(subscription)
    assert store.list_subscriptions("alice") == shapes
    for subscription in shapes:
        assert store.get_subscription(subscription.id, "alice") == subscription


def test_another_users_subscription_is_not_found(store: Store) -> None:
    subscription = make_subscription("alice")
    store.add_subscription(subscription)
    assert store.get_subscription(subscription.id, "bob") is None
    assert store.list_subscriptions("bob") == []
    assert store.delete_subscription(subscription.id, "bob") is False
    assert store.rotate_subscription_secret(subscription.id, "bob", T0) is None
    assert store.get_subscription(subscription.id, "alice") == subscription
    assert store.get_subscription(uuid.uuid4(), "alice") is None


def test_listings_are_per_owner_oldest_first_then_by_id(store: Store) -> None:
    later = make_subscription(created_at=T0 + timedelta(seconds=1))
    ids = sorted((uuid.uuid4() for _ in range(3)), key=str, reverse=True)
    same_time = [make_subscription(subscription_id=i) for i in ids]
    bobs = make_subscription("bob", created_at=T0 - timedelta(days=1))
    for subscription in [later, *same_time, bobs]:
        store.add_subscription(subscription)
    assert store.list_subscriptions("alice") == [
        *sorted(same_time, key=lambda s: str(s.id)),
        later,
    ]
    assert store.list_subscriptions("bob") == [bobs]


def test_find_gives_any_owners_subscription(store: Store) -> None:
    alices, bobs = make_subscription("alice"), make_subscription("bob")
    for subscription in (alices, bobs):
        store.add_subscription(subscription)
    store.disable_subscription(bobs.id, "disabled by an operator", T0)
    assert store.find_subscription(alices.id) == alices
    assert store.find_subscription(bobs.id) == attrs.evolve(
        bobs, disabled=Disabled("disabled by an operator", T0)
    )
    assert store.find_subscription(uuid.uuid4()) is None


#: Ids whose text and number orders would part if an adapter compared them as anything but
#: the UUIDs' bytes: all zeros and all ones, digits against letters in the first and in the
#: last place, one bit apart.
EDGE_IDS = [
    uuid.UUID(int=0),
    uuid.UUID(int=2**128 - 1),
    uuid.UUID("9fffffff-ffff-4fff-bfff-ffffffffffff"),
    uuid.UUID("a0000000-0000-4000-8000-000000000000"),
    uuid.UUID("a0000000-0000-4000-8000-000000000009"),
    uuid.UUID("a0000000-0000-4000-8000-00000000000a"),
    uuid.UUID(int=1),
]


def pages(store: Store, limit: int, status: Status | None = None) -> list[list[Subscription]]:
    """Every page of `all_subscriptions`, each started after the last id of the one before,
    up to and with the first short one."""
    found: list[list[Subscription]] = []
    after = None
    while True:
        page = store.all_subscriptions(after, limit, status=status)
        found.append(page)
        if len(page) < limit:
            return found
        after = page[-1].id


def test_all_subscriptions_pages_every_owners_in_id_order(store: Store) -> None:
    owners = ["alice", "bob", "carol"]
    added = [
        make_subscription(owners[i % 3], subscription_id=sid, created_at=T0 - timedelta(i))
        for i, sid in enumerate(EDGE_IDS)
    ]
    for subscription in added:
        store.add_subscription(subscription)
    by_id = sorted(added, key=lambda s: s.id)

    assert pages(store, 3) == [by_id[:3], by_id[3:6], by_id[6:]]
    assert pages(store, 7) == [by_id, []]  # a full page may be the last: the next is empty
    assert store.all_subscriptions(None, 100) == by_id
    assert store.all_subscriptions(by_id[2].id, 2) == by_id[3:5]
    assert store.all_subscriptions(by_id[-1].id, 2) == []
    # After an id that is not (or no longer) stored: from the next one stored.
    gone = by_id[4]
    assert store.delete_subscription(gone.id, gone.owner)
    assert store.all_subscriptions(by_id[3].id, 2) == [by_id[5], by_id[6]]


def test_all_subscriptions_keeps_one_status_when_asked(store: Store) -> None:
    added = [make_subscription(owner) for owner in ("alice", "bob", "alice", "carol", "bob")]
    for subscription in added:
        store.add_subscription(subscription)
    for subscription in added[1::2]:
        store.disable_subscription(subscription.id, "status 410", T0)
    stored = [
        attrs.evolve(s, disabled=Disabled("status 410", T0)) if i % 2 else s
        for i, s in enumerate(added)
    ]
    by_id = sorted(stored, key=lambda s: s.id)
    active = [s for s in by_id if s.disabled is None]
    disabled = [s for s in by_id if s.disabled is not None]
    assert len(active) == 3
    assert [s for page in pages(store, 2, Status.ACTIVE) for s in page] == active
    assert [s for page in pages(store, 1, Status.DISABLED) for s in page] == disabled
    assert store.all_subscriptions(None, 10, status=None) == by_id


@pytest.mark.parametrize("limit", [0, -1])
def test_a_page_holds_at_least_one(store: Store, limit: int) -> None:
    store.add_subscription(make_subscription())
    with pytest.raises(ValueError, match="at least 1"):
        store.all_subscriptions(None, limit)


def test_a_duplicate_id_is_refused_and_keeps_the_first(store: Store) -> None:
    first = make_subscription()
    store.add_subscription(first)
    with pytest.raises(DuplicateEntry):
        store.add_subscription(attrs.evolve(first, threshold=4))
    assert store.list_subscriptions("alice") == [first]


def test_delete_removes_the_subscription_and_its_state(store: Store) -> None:
    subscription = make_subscription()
    store.add_subscription(subscription)
    assert store.save_subscription_state(subscription.id, 0, encode_state(ObservedState()))
    assert store.delete_subscription(subscription.id, "alice") is True
    assert store.get_subscription(subscription.id, "alice") is None
    assert store.load_subscription_state(subscription.id) is None
    assert store.delete_subscription(subscription.id, "alice") is False


def test_disable_keeps_the_first_reason(store: Store) -> None:
    subscription = make_subscription()
    store.add_subscription(subscription)
    assert store.disable_subscription(subscription.id, "status 410", T0) is True
    assert store.disable_subscription(subscription.id, "by an operator", T0 + timedelta(1)) is False
    stored = store.get_subscription(subscription.id, "alice")
    assert stored is not None
    assert stored.status is Status.DISABLED
    assert stored.disabled == Disabled("status 410", T0)
    assert store.disable_subscription(uuid.uuid4(), "no such", T0) is False


def test_a_disabled_subscription_still_counts_towards_the_limit(store: Store) -> None:
    subscription = make_subscription()
    store.add_subscription(subscription, limit=1)
    store.disable_subscription(subscription.id, "status 410", T0)
    with pytest.raises(TooManySubscriptions):
        store.add_subscription(make_subscription(), limit=1)
    assert store.delete_subscription(subscription.id, "alice")
    store.add_subscription(make_subscription(), limit=1)


def test_rotation_moves_to_the_next_generation_with_an_overlap(store: Store) -> None:
    subscription = make_subscription()
    store.add_subscription(subscription)
    until = T0 + timedelta(hours=24)
    rotated = store.rotate_subscription_secret(subscription.id, "alice", until)
    assert rotated == attrs.evolve(
        subscription, secret_generation=2, previous_generation_until=until
    )
    assert store.get_subscription(subscription.id, "alice") == rotated
    again = store.rotate_subscription_secret(subscription.id, "alice", until + timedelta(1))
    assert again is not None
    assert again.secret_generation == 3
    assert again.previous_generation_until == until + timedelta(1)


def test_the_limit_is_per_user(store: Store) -> None:
    for _ in range(MAX_SUBSCRIPTIONS_PER_USER):
        store.add_subscription(make_subscription("alice"))
    with pytest.raises(TooManySubscriptions) as refused:
        store.add_subscription(make_subscription("alice"))
    assert refused.value.violations[0].rule == "maximum"
    store.add_subscription(make_subscription("bob"))
    assert len(store.list_subscriptions("alice")) == MAX_SUBSCRIPTIONS_PER_USER


def test_the_limit_refuses_inside_a_unit_of_work_and_changes_nothing(store: Store) -> None:
    store.add_subscription(make_subscription(), limit=1)

    def bob_then_alice() -> None:
        with store.transaction() as work:
            work.add_subscription(make_subscription("bob"), limit=1)
            work.add_subscription(make_subscription("alice"), limit=1)

    with pytest.raises(TooManySubscriptions):
        bob_then_alice()
    assert store.list_subscriptions("bob") == []


def test_a_new_subscription_has_no_state_at_version_0(store: Store) -> None:
    subscription = make_subscription()
    store.add_subscription(subscription)
    assert store.load_subscription_state(subscription.id) == StoredState(0, None)
    assert store.load_subscription_state(uuid.uuid4()) is None


def test_state_saves_are_compare_and_set(store: Store) -> None:
    subscription = make_subscription()
    store.add_subscription(subscription)
    first = encode_state(ObservedState(last_hour=T0, episodes=1, open=True))
    assert store.save_subscription_state(subscription.id, 0, first) is True
    assert store.load_subscription_state(subscription.id) == StoredState(1, first)
    # A second writer that loaded version 0 too loses, and writes nothing.
    assert store.save_subscription_state(subscription.id, 0, encode_state(ObservedState())) is False
    loaded = store.load_subscription_state(subscription.id)
    assert loaded == StoredState(1, first)
    assert loaded is not None
    assert loaded.blob is not None
    assert decode_state(loaded.blob) == decode_state(first)
    assert store.save_subscription_state(subscription.id, 1, encode_state(ObservedState()))
    assert store.save_subscription_state(uuid.uuid4(), 0, first) is False


# -- concurrency: threads on the shared stores ------------------------------------------------

T = TypeVar("T")
SHARED = ("sqlite", "postgres")


@pytest.fixture(params=SHARED)
def shared_stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], Store]]:
    """Opens stores on one database (each its own connections, as processes have)."""
    url = request.getfixturevalue("postgres_url") if request.param == "postgres" else None
    opened: list[Store] = []

    def another() -> Store:
        store: Store = SqliteStore(tmp_path / "shared.db") if url is None else PostgresStore(url)
        opened.append(store)
        return store

    yield another
    for store in opened:
        store.close()


def run_together(count: int, work: Callable[[int], str]) -> Counter[str]:
    """Run `work(i)` for i in range(count) on as many threads released at once."""
    barrier = threading.Barrier(count)
    outcomes: Counter[str] = Counter()
    lock = threading.Lock()

    def run(index: int) -> None:
        barrier.wait(timeout=60)
        outcome = work(index)
        with lock:
            outcomes[outcome] += 1

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads)
    return outcomes


def test_concurrent_creations_never_exceed_the_limit(
    shared_stores: Callable[[], Store],
) -> None:
    stores = [shared_stores() for _ in range(4)]
    limit, tries = 5, 40
    for owner in ("alice", "bob", "carol"):  # rounds: each a new chance for a race

        def create(index: int, owner: str = owner) -> str:
            try:
                stores[index % len(stores)].add_subscription(make_subscription(owner), limit=limit)
            except TooManySubscriptions:
                return "refused"
            return "created"

        assert run_together(tries, create) == Counter(created=limit, refused=tries - limit)
        assert len(stores[0].list_subscriptions(owner)) == limit


def test_of_two_concurrent_state_saves_one_wins(shared_stores: Callable[[], Store]) -> None:
    stores = [shared_stores() for _ in range(2)]
    subscription = make_subscription()
    stores[0].add_subscription(subscription)
    for version in range(10):
        blobs = [encode_state(ObservedState(episodes=10 * version + i)) for i in range(2)]

        def save(index: int, version: int = version, blobs: list[str] = blobs) -> str:
            won = stores[index].save_subscription_state(subscription.id, version, blobs[index])
            return "won" if won else "lost"

        assert run_together(2, save) == Counter(won=1, lost=1)
        stored = stores[0].load_subscription_state(subscription.id)
        assert stored is not None
        assert stored.version == version + 1
        assert stored.blob in blobs


def test_concurrent_rotations_each_get_a_generation(shared_stores: Callable[[], Store]) -> None:
    stores = [shared_stores() for _ in range(2)]
    subscription = make_subscription()
    stores[0].add_subscription(subscription)
    generations: list[int] = []

    def rotate(index: int) -> str:
        rotated = stores[index % 2].rotate_subscription_secret(subscription.id, "alice", T0)
        assert rotated is not None
        generations.append(rotated.secret_generation)
        return "rotated"

    run_together(8, rotate)
    assert sorted(generations) == list(range(2, 10))


# -- every valid subscription, round trip ------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(subscriptions())
def test_the_stored_row_reads_back_as_the_subscription(subscription: Subscription) -> None:
    assert subscription_from_row(subscription_row(subscription, timestamp), instant) == (
        subscription
    )


@pytest.fixture(scope="module")
def module_stores(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Store]]:
    stores: list[Store] = [
        MemoryStore(),
        SqliteStore(tmp_path_factory.mktemp("subscriptions") / "cleanair.db"),
    ]
    yield stores
    for store in stores:
        store.close()


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(subscriptions())
def test_every_valid_subscription_round_trips_through_the_store(
    module_stores: list[Store], subscription: Subscription
) -> None:
    for store in module_stores:
        store.add_subscription(subscription, limit=10**6)
        try:
            assert store.get_subscription(subscription.id, subscription.owner) == subscription
        finally:
            store.delete_subscription(subscription.id, subscription.owner)


@settings(
    max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    ids=st.lists(st.uuids(), unique=True, max_size=12),
    disabled=st.lists(st.booleans(), min_size=12, max_size=12),
    limit=st.integers(min_value=1, max_value=5),
    status=st.sampled_from([None, Status.ACTIVE, Status.DISABLED]),
)
def test_pages_join_into_every_subscription_of_the_status_in_id_order(
    module_stores: list[Store],
    ids: list[uuid.UUID],
    disabled: list[bool],
    limit: int,
    status: Status | None,
) -> None:
    added = [make_subscription(f"user{i % 3}", subscription_id=sid) for i, sid in enumerate(ids)]
    for i, subscription in enumerate(added):
        if disabled[i]:
            added[i] = attrs.evolve(subscription, disabled=Disabled("status 410", T0))
    expected = sorted(
        (s for s in added if status is None or s.status is status), key=lambda s: s.id
    )
    for store in module_stores:
        for subscription in added:
            store.add_subscription(subscription, limit=10**6)
        try:
            got = pages(store, limit, status)
            assert [s for page in got for s in page] == expected
            assert all(len(page) == limit for page in got[:-1])
        finally:
            for subscription in added:
                store.delete_subscription(subscription.id, subscription.owner)


# -- upgrades -----------------------------------------------------------------------------------


def test_a_sqlite_database_from_before_subscriptions_gets_them_empty(tmp_path: Path) -> None:
    path = tmp_path / "older.db"
    with sqlite3.connect(path) as conn:
        sqlite_utils_migrations().apply(Database(conn), stop_before="m013_alert_subscriptions")
    conn.close()
    store = SqliteStore(path)
    try:
        assert store.schema_is_current()
        assert store.list_subscriptions("alice") == []
        subscription = make_subscription()
        store.add_subscription(subscription)
        assert store.get_subscription(subscription.id, "alice") == subscription
    finally:
        store.close()


def test_a_postgres_database_from_before_subscriptions_gets_them_empty(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every migration before the subscriptions' (later ones may change their table).
    version = next(m[0] for m in MIGRATIONS if m[1] == "alert subscriptions")
    before_subscriptions = [m for m in MIGRATIONS if m[0] < version]
    with monkeypatch.context() as before:
        before.setattr(
            "cleanair_storage.postgres.migrations.MIGRATIONS", tuple(before_subscriptions)
        )
        with psycopg.connect(postgres_url) as conn:
            migrate(conn)
    store = PostgresStore(postgres_url)
    try:
        assert store.schema_is_current()
        assert store.list_subscriptions("alice") == []
        subscription = make_subscription()
        store.add_subscription(subscription)
        assert store.get_subscription(subscription.id, "alice") == subscription
    finally:
        store.close()


# -- never waiting on the event loop ------------------------------------------------------------


class _HandedOver(Exception):
    """The work was handed to the fallback offload (a worker thread, in the server)."""


async def _hand_over(work: Callable[[], T], /) -> T:
    raise _HandedOver


def test_told_not_to_wait_a_busy_sqlite_store_hands_every_write_over(tmp_path: Path) -> None:
    """SQLite store calls may run on the event loop (`here_unless_blocked`): a subscription
    write finding the database locked by another process must not wait there."""
    path = tmp_path / "busy.db"
    store = SqliteStore(path, busy_timeout=60)
    subscription = make_subscription()
    store.add_subscription(subscription)
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # as another process writing
    here = here_unless_blocked(_hand_over)
    writes: list[Callable[[], object]] = [
        lambda: store.add_subscription(make_subscription()),
        lambda: store.delete_subscription(subscription.id, "alice"),
        lambda: store.disable_subscription(subscription.id, "status 410", T0),
        lambda: store.rotate_subscription_secret(subscription.id, "alice", T0),
        lambda: store.save_subscription_state(subscription.id, 0, "{}"),
    ]
    try:
        for write in writes:
            with pytest.raises(_HandedOver):
                asyncio.run(here(write))
    finally:
        other.execute("ROLLBACK")
        other.close()
    try:
        assert store.list_subscriptions("alice") == [subscription]
        assert store.load_subscription_state(subscription.id) == StoredState(0, None)
    finally:
        store.close()

"""Two alert workers on one database (issue 32: "two workers on PostgreSQL never decide the
same event twice"): two threads, each with its own store (its own connections) on the same
SQLite file or PostgreSQL database, run `alert_rounds.evaluate_due` over a few hundred
subscriptions of many owners until nothing is due. Claims are small, so each worker's
transactions interleave with the other's many times, and each writes the feed, outbox and
ledger rows of several owners in an order unrelated to the other's.

Every subscription is decided once: its one event is in its owner's feed once, debited once
under the alerts label, owed to its webhook once, and its state saved once (version 1). A
compare-and-set refused (`RoundReport.lost`) happens only where a claim was taken over after
its lease ran out: never while leases hold, and exactly for the claims taken over when one
worker stalls past its lease. Two workers charging an owner's last credit at once withhold
the second alert rather than fail the round, and an event decided again from a restarted
state nets no charge.
"""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

import pytest

from cleanair_core import CleanAir, ManualClock
from cleanair_core.air.pollutants import Concentrations, Pollutant
from cleanair_core.air.quality_source import Sample
from cleanair_core.alerts.costs import PLACE_ALERT_COST
from cleanair_core.alerts.subscriptions import Subscription
from cleanair_core.credits.ledger import CreditLimits, Debit, LedgerEntry, Usage
from cleanair_core.keys import TokenKeys, generate_key
from cleanair_core.metrics import NO_METRICS
from cleanair_core.policy import Policy
from cleanair_core.ports import Sources, Store
from cleanair_core.use_cases.alert_rounds import ALERTS_LABEL, RoundReport, evaluate_due
from cleanair_storage.postgres import PostgresStore
from cleanair_storage.sqlite import SqliteStore
from support.alert_load import workload

KEYS = TokenKeys(generate_key())
NOW = datetime(2026, 11, 24, 9, 7, tzinfo=UTC)
OWNERS = [f"user-{k:02}" for k in range(12)]
#: Subscriptions per claim: small, so that the two workers take turns many times.
BATCH = 16
#: Bounds every wait between the threads: generous for a loaded 2-core machine.
WAIT_S = 120.0
STORE_KINDS = ("sqlite", "postgres")


class Air:
    """The same moderate air everywhere; each worker's first call may wait for something
    (`first_call`): the other worker's first call, say, so both are mid-round at once."""

    update_interval = 3600

    def __init__(self, first_call: Callable[[], object] | None = None) -> None:
        self._first_call = first_call

    async def concentrations(self, samples: Sequence[Sample]) -> list[Concentrations]:
        if self._first_call is not None:
            waiting, self._first_call = self._first_call, None
            # Blocking on purpose: each worker runs its own event loop in its own thread.
            waiting()
        air: Concentrations = {
            Pollutant.PM25: 8.0,
            Pollutant.PM10: 15.0,
            Pollutant.NO2: 20.0,
            Pollutant.O3: 50.0,
        }
        return [dict(air) for _ in samples]


@pytest.fixture(params=STORE_KINDS)
def opener(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], Store]]:
    """Opens another store on one database (a SQLite file, or a PostgreSQL database of its
    own); each is closed at the end."""
    url = request.getfixturevalue("postgres_url") if request.param == "postgres" else None
    opened: list[Store] = []

    def open_one() -> Store:
        store = SqliteStore(tmp_path / "cleanair.db") if url is None else PostgresStore(url)
        opened.append(store)
        return store

    yield open_one
    for store in opened:
        store.close()


def worker(store: Store, clock: ManualClock, air: Air) -> CleanAir:
    return CleanAir(store, KEYS, clock=clock, sources=Sources(air), metrics=NO_METRICS)


def rounds(core: CleanAir, claimant: str, start: threading.Barrier) -> list[RoundReport]:
    """`evaluate_due` again and again until it claims nothing: a worker's loop."""
    start.wait(WAIT_S)
    reports = []
    while (report := asyncio.run(evaluate_due(core.context, claimant, batch=BATCH))).claimed:
        reports.append(report)
    return reports


def store_all(store: Store, subscriptions: Sequence[Subscription]) -> None:
    for subscription in subscriptions:
        store.add_subscription(subscription)


def test_two_workers_decide_every_event_once_and_never_lose_a_compare_and_set(
    opener: Callable[[], Store],
) -> None:
    setup = opener()
    subscriptions = workload(OWNERS, NOW - timedelta(hours=1), webhook_url="https://h.example/in")
    store_all(setup, subscriptions)
    clock = ManualClock(NOW)
    # Each worker's first air call waits for the other's: both hold a claim at once, then
    # both store their outcomes at once.
    both_mid_round = threading.Barrier(2)
    cores = [worker(opener(), clock, Air(lambda: both_mid_round.wait(WAIT_S))) for _ in range(2)]
    start = threading.Barrier(2)
    with ThreadPoolExecutor(2) as pool:
        futures = [pool.submit(rounds, core, f"worker-{k}", start) for k, core in enumerate(cores)]
        reports = [future.result(timeout=WAIT_S * 2) for future in futures]

    for mine in reports:
        assert mine, "each worker evaluated some of the subscriptions"
    every = [report for mine in reports for report in mine]
    assert sum(report.claimed for report in every) == len(subscriptions)
    assert sum(report.recorded for report in every) == len(subscriptions)
    # Leases of minutes on a clock that stands still: no claim was ever taken over, so no
    # compare-and-set may have been refused.
    assert sum(report.lost for report in every) == 0
    assert sum(report.withheld for report in every) == 0
    assert_decided_once(setup, subscriptions)


def test_a_claim_taken_over_after_its_lease_is_lost_by_the_stalled_worker_alone(
    opener: Callable[[], Store],
) -> None:
    setup = opener()
    subscriptions = workload(OWNERS[:3], NOW - timedelta(hours=1))
    store_all(setup, subscriptions)
    everything = len(subscriptions)
    clock = ManualClock(NOW)
    past_its_lease, resume = threading.Event(), threading.Event()

    def stall() -> None:
        # Mid-round, holding every claim, the first worker outlives its lease.
        clock.advance(seconds=Policy().alert_lease_seconds + 1)
        past_its_lease.set()
        assert resume.wait(WAIT_S)

    stalled = worker(opener(), clock, Air(stall))
    other = worker(opener(), clock, Air())
    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(
            lambda: asyncio.run(evaluate_due(stalled.context, "stalled", batch=everything))
        )
        assert past_its_lease.wait(WAIT_S)
        taken_over = asyncio.run(evaluate_due(other.context, "other", batch=everything))
        resume.set()
        late = first.result(timeout=WAIT_S)

    assert (taken_over.claimed, taken_over.recorded, taken_over.lost) == (everything,) * 2 + (0,)
    # Every refusal the stalled worker met is one of the claims taken over: it stores
    # nothing, and nothing is told or charged twice.
    assert (late.claimed, late.recorded, late.lost) == (everything, 0, everything)
    assert_decided_once(setup, subscriptions)


def assert_decided_once(store: Store, subscriptions: Sequence[Subscription]) -> None:
    """Each subscription's event is in its owner's feed once (the feed's cursors without a
    gap), debited once under the alerts label, owed to its webhook if it has one, and its
    state was saved once."""
    owned: dict[str, dict[uuid.UUID, Subscription]] = defaultdict(dict)
    for subscription in subscriptions:
        owned[subscription.owner][subscription.id] = subscription
    for owner, theirs in owned.items():
        feed = store.alert_feed(owner, 0, 10 * len(theirs))
        assert Counter(entry.subscription_id for entry in feed) == Counter(list(theirs))
        assert len({entry.event_id for entry in feed}) == len(feed)
        assert [entry.cursor for entry in feed] == list(range(1, len(feed) + 1))
        debits = [entry.amount for entry in store.entries(owner) if entry.label == ALERTS_LABEL]
        assert debits == [PLACE_ALERT_COST] * len(theirs)
        assert store.usage(owner, NOW).month == PLACE_ALERT_COST * len(theirs)
        for entry in feed:
            owed = store.owed_delivery(entry.event_id)
            url = theirs[entry.subscription_id].webhook_url
            assert (owed is None) == (url is None)
            assert owed is None or (owed.url, owed.payload) == (url, entry.payload)
    for subscription in subscriptions:
        state = store.load_subscription_state(subscription.id)
        assert state is not None
        assert (state.version, state.blob is None) == (1, False)


class Hooked:
    """A store whose `usage` and `debit` calls, in or out of a unit of work, also tell `hear`
    (the call's name and pool) once they are done: a test pauses a worker there."""

    def __init__(self, store: Store, hear: Callable[[str, str], None]) -> None:
        self._store, self._hear = store, hear

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    @contextmanager
    def transaction(self) -> Iterator[Hooked]:
        with self._store.transaction():
            yield self

    def usage(self, pool: str, at: datetime) -> Usage:
        found = self._store.usage(pool, at)
        self._hear("usage", pool)
        return found

    def debit(self, debit: Debit, limits: CreditLimits) -> LedgerEntry:
        entry = self._store.debit(debit, limits)
        self._hear("debit", debit.pool)
        return entry


def test_two_workers_charging_the_last_credit_at_once_withhold_one_alert_without_failing(
    postgres_url: str,
) -> None:
    """PostgreSQL: a worker reads its owner's usage before it takes the owner's rows, so
    another worker's charge may commit in between. The second must then withhold its alert
    (with the pool-exhausted notice), not fail its whole transaction on the refused debit.
    (SQLite's unit of work holds the write lock from its start: no such interleaving.)"""
    setup = PostgresStore(postgres_url)
    spender = OWNERS[0]
    lifted = CreditLimits(monthly=1000, daily=1000)
    last_one = Policy().credits.monthly - PLACE_ALERT_COST
    setup.debit(Debit(spender, "c1", "score", last_one, NOW - timedelta(days=3)), lifted)
    subscriptions = workload([spender], NOW - timedelta(hours=1), per_owner=2)
    store_all(setup, subscriptions)
    clock = ManualClock(NOW)
    first_read, second_read = threading.Event(), threading.Event()

    def first_hears(call: str, pool: str) -> None:
        if call == "usage":
            first_read.set()
        elif call == "debit":
            # The last credit debited, not committed: the second worker reads the usage now.
            assert second_read.wait(WAIT_S)

    def second_hears(call: str, pool: str) -> None:
        if call == "usage":
            second_read.set()

    first = worker(cast(Store, Hooked(PostgresStore(postgres_url), first_hears)), clock, Air())
    second = worker(cast(Store, Hooked(PostgresStore(postgres_url), second_hears)), clock, Air())
    try:
        with ThreadPoolExecutor(2) as pool:
            charged = pool.submit(lambda: asyncio.run(evaluate_due(first.context, "1", batch=1)))
            assert first_read.wait(WAIT_S)
            # The first worker holds one claim: the second claims the other.
            withheld = pool.submit(lambda: asyncio.run(evaluate_due(second.context, "2", batch=1)))
            reports = [charged.result(timeout=WAIT_S), withheld.result(timeout=WAIT_S)]
        assert [(r.claimed, r.recorded, r.withheld, r.lost) for r in reports] == [
            (1, 1, 0, 0),
            (1, 0, 1, 0),
        ]
        types = [json.loads(e.payload)["type"] for e in setup.alert_feed(spender, 0, 10)]
        assert types == ["air.forecast", "alerts.pool_exhausted"]
        assert setup.usage(spender, NOW).month == Policy().credits.monthly
    finally:
        for store in (setup, first.store, second.store):
            store.close()


def test_an_event_told_before_and_decided_again_from_a_restarted_state_nets_no_charge(
    opener: Callable[[], Store],
) -> None:
    """A state that cannot be read is restarted from scratch, and decides today's forecast
    alert again, with the same id: it is neither told nor charged again (a round debits
    before it records, so it must know the event is not new before the debit)."""
    store = opener()
    [subscription] = workload(OWNERS[:1], NOW - timedelta(hours=1), per_owner=1)
    store.add_subscription(subscription)
    clock = ManualClock(NOW)
    core = worker(store, clock, Air())
    assert asyncio.run(evaluate_due(core.context, "worker")).recorded == 1
    assert store.save_subscription_state(subscription.id, 1, "not a state")
    clock.advance(hours=1)  # due again at the end of the hour
    again = asyncio.run(evaluate_due(core.context, "worker"))
    assert (again.claimed, again.restarted, again.recorded) == (1, 1, 0)
    assert len(store.alert_feed(subscription.owner, 0, 10)) == 1
    assert store.usage(subscription.owner, NOW).month == PLACE_ALERT_COST

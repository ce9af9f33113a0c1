"""The worker's alert round (`use_cases.alert_rounds.evaluate_due`) on the in-memory store:
claims, air per cell, decisions, charges and the feed and outbox in one unit of work
(issue 32). The SQL stores' claims and outbox have their own contract suites."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import uuid
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, time, timedelta
from time import monotonic

import pytest

from cleanair_core import CleanAir, ManualClock
from cleanair_core.air.indexes import eu_eaqi
from cleanair_core.air.pollutants import Concentrations, Pollutant
from cleanair_core.air.quality_source import Sample
from cleanair_core.alerts.events import Direction
from cleanair_core.alerts.outbox import DeliveryState
from cleanair_core.alerts.subscriptions import (
    Audience,
    Forecast,
    Observed,
    Place,
    Subscription,
    TargetDay,
    Trip,
)
from cleanair_core.alerts.trips import stored_route
from cleanair_core.credits.ledger import CreditLimits, Debit
from cleanair_core.errors import SourceUnavailable
from cleanair_core.geo import Point
from cleanair_core.keys import TokenKeys, generate_key
from cleanair_core.metrics import NO_METRICS
from cleanair_core.ports import Sources, Store
from cleanair_core.routes.network import PlanActivityType
from cleanair_core.use_cases import alert_rounds
from cleanair_core.use_cases.alert_rounds import (
    ALERTS_LABEL,
    RoundReport,
    evaluate_due,
)
from cleanair_storage.memory import MemoryStore

KEYS = TokenKeys(generate_key())
#: Seven minutes past the hour: the round decides on the hour that ended at 09:00.
NOW = datetime(2026, 11, 24, 9, 7, tzinfo=UTC)
HELSINKI = Point(60.1699, 24.9384)
DIRTY = 120.0  # NO2 µg/m³: the EAQI's "Very poor" (category 4)
CLEAN = 5.0  # "Good" (0)


class Air:
    """NO2 at one level everywhere, switchable; the other pollutants low. Counts its calls,
    and can fail or run something while it answers."""

    update_interval = 3600

    def __init__(self) -> None:
        self.no2 = DIRTY
        self.calls = 0
        self.fail = False
        self.during: list[object] = []

    async def concentrations(self, samples: Sequence[Sample]) -> list[Concentrations]:
        self.calls += 1
        if self.fail:
            raise SourceUnavailable("the source is down")
        while self.during:
            step = self.during.pop()
            assert callable(step)
            await step()
        low: Concentrations = {Pollutant.PM25: 2.0, Pollutant.PM10: 4.0, Pollutant.O3: 20.0}
        return [{**low, Pollutant.NO2: self.no2} for _ in samples]


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(NOW)


@pytest.fixture
def air() -> Air:
    return Air()


@pytest.fixture
def core(clock: ManualClock, air: Air) -> CleanAir:
    store = MemoryStore()
    core = CleanAir(store, KEYS, clock=clock, sources=Sources(air), metrics=NO_METRICS)
    core.add_user("alice")
    return core


def subscribe(core: CleanAir, **changes: object) -> Subscription:
    fields: dict[str, object] = {
        "id": uuid.uuid4(),
        "owner": "alice",
        "connection_id": "c1",
        "created_at": NOW - timedelta(hours=2),
        "target": Place(HELSINKI),
        "index": eu_eaqi.CODE,
        "threshold": 3,
        "direction": Direction.WORSE,
        "audience": Audience.GENERAL,
        "kind": Observed(hysteresis_categories=1, hysteresis_hours=1),
        "timezone": "Europe/Helsinki",
        "webhook_url": "https://hooks.example.com/cleanair",
    }
    fields.update(changes)
    subscription = Subscription(**fields)  # type: ignore[arg-type]
    core.store.add_subscription(subscription)
    return subscription


def run(core: CleanAir, claimant: str = "worker-1") -> RoundReport:
    return asyncio.run(evaluate_due(core.context, claimant))


def feed_types(core: CleanAir) -> list[str]:
    return [json.loads(e.payload)["type"] for e in core.store.alert_feed("alice", 0, 100)]


def used(core: CleanAir) -> int:
    return core.store.usage("alice", NOW).month


def test_an_episode_is_told_charged_and_owed_to_the_webhook_then_cleared_for_free(
    core: CleanAir, clock: ManualClock, air: Air
) -> None:
    subscription = subscribe(core)
    report = run(core)
    assert report.claimed == 1
    assert report.recorded == 1
    assert feed_types(core) == ["air.alert"]
    assert used(core) == 1
    [entry] = core.store.alert_feed("alice", 0, 10)
    owed = core.store.owed_delivery(entry.event_id)
    assert owed is not None
    assert owed.state is DeliveryState.PENDING
    assert owed.url == subscription.webhook_url
    assert owed.payload == entry.payload
    assert [e.label for e in core.store.entries("alice")] == [ALERTS_LABEL]
    # Due again at the end of the hour, not before.
    assert run(core).claimed == 0
    clock.set(NOW.replace(minute=0) + timedelta(hours=1, seconds=1))
    run(core)
    assert feed_types(core) == ["air.alert"]  # still dirty: one alert per episode
    air.no2 = CLEAN
    clock.advance(hours=1)
    run(core)
    assert feed_types(core) == ["air.alert", "air.all_clear"]
    assert used(core) == 1


def test_subscriptions_in_one_cell_share_one_call_for_the_air(core: CleanAir, air: Air) -> None:
    for k in range(5):
        subscribe(core, target=Place(Point(HELSINKI.lat + 0.001 * k / 5, HELSINKI.lon)))
    report = run(core)
    assert report.claimed == 5
    assert air.calls == 1
    assert len(core.store.alert_feed("alice", 0, 100)) == 5


def test_a_forecast_waits_for_its_sending_time(core: CleanAir, clock: ManualClock) -> None:
    # 21:00 in Helsinki (UTC+2) is 19:00 UTC.
    subscribe(core, kind=Forecast(TargetDay.TOMORROW, send_at=time(21)))
    assert run(core).recorded == 0
    clock.set(datetime(2026, 11, 24, 18, 59, tzinfo=UTC))
    assert run(core).claimed == 0
    clock.set(datetime(2026, 11, 24, 19, 0, 5, tzinfo=UTC))
    assert run(core).recorded == 1
    assert feed_types(core) == ["air.forecast"]


def test_an_empty_pool_withholds_alerts_and_tells_the_owner_once(core: CleanAir) -> None:
    # A month of calls, spread over earlier days: the pool is spent.
    lifted = CreditLimits(monthly=1000, daily=1000)
    core.store.debit(Debit("alice", "c1", "score", 1000, NOW - timedelta(days=3)), lifted)
    first, second = subscribe(core), subscribe(core)
    report = run(core)
    assert report.withheld == 2
    assert report.recorded == 0
    assert feed_types(core) == ["alerts.pool_exhausted"]
    assert used(core) == 1000
    [notice] = core.store.alert_feed("alice", 0, 10)
    assert notice.subscription_id in {first.id, second.id}


def test_an_episode_whose_alert_was_withheld_ends_without_an_all_clear(
    core: CleanAir, clock: ManualClock, air: Air
) -> None:
    lifted = CreditLimits(monthly=1000, daily=1000)
    core.store.debit(Debit("alice", "c1", "score", 1000, NOW - timedelta(days=3)), lifted)
    subscribe(core)
    assert run(core).withheld == 1
    core.grant_credits("alice", 10, reason="support")  # the pool refills meanwhile
    air.no2 = CLEAN
    clock.set(NOW.replace(minute=0) + timedelta(hours=1, seconds=1))
    report = run(core)
    assert (report.recorded, report.withheld) == (0, 0)
    assert feed_types(core) == ["alerts.pool_exhausted"]


def test_a_source_outage_decides_nothing_and_tries_again_soon(
    core: CleanAir, clock: ManualClock, air: Air
) -> None:
    subscribe(core)
    air.fail = True
    report = run(core)
    assert report.claimed == 1
    assert report.recorded == 0
    assert run(core).claimed == 0
    air.fail = False
    clock.advance(minutes=5)
    assert run(core).recorded == 1


def test_a_worker_whose_claim_was_taken_over_stores_nothing_and_nothing_is_told_twice(
    core: CleanAir, clock: ManualClock, air: Air
) -> None:
    subscribe(core)
    taken_over: list[RoundReport] = []

    async def another_worker() -> None:
        # The first worker stalls past its lease while it waits for the air.
        clock.advance(core.policy.alert_lease_seconds + 1)
        taken_over.append(await evaluate_due(core.context, "worker-2"))

    air.during.append(another_worker)
    stalled = run(core, "worker-1")
    assert taken_over[0].recorded == 1
    assert stalled.lost == 1
    assert stalled.recorded == 0
    assert feed_types(core) == ["air.alert"]
    assert used(core) == 1


def test_a_trip_is_told_the_evening_before_with_its_best_departure_and_charged_5(
    core: CleanAir, clock: ManualClock
) -> None:
    # Tuesday 2026-11-24; the walk is on Wednesdays at 08:00, told at 21:00 the day before.
    walk = Trip(
        HELSINKI,
        Point(HELSINKI.lat + 0.01, HELSINKI.lon + 0.01),
        PlanActivityType.WALKING,
        time(8),
        frozenset({3}),
    )
    subscription = subscribe(
        core,
        target=walk,
        kind=Forecast(TargetDay.TOMORROW, send_at=time(21)),
        index=eu_eaqi.CODE,
    )
    assert run(core).recorded == 0  # 11:07 local: not yet
    clock.set(datetime(2026, 11, 24, 19, 0, 5, tzinfo=UTC))  # 21:00:05 in Helsinki
    assert run(core).recorded == 1
    [entry] = core.store.alert_feed("alice", 0, 10)
    body = json.loads(entry.payload)
    assert body["type"] == "air.forecast"
    assert body["data"]["target_day"] == "2026-11-25"
    assert body["data"]["trip"]["best_departure"] is not None
    assert used(core) == 5
    # The route was planned once and kept with the state for the next evaluations.
    stored = core.store.load_subscription_state(subscription.id)
    assert stored is not None
    assert stored_route(stored) is not None
    clock.advance(hours=1)
    assert run(core).recorded == 0  # the same forecast: told once


def test_a_round_leaves_the_database_free_for_a_moment_after_each_transaction(
    core: CleanAir, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLite has one write lock and no queue: transactions back to back would leave a
    charged call waiting for it no moment to get in (`make bench`, section 19)."""
    monkeypatch.setattr(alert_rounds, "WRITE_CHUNK", 2)
    for _ in range(5):
        subscribe(core)
    spans: list[tuple[float, float]] = []
    transaction = core.store.transaction

    @contextlib.contextmanager
    def timed() -> Iterator[Store]:
        with transaction() as work:
            began = monotonic()
            yield work
        spans.append((began, monotonic()))

    monkeypatch.setattr(core.store, "transaction", timed)
    assert run(core).claimed == 5
    assert len(spans) == 3  # chunks of 2, 2 and 1
    for (_, ended), (began, _) in itertools.pairwise(spans):
        assert began - ended >= alert_rounds.WRITE_PAUSE

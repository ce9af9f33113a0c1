"""The `Metrics` port: what the core tells an embedder's monitoring, with any adapter."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime

import pytest

from cleanair_core.access.accounts import Owner, OwnerKind
from cleanair_core.access.connections import Caller
from cleanair_core.access.scopes import USER_SCOPES
from cleanair_core.air.pollutants import Concentrations, Pollutant
from cleanair_core.air.quality_source import Sample
from cleanair_core.alerts.delivery import Delivery, Outcome, OutcomeKind
from cleanair_core.alerts.dispatch import DeliverySettings
from cleanair_core.alerts.events import Direction
from cleanair_core.alerts.subscriptions import Audience, Observed, Place, Subscription
from cleanair_core.clock import ManualClock
from cleanair_core.credits.ledger import Billable, CreditLimits, Usage, check_fits
from cleanair_core.errors import CreditsExhausted, Limit, RateLimited
from cleanair_core.geo import Point
from cleanair_core.keys import TokenKeys
from cleanair_core.metrics import NO_METRICS, Upstream
from cleanair_core.policy import Policy
from cleanair_core.ports import Sources
from cleanair_core.service import CleanAir
from cleanair_storage.memory import MemoryStore

NOW = datetime(2026, 5, 20, 9, 0, tzinfo=UTC)
ALICE = Caller(uuid.uuid4(), Owner(OwnerKind.USER, "alice"), USER_SCOPES)


class Recorded:
    """A `Metrics` adapter that keeps every event."""

    def __init__(self) -> None:
        self.events: list[tuple[object, ...]] = []

    def credits_charged(self, endpoint: str, credits: int) -> None:
        self.events.append(("charged", endpoint, credits))

    def credits_refunded(self, endpoint: str, credits: int) -> None:
        self.events.append(("refunded", endpoint, credits))

    def plan_finished(self, status: str, seconds: float) -> None:
        self.events.append(("plan", status, seconds))

    def upstream_request(self, upstream: Upstream, seconds: float, *, failed: bool) -> None:
        self.events.append(("upstream", upstream, failed))

    def observations_stored(self, upstream: Upstream, count: int) -> None:
        self.events.append(("observations", upstream, count))

    def observations_held_back(self, upstream: Upstream, reason: str, count: int) -> None:
        self.events.append(("held back", upstream, reason, count))

    def observations_set_aside(self, pollutant: str, count: int) -> None:
        self.events.append(("set aside", pollutant, count))

    def air_hour(self, pollutant: str, *, fused: bool) -> None:
        self.events.append(("air hour", pollutant, fused))

    def alert_events(self, outcome: str, count: int) -> None:
        self.events.append(("alert events", outcome, count))

    def alert_deliveries(self, outcome: str, count: int) -> None:
        self.events.append(("alert deliveries", outcome, count))

    def alert_delivery_lag(self, seconds: float) -> None:
        self.events.append(("alert lag", seconds))


def test_a_charge_kept_and_one_refunded_once() -> None:
    metrics = Recorded()
    core = CleanAir(
        MemoryStore(), TokenKeys(generate()), Policy(), ManualClock(NOW), metrics=metrics
    )
    with core.charge(ALICE, Billable.FORECAST):
        pass
    with pytest.raises(RuntimeError), core.charge(ALICE, Billable.SCORE) as refunded:
        raise RuntimeError
    refunded.refund()  # a second refund gives nothing back, so it is not told
    assert metrics.events == [
        ("charged", "forecast", 2),
        ("charged", "score", 1),
        ("refunded", "score", 1),
    ]


def test_nothing_is_told_of_a_charge_that_does_not_fit() -> None:
    metrics = Recorded()
    policy = Policy(credits=CreditLimits(monthly=1, daily=1))
    core = CleanAir(MemoryStore(), TokenKeys(generate()), policy, ManualClock(NOW), metrics=metrics)
    with pytest.raises(CreditsExhausted), core.charge(ALICE, Billable.FORECAST):
        pass
    assert metrics.events == []


def test_a_429_names_the_limit_in_the_contracts_words() -> None:
    assert RateLimited(5).limit is Limit.RATE_LIMIT
    limits = CreditLimits(monthly=10, daily=3)
    with pytest.raises(CreditsExhausted) as day:
        check_fits(Usage(month=3, day=3), 1, limits, NOW)
    assert day.value.limit is Limit.DAILY_BURST
    with pytest.raises(CreditsExhausted) as month:
        check_fits(Usage(month=10, day=0), 1, limits, NOW)
    assert month.value.limit is Limit.MONTHLY_POOL
    assert [limit.value for limit in Limit] == ["rate_limit", "daily_burst", "monthly_pool"]


def test_the_default_drops_every_event() -> None:
    assert CleanAir(MemoryStore(), TokenKeys(generate())).metrics is NO_METRICS
    NO_METRICS.credits_charged("score", 1)
    NO_METRICS.upstream_request(Upstream.ICHNAEA, 0.1, failed=True)


def generate() -> bytes:
    return b"metrics-port-tests-server-key-32b"


class DirtyAir:
    """NO2 in the EAQI's "Very poor" band everywhere."""

    update_interval = 3600

    async def concentrations(self, samples: Sequence[Sample]) -> list[Concentrations]:
        return [{Pollutant.NO2: 120.0, Pollutant.PM25: 2.0} for _ in samples]


class Answering:
    """A webhook sender whose receiver answers 200 at once."""

    async def send(self, delivery: Delivery) -> Outcome:
        return Outcome(OutcomeKind.DELIVERED, "status 200", status=200)

    async def aclose(self) -> None:
        pass


def test_alerts_recorded_delivered_and_their_lag() -> None:
    metrics = Recorded()
    clock = ManualClock(NOW.replace(minute=7))
    store = MemoryStore()
    keys = TokenKeys(generate())
    core = CleanAir(store, keys, clock=clock, sources=Sources(DirtyAir()), metrics=metrics)
    core.add_user("alice")
    store.add_subscription(
        Subscription(
            id=uuid.uuid4(),
            owner="alice",
            connection_id="c1",
            created_at=NOW,
            target=Place(Point(60.17, 24.94)),
            index="eu_eaqi_2024",
            threshold=3,
            direction=Direction.WORSE,
            audience=Audience.GENERAL,
            kind=Observed(),
            timezone="UTC",
            webhook_url="https://hooks.example.com/cleanair",
        )
    )
    assert asyncio.run(core.evaluate_alerts("worker")).recorded == 1
    clock.advance(30)
    settings = DeliverySettings(claimant="worker")
    assert asyncio.run(core.deliver_alerts(Answering(), settings)).delivered == 1
    # The alert tells of the hour that ended at 09:00; it went out at 09:07:30.
    assert metrics.events[-3:] == [
        ("alert events", "recorded", 1),
        ("alert deliveries", "delivered", 1),
        ("alert lag", 450.0),
    ]

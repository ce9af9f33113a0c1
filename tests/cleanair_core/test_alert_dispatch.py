"""The delivery loop's pass on the in-memory store with a scripted sender: claimed deliveries
signed with the subscription's secrets and sent at most `concurrency` at once, each outcome
recorded (delivered, due again, given up), subscriptions disabled by the rules with their other
deliveries given up, and every storage call made off the event loop.

The real sender against a real receiver process: tests/cleanair_sources/test_alert_delivery.py.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import attrs
import pytest

from cleanair_core.alerts.delivery import Delivery, Outcome, OutcomeKind
from cleanair_core.alerts.dispatch import (
    DeliveryCounts,
    DeliverySettings,
    DeliveryStore,
    deliver_due,
)
from cleanair_core.alerts.events import AlertEvent, EventKind, observed_event_id
from cleanair_core.alerts.messages import event_message
from cleanair_core.alerts.outbox import DeliveryState, NewEvent
from cleanair_core.alerts.signatures import sign
from cleanair_core.alerts.subscriptions import Subscription
from cleanair_core.alerts.webhook_secrets import webhook_secret
from cleanair_core.clock import ManualClock
from cleanair_core.keys import TokenKeys
from cleanair_core.offload import Offload, inline
from cleanair_storage.memory import MemoryStore
from support.subscriptions import make_subscription

T = TypeVar("T")
START = datetime(2026, 11, 28, 9, 10, tzinfo=UTC)
KEYS = TokenKeys(b"delivery-test-server-key-32-bytes!")
SETTINGS = DeliverySettings(claimant="worker-1")
OK = Outcome(OutcomeKind.DELIVERED, "status 200", 200)
UNAVAILABLE = Outcome(OutcomeKind.RETRY, "status 503", 503)
NOT_FOUND = Outcome(OutcomeKind.FAILED, "status 404", 404)
GONE = Outcome(OutcomeKind.GONE, "status 410", 410)


@attrs.define
class ScriptedSender:
    """A `WebhookSender` answering each delivery with the next outcome of `script` (the last
    one once it runs out), recording what it was sent and how many were in flight at once.
    `during` runs inside each send, as a receiver that takes its time would."""

    script: list[Outcome] = attrs.Factory(lambda: [OK])
    sent: list[Delivery] = attrs.Factory(list)
    in_flight: int = 0
    most_in_flight: int = 0
    during: Callable[[], None] | None = None

    async def send(self, delivery: Delivery) -> Outcome:
        self.sent.append(delivery)
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            for _ in range(5):  # let every other send start meanwhile
                await asyncio.sleep(0)
            if self.during is not None:
                self.during()
        finally:
            self.in_flight -= 1
        return self.script.pop(0) if len(self.script) > 1 else self.script[0]

    async def aclose(self) -> None:
        pass


def record(store: MemoryStore, subscription: Subscription, episode: int, at: datetime) -> uuid.UUID:
    """Record an observed alert of `subscription` as the evaluator will: its body and the
    delivery owed to its webhook."""
    event = AlertEvent(
        id=observed_event_id(subscription.id, episode, EventKind.ALERT),
        kind=EventKind.ALERT,
        subscription_id=subscription.id,
        category=4,
        decided_at=at,
        due_at=at,
        hour=at.replace(minute=0),
        episode=episode,
    )
    store.record_alert_events(
        [
            NewEvent(
                event_id=event.id,
                owner=subscription.owner,
                subscription_id=subscription.id,
                payload=event_message(subscription, event),
                created_at=at,
                url=subscription.webhook_url,
            )
        ]
    )
    return event.id


@attrs.define
class World:
    store: MemoryStore
    clock: ManualClock
    subscription: Subscription
    sender: ScriptedSender

    async def run(
        self,
        settings: DeliverySettings = SETTINGS,
        offload: Offload = inline,
        store: DeliveryStore | None = None,
    ) -> DeliveryCounts:
        """The pass's counts, without the lags (`test_a_delivery_reports_its_lag...`)."""
        counts = await deliver_due(
            store or self.store,
            self.sender,
            KEYS,
            self.clock,
            offload,
            settings,
            random=lambda: 0.5,
        )
        assert len(counts.lags) == counts.delivered
        return attrs.evolve(counts, lags=())

    def state(self, event_id: uuid.UUID) -> tuple[DeliveryState, int, str | None]:
        owed = self.store.owed_delivery(event_id)
        assert owed is not None
        return owed.state, owed.attempts, owed.last_error


def world(*script: Outcome, subscription: Subscription | None = None) -> World:
    store = MemoryStore()
    subscription = subscription or make_subscription()
    store.add_subscription(subscription)
    return World(store, ManualClock(START), subscription, ScriptedSender(list(script) or [OK]))


def headers_of(delivery: Delivery) -> dict[str, str]:
    return dict(delivery.headers)


def test_a_delivery_reports_its_lag_from_the_observed_hour_or_its_recording() -> None:
    w = world(OK)
    decided = START.replace(minute=7)
    record(w.store, w.subscription, 1, decided)  # its hour ended at START.replace(minute=0)
    notice = uuid.uuid4()
    w.store.record_alert_events(
        [
            NewEvent(
                event_id=notice,
                owner=w.subscription.owner,
                subscription_id=w.subscription.id,
                payload='{"data":{"kind":"pool_exhausted"},"type":"alerts.pool_exhausted"}',
                created_at=decided,
                url=w.subscription.webhook_url,
            )
        ]
    )
    w.clock.set(decided + timedelta(seconds=30))
    counts = asyncio.run(
        deliver_due(w.store, w.sender, KEYS, w.clock, inline, SETTINGS, random=lambda: 0.5)
    )
    since_hour = (decided - START.replace(minute=0)).total_seconds() + 30
    assert sorted(counts.lags) == [30.0, since_hour]


def test_a_due_delivery_is_signed_sent_and_recorded_delivered() -> None:
    w = world(OK)
    event_id = record(w.store, w.subscription, 1, START)
    assert asyncio.run(w.run()) == DeliveryCounts(delivered=1)
    [sent] = w.sender.sent
    owed = w.store.owed_delivery(event_id)
    assert owed is not None
    assert sent.url == w.subscription.webhook_url
    assert sent.body == owed.payload.encode()
    secret = webhook_secret(KEYS, w.subscription.id, 1)
    assert headers_of(sent) == {
        "content-type": "application/json",
        **sign([secret], f"msg_{event_id}", START, sent.body),
    }
    assert w.state(event_id) == (DeliveryState.DELIVERED, 1, None)
    # Nothing is due any more: the next pass does nothing.
    assert asyncio.run(w.run()) == DeliveryCounts()
    assert len(w.sender.sent) == 1


def test_the_signature_verifies_with_the_reference_library() -> None:
    from standardwebhooks.webhooks import Webhook

    w = world(OK)
    w.clock.set(datetime.now(UTC))  # the library checks the timestamp against its own clock
    record(w.store, w.subscription, 1, w.clock.now())
    asyncio.run(w.run())
    [sent] = w.sender.sent
    secret = webhook_secret(KEYS, w.subscription.id, 1).as_text()
    Webhook(secret).verify(sent.body, headers_of(sent), json_parse=False)


def test_a_failed_attempt_is_due_again_and_resent_with_the_same_id_and_body() -> None:
    w = world(UNAVAILABLE, OK)
    event_id = record(w.store, w.subscription, 1, START)
    assert asyncio.run(w.run()) == DeliveryCounts(retried=1)
    assert w.state(event_id) == (DeliveryState.PENDING, 1, "status 503")
    owed = w.store.owed_delivery(event_id)
    assert owed is not None
    assert owed.next_attempt_at == START + timedelta(seconds=5)  # the first back-off
    # Not yet due: nothing is sent.
    w.clock.advance(4)
    assert asyncio.run(w.run()) == DeliveryCounts()
    w.clock.advance(1)
    assert asyncio.run(w.run()) == DeliveryCounts(delivered=1)
    first, second = w.sender.sent
    assert headers_of(first)["webhook-id"] == headers_of(second)["webhook-id"] == f"msg_{event_id}"
    assert first.body == second.body
    # Each attempt is signed at its own time.
    assert headers_of(second)["webhook-timestamp"] == str(int(w.clock.now().timestamp()))
    assert w.state(event_id) == (DeliveryState.DELIVERED, 2, None)


def test_retry_after_puts_the_next_attempt_no_earlier() -> None:
    w = world(Outcome(OutcomeKind.RETRY, "status 429", 429, retry_after=120.0))
    event_id = record(w.store, w.subscription, 1, START)
    asyncio.run(w.run())
    owed = w.store.owed_delivery(event_id)
    assert owed is not None
    assert owed.next_attempt_at == START + timedelta(seconds=120)


def test_during_a_rotation_both_secrets_sign() -> None:
    w = world(OK)
    rotated = w.store.rotate_subscription_secret(
        w.subscription.id, w.subscription.owner, START + timedelta(days=1)
    )
    assert rotated is not None
    event_id = record(w.store, w.subscription, 1, START)
    asyncio.run(w.run())
    new, old = (webhook_secret(KEYS, w.subscription.id, g) for g in (2, 1))
    [sent] = w.sender.sent
    assert headers_of(sent) == {
        "content-type": "application/json",
        **sign([new, old], f"msg_{event_id}", START, sent.body),
    }


def test_410_gone_disables_the_subscription_and_gives_up_its_other_deliveries() -> None:
    w = world(GONE)
    first = record(w.store, w.subscription, 1, START)
    later = record(w.store, w.subscription, 2, START + timedelta(minutes=1))
    other = make_subscription("bob")
    w.store.add_subscription(other)
    others = record(w.store, other, 1, START + timedelta(minutes=1))
    w.clock.advance(minutes=1)
    # One at a time: the first delivery's 410 comes before the second is sent.
    counts = asyncio.run(w.run(DeliverySettings(claimant="worker-1", batch=1)))
    assert counts == DeliveryCounts(failed=1, disabled=1)
    assert w.state(first) == (DeliveryState.FAILED, 1, "status 410")
    assert w.state(later) == (DeliveryState.FAILED, 0, "subscription disabled")
    stored = w.store.get_subscription(w.subscription.id, w.subscription.owner)
    assert stored is not None
    assert stored.disabled is not None
    assert stored.disabled.reason == (
        "the webhook answered 410 Gone, asking for no more deliveries"
    )
    assert stored.disabled.at == w.clock.now()
    # Another subscription's delivery is untouched, and goes out next.
    assert w.state(others) == (DeliveryState.PENDING, 0, None)
    w.sender.script = [OK]
    assert asyncio.run(w.run()) == DeliveryCounts(delivered=1)
    assert len(w.sender.sent) == 2


def test_two_deliveries_gone_in_one_pass_disable_once() -> None:
    w = world(GONE)
    record(w.store, w.subscription, 1, START)
    record(w.store, w.subscription, 2, START)
    # Sent together: the first 410 recorded disables the subscription and gives the other
    # delivery up, so the other's own 410 finds it given up already.
    assert asyncio.run(w.run()) == DeliveryCounts(failed=1, disabled=1, lost=1)
    assert len(w.sender.sent) == 2


def test_one_404_is_retried_and_five_in_a_row_disable() -> None:
    w = world(NOT_FOUND)
    event_id = record(w.store, w.subscription, 1, START)
    for attempt in range(1, 5):
        assert asyncio.run(w.run()) == DeliveryCounts(retried=1)
        assert w.state(event_id) == (DeliveryState.PENDING, attempt, "status 404")
        stored = w.store.get_subscription(w.subscription.id, w.subscription.owner)
        assert stored is not None
        assert stored.disabled is None
        w.clock.advance(hours=1)
    assert asyncio.run(w.run()) == DeliveryCounts(failed=1, disabled=1)
    stored = w.store.get_subscription(w.subscription.id, w.subscription.owner)
    assert stored is not None
    assert stored.disabled is not None
    assert stored.disabled.reason == "the webhook failed 5 attempts in a row (last: status 404)"


def test_a_day_of_failures_gives_up_and_disables() -> None:
    w = world(UNAVAILABLE)
    event_id = record(w.store, w.subscription, 1, START)
    passes = 0
    while w.state(event_id)[0] is DeliveryState.PENDING:
        owed = w.store.owed_delivery(event_id)
        assert owed is not None
        w.clock.set(max(w.clock.now(), owed.next_attempt_at))
        asyncio.run(w.run())
        passes += 1
        assert passes < 50
    assert w.state(event_id) == (DeliveryState.FAILED, passes, "status 503")
    assert w.clock.now() == START + timedelta(hours=24)  # the last attempt at the day's end
    stored = w.store.get_subscription(w.subscription.id, w.subscription.owner)
    assert stored is not None
    assert stored.disabled is not None
    assert stored.disabled.reason == (
        "the webhook failed every attempt for 24 hours (last: status 503)"
    )


def test_a_disabled_or_deleted_subscriptions_delivery_is_not_sent() -> None:
    w = world(OK)
    disabled = record(w.store, w.subscription, 1, START)
    w.store.disable_subscription(w.subscription.id, "disabled by an operator", START)
    deleted_subscription = make_subscription("carol")
    w.store.add_subscription(deleted_subscription)
    deleted = record(w.store, deleted_subscription, 1, START)
    w.store.delete_subscription(deleted_subscription.id, "carol")
    assert asyncio.run(w.run()) == DeliveryCounts(failed=2)
    assert w.sender.sent == []
    assert w.state(disabled) == (DeliveryState.FAILED, 1, "subscription disabled")
    assert w.state(deleted) == (DeliveryState.FAILED, 1, "subscription deleted")


def test_deliveries_go_out_concurrently_within_the_bound() -> None:
    w = world(OK)
    for episode in range(1, 8):
        record(w.store, w.subscription, episode, START)
    settings = DeliverySettings(claimant="worker-1", concurrency=3)
    assert asyncio.run(w.run(settings)) == DeliveryCounts(delivered=7)
    assert w.sender.most_in_flight == 3


def test_a_pass_claims_at_most_its_batch() -> None:
    w = world(OK)
    for episode in range(1, 6):
        record(w.store, w.subscription, episode, START)
    settings = DeliverySettings(claimant="worker-1", batch=2)
    assert asyncio.run(w.run(settings)) == DeliveryCounts(delivered=2)
    assert asyncio.run(w.run(settings)) == DeliveryCounts(delivered=2)
    assert asyncio.run(w.run(settings)) == DeliveryCounts(delivered=1)


def test_an_outcome_after_the_lease_passed_to_another_worker_is_not_recorded() -> None:
    w = world(UNAVAILABLE)
    event_id = record(w.store, w.subscription, 1, START)
    settings = DeliverySettings(claimant="worker-1", lease=timedelta(seconds=30))

    def slow_receiver() -> None:
        # The attempt outlives its lease and another worker takes the delivery over.
        later = w.clock.advance(31)
        assert w.store.claim_deliveries("worker-2", later, later + timedelta(minutes=5), 10)

    w.sender.during = slow_receiver
    assert asyncio.run(w.run(settings)) == DeliveryCounts(lost=1)
    assert w.state(event_id) == (DeliveryState.PENDING, 0, None)


class OffLoopStore:
    """The store, failing any call made where an event loop runs (on the loop's thread)."""

    def __init__(self, store: MemoryStore) -> None:
        self._store = store
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._store, name)
        if not callable(found):
            return found

        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                asyncio.get_running_loop()
            except RuntimeError:
                self.calls.append(name)
                return found(*args, **kwargs)
            raise AssertionError(f"store.{name} called on the event loop")

        return call


async def in_thread(work: Callable[[], T], /) -> T:
    return await asyncio.to_thread(work)


@pytest.mark.parametrize("script", [[OK], [UNAVAILABLE], [GONE]])
def test_every_storage_call_runs_on_the_offload(script: Sequence[Outcome]) -> None:
    w = world(*script)
    record(w.store, w.subscription, 1, START)
    store = OffLoopStore(w.store)
    asyncio.run(w.run(offload=in_thread, store=store))
    assert "claim_deliveries" in store.calls
    assert "transaction" in store.calls
    with pytest.raises(AssertionError, match="on the event loop"):
        asyncio.run(w.run(store=store))

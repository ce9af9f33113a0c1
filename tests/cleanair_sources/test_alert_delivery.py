"""The delivery loop with the real HTTP sender against the real receiver process: a receiver
answering 500 then 200 gets the event twice, with the same `webhook-id` and body, and each
request verifies with the Standard Webhooks reference library (issue 32's "Measured by")."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

import pytest

from cleanair_core.alerts.destinations import DestinationPolicy, parse_networks
from cleanair_core.alerts.dispatch import DeliveryCounts, DeliverySettings, deliver_due
from cleanair_core.alerts.events import AlertEvent, EventKind, observed_event_id
from cleanair_core.alerts.messages import event_message
from cleanair_core.alerts.outbox import DeliveryState, NewEvent
from cleanair_core.alerts.webhook_secrets import webhook_secret
from cleanair_core.clock import ManualClock
from cleanair_core.keys import TokenKeys
from cleanair_sources.webhook_sender import HttpWebhookSender
from cleanair_storage.memory import MemoryStore
from support.subscriptions import make_subscription
from support.webhook_receiver import running_receiver

pytestmark = pytest.mark.e2e

T = TypeVar("T")
KEYS = TokenKeys(b"delivery-test-server-key-32-bytes!")
# The receiver listens on loopback over plain HTTP on a port the system chose: allowed here,
# as an operator allows an internal network, and nowhere by default.
LOOPBACK_ALLOWED = DestinationPolicy(
    allow_http=True, allowed_ports=None, allowed_networks=parse_networks(["127.0.0.0/8"])
)
# Generous: the machine is shared and loaded.
DEADLINE = 30.0


async def in_thread(work: Callable[[], T], /) -> T:
    return await asyncio.to_thread(work)


def test_a_receiver_failing_once_gets_the_event_twice_with_one_id(tmp_path: Path) -> None:
    with running_receiver(tmp_path / "receiver") as receiver:
        store = MemoryStore()
        subscription = make_subscription(webhook_url=receiver.url)
        store.add_subscription(subscription)
        secret = webhook_secret(KEYS, subscription.id, subscription.secret_generation)
        receiver.configure([secret.as_text()], failures=1, status=500)
        # The receiver's library checks each timestamp against its own, real clock: the
        # loop's clock starts there and is moved only seconds.
        clock = ManualClock(datetime.now(UTC))
        event = AlertEvent(
            id=observed_event_id(subscription.id, 1, EventKind.ALERT),
            kind=EventKind.ALERT,
            subscription_id=subscription.id,
            category=4,
            decided_at=clock.now(),
            due_at=clock.now(),
            episode=1,
        )
        payload = event_message(subscription, event)
        store.record_alert_events(
            [
                NewEvent(
                    event_id=event.id,
                    owner=subscription.owner,
                    subscription_id=subscription.id,
                    payload=payload,
                    created_at=clock.now(),
                    url=subscription.webhook_url,
                )
            ]
        )
        sender = HttpWebhookSender(LOOPBACK_ALLOWED, deadline=DEADLINE, clock=clock)
        settings = DeliverySettings(claimant=f"worker-{uuid.uuid4()}")

        async def delivery_pass() -> DeliveryCounts:
            return await deliver_due(
                store, sender, KEYS, clock, in_thread, settings, random=lambda: 0.5
            )

        assert asyncio.run(delivery_pass()) == DeliveryCounts(retried=1)
        clock.advance(5)  # the first back-off, without its jitter
        # Delivered 5 s after the event was recorded (this alert names no observed hour).
        assert asyncio.run(delivery_pass()) == DeliveryCounts(delivered=1, lags=(5.0,))
        asyncio.run(sender.aclose())

        got = receiver.wait_for(2)
    assert [(d.status, d.verified, d.reason) for d in got] == [(500, True, None), (200, True, None)]
    assert {d.webhook_id for d in got} == {f"msg_{event.id}"}
    assert [d.body for d in got] == [payload, payload]
    owed = store.owed_delivery(event.id)
    assert owed is not None
    assert (owed.state, owed.attempts, owed.last_error) == (DeliveryState.DELIVERED, 2, None)

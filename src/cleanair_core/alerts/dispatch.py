"""The delivery loop's one pass: claim the webhook deliveries due, sign and send them, and
record what came of each (issue 32; docs/alerts.md, "Delivery").

A pass leases up to `batch` due deliveries from the outbox (another worker's claim never
overlaps it; a worker killed mid-pass leaves them to the next claim once the lease ends),
signs each at the moment it is sent, with the subscription's current secret and, during a
rotation's overlap, its previous one (`webhook_secrets.signing_secrets`), sends at most
`concurrency` at once through the `WebhookSender`, and records each attempt with the
verdict of `retries.decide`: delivered, due again later, or given up, disabling the
subscription and giving up its other deliveries when the rules say so.

Every request of one event carries the same body (the payload recorded with it) and the
same `webhook-id` (`msg_` and the event id): a receiver de-duplicates on it whatever a crash
or a lost lease made the outbox send twice. The storage calls are synchronous and may wait
for a lock: they run on the `Offload` given (a thread, in the service), never on the event
loop.
"""

from __future__ import annotations

import asyncio
import json
import random as random_module
import uuid
from collections.abc import Mapping
from contextlib import AbstractContextManager
from datetime import datetime, timedelta
from typing import Protocol

import attrs

from cleanair_core.alerts.delivery import Delivery, WebhookSender
from cleanair_core.alerts.outbox import AlertOutbox, DeliveryState, OwedDelivery
from cleanair_core.alerts.retries import (
    DEFAULT_POLICY,
    Decision,
    Random,
    RetryPolicy,
    Verdict,
    decide,
)
from cleanair_core.alerts.signatures import message_id, sign
from cleanair_core.alerts.subscriptions import Subscription, SubscriptionStore
from cleanair_core.alerts.webhook_secrets import signing_secrets
from cleanair_core.clock import Clock
from cleanair_core.keys import TokenKeys
from cleanair_core.offload import Offload

CONTENT_TYPE = ("content-type", "application/json")


class DeliveryStore(AlertOutbox, SubscriptionStore, Protocol):
    """What the delivery loop needs of the store: the outbox, the subscriptions (their
    secret generations; disabling) and a unit of work over both."""

    def transaction(self) -> AbstractContextManager[DeliveryStore]:
        """A unit of work: the calls made on the store it yields are one atomic transaction
        (see `cleanair_core.ports.Store.transaction`)."""
        ...


@attrs.frozen(kw_only=True)
class DeliverySettings:
    """One worker's delivery loop: its `claimant` name (unique per worker), how many
    deliveries a pass claims and sends at once, and the lease, which must outlast a pass
    (`batch / concurrency` rounds of the sender's deadline, 5 s by default)."""

    claimant: str
    batch: int = attrs.field(default=32, validator=attrs.validators.ge(1))
    concurrency: int = attrs.field(default=8, validator=attrs.validators.ge(1))
    lease: timedelta = timedelta(minutes=5)
    policy: RetryPolicy = DEFAULT_POLICY


@attrs.frozen
class DeliveryCounts:
    """What a pass did, for metrics: attempts delivered, due again (retried), given up
    (failed: including deliveries of a subscription deleted or disabled meanwhile, never
    sent), subscriptions disabled, and attempts whose outcome was not recorded because the
    delivery had moved on meanwhile (lost): its lease passed to another worker, whose record
    stands, or another attempt of the pass disabled its subscription and gave it up."""

    delivered: int = 0
    retried: int = 0
    failed: int = 0
    disabled: int = 0
    lost: int = 0
    #: For each delivery delivered, the seconds from the data it tells of (`data_lag`).
    lags: tuple[float, ...] = ()

    def __add__(self, other: DeliveryCounts) -> DeliveryCounts:
        return DeliveryCounts(
            self.delivered + other.delivered,
            self.retried + other.retried,
            self.failed + other.failed,
            self.disabled + other.disabled,
            self.lost + other.lost,
            self.lags + other.lags,
        )


def data_lag(owed: OwedDelivery, delivered_at: datetime) -> float:
    """Seconds from the data an event tells of to its delivery at `delivered_at`: from the
    end of the observed hour for an episode's alert or all-clear (the lag a subscriber
    feels), from the event's recording for the others (a forecast, a notice)."""
    since = owed.created_at
    try:
        hour = json.loads(owed.payload)["data"].get("hour")
        if isinstance(hour, str):
            since = datetime.fromisoformat(hour)
    except (ValueError, KeyError, TypeError, AttributeError):
        pass  # a body of another shape: the recording's time stands
    return max((delivered_at - since).total_seconds(), 0.0)


async def deliver_due(
    store: DeliveryStore,
    sender: WebhookSender,
    keys: TokenKeys,
    clock: Clock,
    offload: Offload,
    settings: DeliverySettings,
    random: Random = random_module.random,
) -> DeliveryCounts:
    """One pass of the delivery loop: claim the deliveries due now, send them, record each
    outcome. Returns what it did; nothing claimed is nothing done (the caller waits)."""
    now = clock.now()
    claimed = await offload(
        lambda: store.claim_deliveries(settings.claimant, now, now + settings.lease, settings.batch)
    )
    if not claimed:
        return DeliveryCounts()
    owners = {(owed.subscription_id, owed.owner) for owed in claimed}
    subscriptions = await offload(
        lambda: {sid: store.get_subscription(sid, owner) for sid, owner in owners}
    )
    gate = asyncio.Semaphore(settings.concurrency)

    async def one(owed: OwedDelivery) -> DeliveryCounts:
        async with gate:
            return await _deliver(
                owed, subscriptions, store, sender, keys, clock, offload, settings, random
            )

    results = await asyncio.gather(*(one(owed) for owed in claimed))
    total = DeliveryCounts()
    for counts in results:
        total += counts
    return total


async def _deliver(
    owed: OwedDelivery,
    subscriptions: Mapping[uuid.UUID, Subscription | None],
    store: DeliveryStore,
    sender: WebhookSender,
    keys: TokenKeys,
    clock: Clock,
    offload: Offload,
    settings: DeliverySettings,
    random: Random,
) -> DeliveryCounts:
    subscription = subscriptions.get(owed.subscription_id)
    if subscription is None or subscription.disabled is not None:
        # Deleted or disabled since the event was recorded (a race with `abandon_deliveries`):
        # nothing is sent to an endpoint its owner or the rules have stopped.
        why = "subscription deleted" if subscription is None else "subscription disabled"
        decision = Decision(Verdict.GIVE_UP, error=why)
        return await offload(lambda: _record(store, owed, settings.claimant, decision, clock))
    outcome = await sender.send(_request(owed, subscription, keys, clock))
    decision = decide(
        outcome,
        recorded_at=owed.created_at,
        failed_before=owed.attempts,
        now=clock.now(),
        random=random,
        policy=settings.policy,
    )
    return await offload(lambda: _record(store, owed, settings.claimant, decision, clock))


def _request(
    owed: OwedDelivery, subscription: Subscription, keys: TokenKeys, clock: Clock
) -> Delivery:
    """The attempt's request, signed now: the Standard Webhooks timestamp is the attempt's,
    so a receiver refusing old requests (5 minutes, in the reference libraries) accepts a
    retry a day later."""
    at = clock.now()
    secrets = signing_secrets(
        keys,
        subscription.id,
        subscription.secret_generation,
        subscription.previous_generation_until,
        at,
    )
    body = owed.payload.encode("utf-8")
    headers = sign(secrets, message_id(str(owed.event_id)), at, body)
    return Delivery(owed.url, (CONTENT_TYPE, *headers.items()), body)


def _record(
    store: DeliveryStore, owed: OwedDelivery, claimant: str, decision: Decision, clock: Clock
) -> DeliveryCounts:
    """Write one attempt's verdict; when it disables the subscription, in the same unit of
    work, so no crash leaves a delivery given up for a reason its subscription does not
    show."""
    at = clock.now()
    with store.transaction() as unit:
        if decision.verdict is Verdict.DELIVERED:
            if not unit.finish_delivery(owed.event_id, claimant, DeliveryState.DELIVERED, at):
                return DeliveryCounts(lost=1)
            return DeliveryCounts(delivered=1, lags=(data_lag(owed, at),))
        if decision.verdict is Verdict.RETRY:
            finished = unit.finish_delivery(
                owed.event_id,
                claimant,
                DeliveryState.PENDING,
                at,
                next_attempt_at=decision.next_attempt_at,
                error=decision.error,
            )
            return DeliveryCounts(retried=1) if finished else DeliveryCounts(lost=1)
        if not unit.finish_delivery(
            owed.event_id, claimant, DeliveryState.FAILED, at, error=decision.error
        ):
            return DeliveryCounts(lost=1)
        if decision.disable is None:
            return DeliveryCounts(failed=1)
        if not unit.disable_subscription(owed.subscription_id, decision.disable, at):
            return DeliveryCounts(failed=1)  # already disabled (another delivery, an operator)
        unit.abandon_deliveries(owed.subscription_id, at, "subscription disabled")
        return DeliveryCounts(failed=1, disabled=1)

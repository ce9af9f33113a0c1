"""Alert subscription use cases (issue 32): create, list, show, delete and rotate a
subscription's webhook secret, for the user behind a user-owned connection.

Free of credits (the events they lead to are what costs) and rate limited as any call, by
the caller's admission. The webhook secret is derived, never stored
(`alerts.webhook_secrets`): it is returned here only at creation and at rotation, for the
HTTP layer to show once.
"""

from __future__ import annotations

import uuid
from datetime import datetime, time, timedelta

import attrs

from cleanair_core.access.connections import Authorized, Caller
from cleanair_core.access.scopes import Scope
from cleanair_core.alerts.events import Direction
from cleanair_core.alerts.quiet_hours import QuietHours
from cleanair_core.alerts.signatures import SigningSecret
from cleanair_core.alerts.subscriptions import (
    MAX_SUBSCRIPTIONS_PER_USER,
    Audience,
    Kind,
    Subscription,
    Target,
    Trip,
    check_subscription,
)
from cleanair_core.alerts.webhook_secrets import webhook_secret
from cleanair_core.errors import NotFound, Unprocessable, Violation
from cleanair_core.use_cases.context import Context

#: How long the previous secret goes on signing beside the new one after a rotation: a day
#: leaves a receiver's operator time to deploy the new secret in working hours wherever they
#: are, and is short enough that a secret rotated because it leaked stops working soon.
ROTATION_OVERLAP = timedelta(hours=24)

_SAME_QUIET_TIMES = Violation("quiet_hours.end", "invalid", "must differ from start")
_NO_WEBHOOK = Violation(
    "", "invalid", "must be a subscription with a webhook_url: a feed-only one has no secret"
)


@attrs.frozen(kw_only=True)
class NewSubscription:
    """What a user asks to be alerted about: a `Subscription` before it has an id, an owner
    and a creation time. `quiet_hours` is the (start, end) of the daily quiet period."""

    target: Target
    index: str | None
    threshold: int
    direction: Direction
    audience: Audience
    kind: Kind
    timezone: str
    quiet_hours: tuple[time, time] | None = None
    webhook_url: str | None = None


@attrs.frozen
class CreatedSubscription:
    """A new subscription, and its webhook secret when it has a webhook (shown this once)."""

    subscription: Subscription
    secret: SigningSecret | None


@attrs.frozen
class RotatedSecret:
    """A subscription after a rotation, its new secret, and until when the previous secret
    signs beside it."""

    subscription: Subscription
    secret: SigningSecret
    previous_until: datetime


def create_subscription(
    ctx: Context, proof: Authorized, new: NewSubscription
) -> CreatedSubscription:
    """Store a subscription for the caller's user, made by the caller's connection (free).

    Takes a proof from `authorize(caller, Scope.AQ_READ, user_owned=True)`; a trip also
    needs `Scope.ROUTES_PLAN` (MissingScope), since its alerts plan departures. Raises
    Unprocessable naming every rule the subscription breaks (`check_subscription`, with the
    operator's webhook destination policy), TooManySubscriptions when the user already holds
    `MAX_SUBSCRIPTIONS_PER_USER`.
    """
    caller = proof.caller_for(Scope.AQ_READ, user_owned=True)
    if isinstance(new.target, Trip):
        caller.require_scope(Scope.ROUTES_PLAN)
    quiet, violations = _quiet_hours(new.quiet_hours)
    subscription = Subscription(
        id=uuid.uuid4(),
        owner=caller.owner.name,
        connection_id=caller.connection_key,
        created_at=ctx.now(),
        target=new.target,
        index=new.index,
        threshold=new.threshold,
        direction=new.direction,
        audience=new.audience,
        kind=new.kind,
        timezone=new.timezone,
        quiet_hours=quiet,
        webhook_url=new.webhook_url,
    )
    try:
        check_subscription(subscription, ctx.policy.webhook_destinations)
    except Unprocessable as refused:
        violations += refused.violations
    if violations:
        raise Unprocessable(violations=violations)
    ctx.store.add_subscription(subscription, MAX_SUBSCRIPTIONS_PER_USER)
    return CreatedSubscription(subscription, _current_secret(ctx, subscription))


def list_subscriptions(ctx: Context, proof: Authorized) -> list[Subscription]:
    """The caller's user's subscriptions, oldest first (free; any of the user's
    connections sees them all, as with route plans)."""
    return ctx.store.list_subscriptions(_owner(proof))


def get_subscription(ctx: Context, proof: Authorized, subscription_id: uuid.UUID) -> Subscription:
    """The caller's user's subscription `subscription_id`; NotFound for an unknown one or
    another user's (indistinguishable, on purpose)."""
    found = ctx.store.get_subscription(subscription_id, _owner(proof))
    if found is None:
        raise NotFound()
    return found


#: Why the deliveries of a deleted subscription were given up (an operator reads it).
DELETED_ERROR = "subscription deleted"


def delete_subscription(ctx: Context, proof: Authorized, subscription_id: uuid.UUID) -> None:
    """Delete the caller's user's subscription `subscription_id` and its evaluator state,
    and give up the deliveries still owed for it (its events stay in the feed); NotFound as
    `get_subscription`."""
    owner = _owner(proof)
    with ctx.store.transaction() as tx:
        if not tx.delete_subscription(subscription_id, owner):
            raise NotFound()
        tx.abandon_deliveries(subscription_id, ctx.now(), DELETED_ERROR)


def rotate_secret(ctx: Context, proof: Authorized, subscription_id: uuid.UUID) -> RotatedSecret:
    """Move the caller's user's subscription to a new webhook secret; the previous one signs
    beside it for `ROTATION_OVERLAP`. NotFound as `get_subscription`; Unprocessable for a
    feed-only subscription, which has no secret."""
    owner = _owner(proof, premium=True)
    found = ctx.store.get_subscription(subscription_id, owner)
    if found is None:
        raise NotFound()
    if found.webhook_url is None:
        raise Unprocessable(violations=[_NO_WEBHOOK])
    previous_until = ctx.now() + ROTATION_OVERLAP
    rotated = ctx.store.rotate_subscription_secret(subscription_id, owner, previous_until)
    if rotated is None:  # deleted since it was read
        raise NotFound()
    secret = webhook_secret(ctx.keys, rotated.id, rotated.secret_generation)
    return RotatedSecret(rotated, secret, previous_until)


def _owner(proof: Authorized, *, premium: bool = False) -> str:
    caller: Caller = proof.caller_for(Scope.AQ_READ, premium=premium, user_owned=True)
    return caller.owner.name


def _current_secret(ctx: Context, subscription: Subscription) -> SigningSecret | None:
    if subscription.webhook_url is None:
        return None
    return webhook_secret(ctx.keys, subscription.id, subscription.secret_generation)


def _quiet_hours(times: tuple[time, time] | None) -> tuple[QuietHours | None, list[Violation]]:
    if times is None:
        return None, []
    start, end = times
    if start == end:
        return None, [_SAME_QUIET_TIMES]
    try:
        return QuietHours(start, end), []
    except ValueError:  # a time with a zone: only local wall-clock times are quiet hours
        return None, [Violation("quiet_hours", "format", "must be local times without a zone")]

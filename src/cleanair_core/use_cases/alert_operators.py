"""Alert subscriptions for operators (`cleanair alerts`, issue 32; docs/alerts.md,
"Operators"): every user's subscriptions, one by id whoever its owner, and disabling one with
a reason its owner reads.

Unlike the user's use cases (`alerts`) these take no proof: only the operator's CLI, on the
database itself, calls them.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import attrs

from cleanair_core.alerts.subscriptions import Status, Subscription
from cleanair_core.errors import OperatorError
from cleanair_core.use_cases.context import Context

#: Subscriptions read per store call while listing every user's: a listing of any length
#: holds one page at a time.
PAGE_SIZE = 500
#: The longest reason an operator may give (its owner reads it, after `OPERATOR_PREFIX`).
MAX_OPERATOR_REASON = 200
#: What a reason given by an operator starts with, so its owner tells it from a webhook
#: that kept failing (those reasons name the failure: `alerts.retries`).
OPERATOR_PREFIX = "disabled by an operator: "
#: The error of each pending delivery given up by the disabling, as the outbox's own
#: disabling writes it (`alerts.dispatch`).
ABANDONED = "subscription disabled"


@attrs.frozen
class SubscriptionDetails:
    """A subscription and its evaluator state's version (how many times it was saved)."""

    subscription: Subscription
    state_version: int


@attrs.frozen
class DisabledSubscription:
    """A subscription as an operator's disabling left it, and how many of its pending
    deliveries were given up with it."""

    subscription: Subscription
    abandoned: int


def operator_subscriptions(
    ctx: Context, *, owner: str | None = None, status: Status | None = None
) -> Iterator[Subscription]:
    """Every user's subscriptions in id order, read a page at a time; with `owner`, that
    user's only, oldest first, as the API lists them to the user (OperatorError for an
    unknown user, checked before this returns); with `status`, only active or disabled ones."""
    if owner is None:
        return _every_owners(ctx, status)
    if ctx.store.get_user(owner) is None:
        raise OperatorError(f"no user {owner}")
    held = ctx.store.list_subscriptions(owner)  # at most MAX_SUBSCRIPTIONS_PER_USER
    return iter([s for s in held if status is None or s.status is status])


def _every_owners(ctx: Context, status: Status | None) -> Iterator[Subscription]:
    after: uuid.UUID | None = None
    while True:
        page = ctx.store.all_subscriptions(after, PAGE_SIZE, status=status)
        yield from page
        if len(page) < PAGE_SIZE:
            return
        after = page[-1].id


def subscription_details(ctx: Context, subscription_id: uuid.UUID) -> SubscriptionDetails:
    """The subscription whoever its owner, with its state's version; OperatorError when
    there is none by that id."""
    found = ctx.store.find_subscription(subscription_id)
    state = ctx.store.load_subscription_state(subscription_id)
    if found is None or state is None:  # state None: deleted between the two reads
        raise OperatorError(f"no alert subscription {subscription_id}")
    return SubscriptionDetails(found, state.version)


def operator_reason(text: str) -> str:
    """The reason stored for an operator's `text`: its white space folded to single spaces,
    after `OPERATOR_PREFIX`; OperatorError unless it is printable and 1 to
    `MAX_OPERATOR_REASON` characters."""
    folded = " ".join(text.split())
    if not folded or len(folded) > MAX_OPERATOR_REASON or not folded.isprintable():
        raise OperatorError(
            "disabling needs a reason for the owner: printable text of at most "
            f"{MAX_OPERATOR_REASON} characters"
        )
    return OPERATOR_PREFIX + folded


def disable_by_operator(
    ctx: Context, subscription_id: uuid.UUID, reason: str
) -> DisabledSubscription:
    """Disable an active subscription whoever its owner, keeping `operator_reason(reason)`
    and the time for its owner, and give up its pending deliveries, in one unit of work (as
    the outbox disables one). OperatorError when there is no such subscription, or it is
    disabled already (it keeps its first reason)."""
    stored_reason = operator_reason(reason)
    at = ctx.now()
    with ctx.store.transaction() as unit:
        disabled = unit.disable_subscription(subscription_id, stored_reason, at)
        abandoned = unit.abandon_deliveries(subscription_id, at, ABANDONED) if disabled else 0
        found = unit.find_subscription(subscription_id)
    if found is None:
        raise OperatorError(f"no alert subscription {subscription_id}")
    if not disabled:
        raise OperatorError(_already_disabled(found))
    return DisabledSubscription(found, abandoned)


def _already_disabled(subscription: Subscription) -> str:
    text = f"alert subscription {subscription.id} is already disabled"
    disabled = subscription.disabled
    if disabled is None:  # not so (refused in the same unit of work); for the type checker
        return text
    return f"{text} since {disabled.at.isoformat(timespec='seconds')}: {disabled.reason}"

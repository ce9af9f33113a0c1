"""A request's admission: authentication, its rate limit, authorization and the quota check,
all decided on one read of the store (`AdmissionStore`).

For a charged call that depends on no upstream, the rate-limit hit is not written here: it is
left pending (`PendingHit`) for the call's final charge, which counts it and debits the cost
in one write. Any other request counts its hit at once, a write of its own.
"""

from __future__ import annotations

import functools
from collections.abc import Generator
from datetime import datetime
from typing import cast

import attrs

from cleanair_core.access.accounts import OwnerKind
from cleanair_core.access.connections import Authorized, Caller, authorize_with, caller_of
from cleanair_core.access.scopes import Scope
from cleanair_core.access.tokens import token_environment
from cleanair_core.credits import rate_limits
from cleanair_core.credits.final_charges import retry_after
from cleanair_core.credits.rate_limits import RateHit, RateLimit, counted_before, hit_of
from cleanair_core.errors import Forbidden, NotAuthenticated, NotPremium, RateLimited
from cleanair_core.ports import AdmissionRead
from cleanair_core.request_calls import offload_of
from cleanair_core.use_cases.context import Context
from cleanair_core.use_cases.credits import (
    PendingHit,
    count_pending_hit,
    count_pending_hit_awaited,
)


@attrs.frozen
class Admitted:
    """What a request's admission found: its caller, the proof for the scope asked (None when
    none was) and, when its hit was left to its final charge, that hit."""

    caller: Caller
    proof: Authorized | None = None
    pending: PendingHit | None = None


@attrs.frozen
class _Read:
    """Step: the admission read (`AdmissionStore.admission`); answered with its
    `AdmissionRead`."""

    token_hash: str
    rule: str
    at: datetime


@attrs.frozen
class _Hit:
    """Step: count a rate-limit hit now (`RateLimitStore.hit`); answered with the window's
    count, this hit included."""

    hit: RateHit


@attrs.frozen
class _CountPending:
    """Step: count a pending hit its request will not charge (`count_pending_hit`)."""

    pending: PendingHit


#: What an admission asks of the store, one step at a time.
_Step = _Read | _Hit | _CountPending
#: The admission's rule, written once: it yields each store call it needs and is sent the
#: answer; `admit` answers on the sync ports, `admit_awaited` on the request path's calls.
_Steps = Generator[_Step, object, Admitted]


def _admission(
    ctx: Context,
    token: str,
    rule: RateLimit | None,
    scope: Scope | None,
    *,
    premium: bool,
    user_owned: bool,
    defer_hit: bool,
) -> _Steps:
    token_hash, rule, now = _asked(ctx, token, rule)
    read = cast(AdmissionRead, (yield _Read(token_hash, rule.name, now)))
    caller = caller_of(read.connection, token_hash, lambda: bool(read.standing))
    pending = _deferred(read, rule, caller, now) if defer_hit and scope is not None else None
    if pending is None:
        count = cast(int, (yield _Hit(hit_of(rule, caller.connection_key, now))))
        rate_limits.refuse_over(rule, count, now)
    if scope is None:
        return Admitted(caller)
    try:
        proof = _authorized(caller, read, scope, premium=premium, user_owned=user_owned)
    except Forbidden:
        if pending is not None:  # a refused request counts against the limit too
            yield _CountPending(pending)
        raise
    return Admitted(caller, proof, pending)


def admit(
    ctx: Context,
    token: str,
    *,
    rule: RateLimit | None = None,
    scope: Scope | None = None,
    premium: bool = True,
    user_owned: bool = False,
    defer_hit: bool = False,
) -> Admitted:
    """Authenticate `token`, apply `rule` (default: the general request limit) and authorize
    `scope` (when given), in this order (NotAuthenticated, RateLimited, then MissingScope,
    NotPremium or PartnerConnectionRefused), on one read of the store.

    With `defer_hit` (and a scope), a request the counter read leaves room for is admitted
    with its hit pending; a request refused authorization counts it before the error."""
    steps = _admission(
        ctx, token, rule, scope, premium=premium, user_owned=user_owned, defer_hit=defer_hit
    )
    answer: object = None
    while True:
        try:
            step = steps.send(answer)
        except StopIteration as done:
            return cast(Admitted, done.value)
        if isinstance(step, _Read):
            answer = ctx.store.admission(step.token_hash, step.rule, step.at)
        elif isinstance(step, _Hit):
            answer = ctx.store.hit(step.hit.key, step.hit.window_start, step.hit.window_seconds)
        else:
            answer = count_pending_hit(ctx, step.pending)


async def admit_awaited(
    ctx: Context,
    token: str,
    *,
    rule: RateLimit | None = None,
    scope: Scope | None = None,
    premium: bool = True,
    user_owned: bool = False,
    defer_hit: bool = False,
) -> Admitted:
    """`admit` from the event loop: its read and writes awaited on the request path's store
    calls (`Context.requests`), which spare PostgreSQL's the thread hand-over."""
    offload = offload_of(ctx.requests)
    if offload is not None:  # the sync ports: the read and the write in one hand-over
        return await offload(
            functools.partial(
                admit,
                ctx,
                token,
                rule=rule,
                scope=scope,
                premium=premium,
                user_owned=user_owned,
                defer_hit=defer_hit,
            )
        )
    steps = _admission(
        ctx, token, rule, scope, premium=premium, user_owned=user_owned, defer_hit=defer_hit
    )
    answer: object = None
    while True:
        try:
            step = steps.send(answer)
        except StopIteration as done:
            return cast(Admitted, done.value)
        if isinstance(step, _Read):
            answer = await ctx.requests.admission(step.token_hash, step.rule, step.at)
        elif isinstance(step, _Hit):
            hit = step.hit
            answer = await ctx.requests.hit(hit.key, hit.window_start, hit.window_seconds)
        else:
            answer = await count_pending_hit_awaited(ctx, step.pending)


def _asked(ctx: Context, token: str, rule: RateLimit | None) -> tuple[str, RateLimit, datetime]:
    """The token's keyed hash (NotAuthenticated for another environment's token), the rule
    applied and the instant of the request."""
    if token_environment(token) is not ctx.policy.environment:
        raise NotAuthenticated()
    return ctx.keys.hash_token(token), rule or ctx.request_limit, ctx.now()


def _deferred(read: AdmissionRead, rule: RateLimit, caller: Caller, now: datetime) -> PendingHit:
    """The request's hit, left pending for its charge: RateLimited when the counter read
    leaves no room for it."""
    hit = hit_of(rule, caller.connection_key, now)
    if counted_before(read.counter, hit) >= hit.limit:
        raise RateLimited(retry_after(hit, now))
    return PendingHit(hit, read.usage)


def _authorized(
    caller: Caller, read: AdmissionRead, scope: Scope, *, premium: bool, user_owned: bool
) -> Authorized:
    def check_premium() -> None:
        if caller.owner.kind is OwnerKind.USER and not read.standing:
            raise NotPremium()

    return authorize_with(caller, scope, check_premium, premium=premium, user_owned=user_owned)

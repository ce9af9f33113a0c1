"""Credit use cases: charges, quota, rate limits and attribution labels."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from types import TracebackType

import attrs

from cleanair_core.access.accounts import Owner, OwnerKind
from cleanair_core.access.connections import Caller
from cleanair_core.credits import rate_limits
from cleanair_core.credits.attribution import (
    attribution_label,
    attribution_label_awaited,
    validate_client_label,
)
from cleanair_core.credits.charging import Charge
from cleanair_core.credits.final_charges import ChargeOnAnswer, retry_after
from cleanair_core.credits.ledger import (
    MAX_GRANT,
    MAX_GRANT_REASON,
    Billable,
    Debit,
    LedgerEntry,
    Quota,
    Usage,
    cost_of,
    day_key,
    month_key,
    quota_of,
)
from cleanair_core.credits.rate_limits import RateHit, RateLimit
from cleanair_core.errors import OperatorError, RateLimited
from cleanair_core.request_calls import group_writes_of
from cleanair_core.routes.plans import UNDELIVERED_PLAN_ERROR
from cleanair_core.use_cases.context import Context


def add_client_label(ctx: Context, label: str) -> None:
    if not ctx.store.add_client_label(validate_client_label(label), ctx.now()):
        raise OperatorError(f"client label {label} already exists")


def usage_by_label(ctx: Context, user_name: str) -> dict[str, int]:
    """This month's net credits per attribution label for a user."""
    if ctx.store.get_user(user_name) is None:
        raise OperatorError(f"no user {user_name}")
    pool = Owner(OwnerKind.USER, user_name).key
    return ctx.store.usage_by_label(pool, month_key(ctx.now()))


def partner_usage_by_label(ctx: Context, partner_name: str) -> dict[str, int]:
    """This month's net credits per attribution label drawn from a partner's credit pool
    (all its connections'), deactivated partners included."""
    if ctx.store.get_partner(partner_name) is None:
        raise OperatorError(f"no partner {partner_name}")
    pool = Owner(OwnerKind.PARTNER, partner_name).key
    return ctx.store.usage_by_label(pool, month_key(ctx.now()))


@attrs.frozen
class PoolReport:
    """What a support operator sees of a user's pool: the quota the user's apps see, this
    month's grants (with their reasons; day grants among them) and usage per attribution
    label."""

    quota: Quota
    grants: tuple[LedgerEntry, ...]
    by_label: dict[str, int]
    #: The UTC day (`day_key`) the quota's daily figures are for.
    day: str


def _user_pool(ctx: Context, user_name: str) -> str:
    if ctx.store.get_user(user_name) is None:
        raise OperatorError(f"no user {user_name}")
    return Owner(OwnerKind.USER, user_name).key


def pool_report(ctx: Context, user_name: str) -> PoolReport:
    pool = _user_pool(ctx, user_name)
    now = ctx.now()
    month = month_key(now)
    grants = tuple(e for e in ctx.store.entries(pool) if e.is_grant and e.month == month)
    return PoolReport(
        quota_of(ctx.store.usage(pool, now), ctx.policy.credits),
        grants,
        ctx.store.usage_by_label(pool, month),
        day_key(now),
    )


def grant_credits(
    ctx: Context, user_name: str, amount: int, reason: str, *, today: bool = False
) -> PoolReport:
    """Add `amount` credits to a user's pool for this month only, recorded with `reason`.

    With `today`, raise this UTC day's burst cap by `amount` instead, not the month's pool:
    the user may spend more today, still within what remains of the month (grant the month
    as well for more overall)."""
    if not 1 <= amount <= MAX_GRANT:
        raise OperatorError(f"a grant is 1 to {MAX_GRANT:,} credits")
    reason = " ".join(reason.split())
    if not reason or len(reason) > MAX_GRANT_REASON or not reason.isprintable():
        raise OperatorError(
            f"a grant needs a reason: printable text of at most {MAX_GRANT_REASON} characters"
        )
    pool = _user_pool(ctx, user_name)
    ctx.store.grant(pool, amount, reason, ctx.now(), day_only=today)
    return pool_report(ctx, user_name)


@attrs.define(eq=False)
class PendingHit:
    """A request's rate-limit hit, checked at its admission against the counter read then but
    not yet counted: a final charge counts it in the same write as its debit; whatever else
    the request comes to, `count_pending_hit` counts it on its own."""

    hit: RateHit
    #: The caller's pool's usage, read at admission with the counter.
    usage: Usage
    counted: bool = False

    def take(self) -> RateHit | None:
        """The hit, for the one write that counts it (None once taken)."""
        if self.counted:
            return None
        self.counted = True
        return self.hit


def count_pending_hit(ctx: Context, pending: PendingHit) -> bool:
    """Count a pending hit not counted yet; whether it went over the limit (another request
    took the window's last one since the admission read)."""
    if pending.counted:
        return False
    hit = pending.hit
    over = ctx.store.hit(hit.key, hit.window_start, hit.window_seconds) > hit.limit
    # Marked only once written: a store that would have waited (WouldBlock) wrote nothing,
    # and the same call, run again in a thread, must still count it.
    pending.counted = True
    return over


async def count_pending_hit_awaited(ctx: Context, pending: PendingHit) -> bool:
    """`count_pending_hit` from the event loop, on the request path's store calls."""
    hit = pending.take()
    if hit is None:
        return False
    count = await ctx.requests.hit(hit.key, hit.window_start, hit.window_seconds)
    return count > hit.limit


def enforce_rate_limit(ctx: Context, caller: Caller, rule: RateLimit | None = None) -> None:
    """Count a request of `caller` against `rule` (default: the general request limit)."""
    rule = rule or ctx.request_limit
    rate_limits.enforce(ctx.store, rule, caller.connection_key, ctx.now())


def quota(ctx: Context, caller: Caller) -> Quota:
    usage = ctx.store.usage(caller.owner.key, ctx.now())
    return quota_of(usage, ctx.policy.credits)


def charge_on_answer(
    ctx: Context,
    caller: Caller,
    billable: Billable,
    units: int = 1,
    client: str | None = None,
    pending: PendingHit | None = None,
) -> ChargeOnAnswer:
    """The charge of a call that depends on no upstream, as an async context manager: the
    block computes the answer, then leaving it counts the request's `pending` hit and debits
    the cost in one write, with no hold (`cleanair_core.credits.final_charges`)."""
    now = ctx.now()

    async def debit() -> Debit:
        # Awaited on the request path's store calls: no store call blocks the event loop.
        label = await attribution_label_awaited(client, billable, ctx.requests.is_client_label)
        return Debit(
            pool=caller.owner.key,
            connection_id=caller.connection_key,
            label=label,
            amount=cost_of(billable, units),
            at=now,
        )

    return ChargeOnAnswer(
        ctx.final_charges,
        debit,
        cost_of(billable, units),
        ctx.policy.credits,
        ctx.clock,
        hit=(lambda: None) if pending is None else pending.take,
        usage=None if pending is None else pending.usage,
        metrics=ctx.metrics,
        endpoint=billable,
    )


def charged(
    ctx: Context,
    caller: Caller,
    billable: Billable,
    *,
    upstream: bool,
    units: int = 1,
    client: str | None = None,
    pending: PendingHit | None = None,
) -> AbstractAsyncContextManager[object]:
    """The charge of a call whose block computes the answer: held while an `upstream` call
    may take long (`charge_held`), else made once the answer is there (`charge_on_answer`)."""
    # The chosen manager itself, not a generator around it: `asynccontextmanager`'s layer
    # cost a score about 4 µs of the event loop's time (issue 34).
    if upstream:
        return _HeldCharge(ctx, caller, billable, units, client, pending)
    return charge_on_answer(ctx, caller, billable, units, client, pending)


class _HeldCharge:
    """`charge_held`'s charge as an async context manager: made (the pending hit counted,
    the debit held) on entry, settled by the charge's own exit."""

    __slots__ = ("_args", "_charge")

    def __init__(
        self,
        ctx: Context,
        caller: Caller,
        billable: Billable,
        units: int,
        client: str | None,
        pending: PendingHit | None,
    ) -> None:
        self._args = (ctx, caller, billable, units, client, pending)
        self._charge: Charge | None = None

    async def __aenter__(self) -> Charge:
        charge = await charge_held(*self._args)
        entered = await charge.__aenter__()
        self._charge = charge
        return entered

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._charge is not None  # entered: Python calls __aexit__ only then
        await self._charge.__aexit__(exc_type, exc, tb)


async def charge_held(
    ctx: Context,
    caller: Caller,
    billable: Billable,
    units: int = 1,
    client: str | None = None,
    pending: PendingHit | None = None,
) -> Charge:
    """`charge` for a call that depends on an upstream, once its request's `pending` hit is
    counted (RateLimited when over the limit)."""
    # On the request path's store calls: a store that commits writes together (SQLite's
    # synced one) takes the hit into its next batch, never tried here first (WouldBlock).
    if pending is not None and await count_pending_hit_awaited(ctx, pending):
        raise RateLimited(retry_after(pending.hit, ctx.now()))
    return charge(ctx, caller, billable, units, client)


def _debit_of(
    ctx: Context,
    caller: Caller,
    billable: Billable,
    units: int,
    client: str | None,
    now: datetime,
    *,
    hold: bool,
) -> Callable[[], Debit]:
    """The call's debit, built where the store calls run (it reads the client label); held
    for `Policy.charge_hold` when `hold`, final otherwise."""

    def debit() -> Debit:
        return Debit(
            pool=caller.owner.key,
            connection_id=caller.connection_key,
            label=attribution_label(client, billable, ctx.store),
            amount=cost_of(billable, units),
            at=now,
            hold_until=now + ctx.policy.charge_hold if hold else None,
        )

    return debit


def charge(
    ctx: Context, caller: Caller, billable: Billable, units: int = 1, client: str | None = None
) -> Charge:
    """A held reservation of the call's cost, to use as a (sync or async) context manager:
    final when the block ends without error, refunded when it raises, and refunded by
    `sweep_charge_holds` if the process dies in between."""
    debit = _debit_of(ctx, caller, billable, units, client, ctx.now(), hold=True)
    return Charge(
        ctx.store,
        debit,
        ctx.policy.credits,
        ctx.clock,
        ctx.held_charges,
        group_writes_of(ctx.requests) or ctx.store_calls,
        metrics=ctx.metrics,
        endpoint=billable,
    )


def renew_charge_holds(ctx: Context) -> int:
    """Keep the holds of this context's calls in progress from ending; the number renewed."""
    ids = ctx.held_charges.ids()
    if not ids:
        return 0
    return ctx.store.renew_holds(ids, ctx.now() + ctx.policy.charge_hold)


def sweep_charge_holds(ctx: Context) -> int:
    """Refund the charges whose holds ended unconfirmed: their process died before it
    answered. A route plan paid by one fails. Any process sharing the store may sweep."""
    return ctx.store.sweep_holds(ctx.now(), UNDELIVERED_PLAN_ERROR)

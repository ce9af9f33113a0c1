"""The credit pool: a monthly pool (UTC calendar month) and a daily burst cap (UTC day).

A call must fit within what remains of both. Check and debit are one atomic step in the
ledger adapter; the decision itself is the pure function `check_fits` below.

Grants: a support operator may add credits to one pool for the current month
(`CreditLedger.grant`), an append-only ledger entry with its reason. The month's pool is the
policy's plus that month's grants; the daily burst cap is not raised, so granted credits are
spent at no more than the cap a day like any others (a grant to a pool that ran dry on the
28th gives at most the cap per day until the month ends, then lapses).

A day grant (`grant(..., day_only=True)`) is the other way round: it raises the daily burst
cap of the current UTC day only, and not the month, so the user may spend more today but
still within what remains of the month's pool (a call must fit both); an operator who wants
the user to have more credits overall grants the month as well. It lapses at midnight UTC.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Protocol

import attrs

from cleanair_core.credits.rate_limits import RateHit
from cleanair_core.errors import CreditsExhausted, Limit


class Billable(StrEnum):
    """What draws credits; the value is also the endpoint's own attribution label."""

    SCORE = "score"
    FORECAST = "forecast"
    ROUTE_ENRICHMENT = "route_enrichment"
    ROUTE_PLAN = "route_plan"
    #: The extension API (/ext/v1): a point's conditions cost what its score costs.
    CONDITIONS = "conditions"
    #: The best time to go (/ext/v1/routes/departures): a plan, charged as one.
    ROUTE_DEPARTURES = "route_departures"
    #: A point's past hours (/ext/v1/airquality/history): per started day of the span, as
    #: a day's forecast.
    HISTORY = "history"


#: Contract section 8 (and the extension's). Route enrichment is per waypoint.
COSTS: dict[Billable, int] = {
    Billable.SCORE: 1,
    Billable.FORECAST: 2,
    Billable.ROUTE_ENRICHMENT: 1,
    Billable.ROUTE_PLAN: 25,
    Billable.CONDITIONS: 1,
    Billable.ROUTE_DEPARTURES: 25,
    Billable.HISTORY: 2,
}


def cost_of(billable: Billable, units: int = 1) -> int:
    """Credits for `units` of `billable` (units are waypoints for enrichment, started days
    for history, else 1)."""
    if units < 1:
        raise ValueError("units must be at least 1")
    return COSTS[billable] * units


@attrs.frozen
class CreditLimits:
    monthly: int = 1000
    daily: int = 100

    def __attrs_post_init__(self) -> None:
        if self.monthly < 0 or self.daily < 0:
            raise ValueError("credit limits must not be negative")


def month_key(at: datetime) -> str:
    at = at.astimezone(UTC)
    return _keys_of_day(at.year, at.month, at.day)[0]


def day_key(at: datetime) -> str:
    at = at.astimezone(UTC)
    return _keys_of_day(at.year, at.month, at.day)[1]


@functools.lru_cache(maxsize=8)
def _keys_of_day(year: int, month: int, day: int) -> tuple[str, str, tuple[str, str]]:
    """A UTC day's month key, day key and `window_keys`: every charge asks for them, a few
    times each, and they change once a day (formatting them was microseconds a call)."""
    month_of = f"{year:04d}-{month:02d}"
    day_of = f"{month_of}-{day:02d}"
    return month_of, day_of, window_keys(month_of, day_of)


def grant_window(month: str) -> str:
    """The key of a pool's granted credits for `month` among its window counters."""
    return "g" + month


def day_grant_window(day: str) -> str:
    """The key of a pool's granted credits for `day` (a day grant) among its window
    counters: "gd" never begins a month's grant key ("g" and a digit)."""
    return "gd" + day


#: The attribution label and connection of a grant's ledger entry: no connection drew it.
GRANT_LABEL = "grant"
#: The label of a day grant's entry: what tells it from a month's grant in the ledger.
DAY_GRANT_LABEL = "day_grant"
GRANT_CONNECTION = "operator"
#: The most one grant may add (a typo's ceiling) and a reason's length.
MAX_GRANT = 1_000_000
MAX_GRANT_REASON = 200


def grant_counted_in(at: datetime, *, day_only: bool) -> tuple[str, str]:
    """The label of a grant made at `at` and the window counter it adds to: its month's
    grant window, or with `day_only` its day's."""
    if day_only:
        return DAY_GRANT_LABEL, day_grant_window(day_key(at))
    return GRANT_LABEL, grant_window(month_key(at))


def window_keys(month: str, day: str) -> tuple[str, str]:
    """The keys of a pool's two usage windows (its month's and its day's) in a store's
    window counters: one namespace, so a month and a day never collide."""
    return "m" + month, "d" + day


def windows_at(at: datetime) -> tuple[str, str]:
    """`window_keys` of the month and the day (UTC) `at` falls in."""
    at = at.astimezone(UTC)
    return _keys_of_day(at.year, at.month, at.day)[2]


def next_month_start(at: datetime) -> datetime:
    at = at.astimezone(UTC)
    year, month = (at.year + 1, 1) if at.month == 12 else (at.year, at.month + 1)
    return datetime(year, month, 1, tzinfo=UTC)


def next_day_start(at: datetime) -> datetime:
    at = at.astimezone(UTC)
    return datetime(at.year, at.month, at.day, tzinfo=UTC) + timedelta(days=1)


def seconds_until(at: datetime, reset: datetime) -> int:
    """Whole seconds from `at` until `reset`, rounded up, at least 1."""
    return max(1, math.ceil((reset - at).total_seconds()))


@attrs.frozen
class Usage:
    """Credits used in the windows containing some instant, and those granted for its month
    and (day grants) for its day."""

    month: int
    day: int
    granted: int = 0
    day_granted: int = 0


@attrs.frozen
class Quota:
    used: int
    limit: int
    remaining: int
    daily_used: int
    daily_limit: int
    daily_remaining: int


def quota_of(usage: Usage, limits: CreditLimits) -> Quota:
    monthly = limits.monthly + usage.granted
    daily = limits.daily + usage.day_granted
    return Quota(
        used=usage.month,
        limit=monthly,
        remaining=max(0, monthly - usage.month),
        daily_used=usage.day,
        daily_limit=daily,
        daily_remaining=max(0, daily - usage.day),
    )


def check_fits(usage: Usage, amount: int, limits: CreditLimits, at: datetime) -> None:
    """Raise CreditsExhausted unless `amount` fits in what remains of both windows.

    Retry-After names the window that blocks the call; when both block, the later reset.
    """
    if amount < 1:
        raise ValueError("a debit is at least one credit")
    month_blocks = usage.month + amount > limits.monthly + usage.granted
    day_blocks = usage.day + amount > limits.daily + usage.day_granted
    # The month always resets no earlier than the day, so when it blocks it is the answer.
    if month_blocks:
        raise CreditsExhausted(
            seconds_until(at, next_month_start(at)),
            "Monthly credit pool exhausted",
            Limit.MONTHLY_POOL,
        )
    if day_blocks:
        raise CreditsExhausted(
            seconds_until(at, next_day_start(at)), "Daily burst cap exhausted", Limit.DAILY_BURST
        )


@attrs.frozen
class LedgerEntry:
    """One append-only ledger row. A refund is a negative entry that `reverses` a debit.

    `month` and `day` are the window keys the entry counts in: a refund counts in the
    windows of the debit it reverses, so it restores exactly what was taken. A grant (its
    `reason` set) counts in its month's `grant_window` only, never as usage, and is never
    reversed.
    """

    id: int
    pool: str
    connection_id: str
    label: str
    amount: int
    at: datetime
    month: str
    day: str
    reverses: int | None = None
    #: Why an operator granted these credits; None for every other entry.
    reason: str | None = None

    @property
    def is_grant(self) -> bool:
        return self.reason is not None

    @property
    def is_day_grant(self) -> bool:
        """A grant that raised its day's burst cap rather than its month's pool."""
        return self.is_grant and self.label == DAY_GRANT_LABEL


@attrs.frozen
class Debit:
    """A request to take credits from a pool.

    With `hold_until` the debit is held: it counts at once, but it is final only once
    confirmed (`CreditLedger.confirm_charge`) when the answer is on its way; a hold left to
    expire (its process died before answering) is refunded by `sweep_holds`. See
    `cleanair_core.credits.charging`.
    """

    pool: str
    connection_id: str
    label: str
    amount: int
    at: datetime
    hold_until: datetime | None = None


@attrs.frozen
class FinalCharge:
    """A charge for an answer already computed: its debit (never held) and, when the request's
    rate-limit hit is not counted yet, that hit, written together (`settle_charges`)."""

    debit: Debit
    hit: RateHit | None = None

    def __attrs_post_init__(self) -> None:
        if self.debit.hold_until is not None:
            raise ValueError("a final charge is never held")


@attrs.frozen
class OverRateLimit:
    """A final charge refused because its request went over its rate limit: nothing debited."""


#: What settling one final charge came to: its ledger entry, or why nothing was debited.
Settlement = LedgerEntry | OverRateLimit | CreditsExhausted


class CreditLedger(Protocol):
    """Storage port for the append-only credit ledger and the holds on unconfirmed debits."""

    def debit(self, debit: Debit, limits: CreditLimits) -> LedgerEntry:
        """Atomically check with `check_fits` and append (with its hold, if it has one);
        raises CreditsExhausted."""

    def settle_charges(
        self, charges: Sequence[FinalCharge], limits: CreditLimits
    ) -> list[Settlement]:
        """Settle `charges` in order, all in one transaction with one commit (a group commit):
        for each, count its hit (if any) as `RateLimitStore.hit` does; over its limit, it is
        `OverRateLimit`; else its debit is checked with `check_fits` against what the charges
        before it left (CreditsExhausted, returned, when it does not fit) and appended, final.
        A refused charge debits nothing, but its hit stays counted. A hit's key belongs to
        one pool (a connection draws on its owner's pool only), so only the order of each
        pool's charges matters: an adapter may take pools in an order of its own."""

    def refund(self, entry_id: int, at: datetime) -> LedgerEntry | None:
        """Append the reversing entry of debit `entry_id` and drop its hold; None when
        already refunded."""

    def confirm_charge(self, entry_id: int) -> bool:
        """Drop the hold on debit `entry_id`: the charge is final. False when it had no hold
        left (it was refunded, or swept because its holder looked dead)."""

    def renew_holds(self, entry_ids: Sequence[int], until: datetime) -> int:
        """Move the holds on `entry_ids` to `until`; the number of holds still there."""

    def sweep_holds(self, now: datetime, plan_error: str) -> int:
        """Refund every debit whose hold ended at or before `now`, each in one transaction
        with failing (with `plan_error`) the pending route plan it paid for, if any; the
        number refunded."""

    def grant(
        self, pool: str, amount: int, reason: str, at: datetime, *, day_only: bool = False
    ) -> LedgerEntry:
        """Append a grant of `amount` credits to `pool` for the month of `at`, with `reason`;
        `grant_window` counts it, in the same transaction. With `day_only` it is a day grant
        instead: labelled `DAY_GRANT_LABEL` and counted in the `day_grant_window` of the day
        of `at`, it raises that day's burst cap and not the month's pool."""

    def usage(self, pool: str, at: datetime) -> Usage:
        """Credits used in the month and the day that contain `at`, and granted for the
        month and for the day."""

    def usage_by_label(self, pool: str, month: str) -> dict[str, int]:
        """Net credits per attribution label in `month` (labels netting to 0 included);
        grants are not usage and are left out."""

    def entries(self, pool: str) -> list[LedgerEntry]:
        """Every entry of `pool`, in order."""

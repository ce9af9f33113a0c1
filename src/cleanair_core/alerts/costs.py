"""What an alert costs, and what happens when its owner's pool cannot pay (issue 32;
docs/alerts.md, "What alerts cost"; docs/api-choices.md, the extension API).

Alerts draw on the contract's monthly pool like any call, at prices chosen so that three
place alerts and one weekday trip alert fit well inside the 1000 credits beside normal use
(`worst_month`). They are checked against the month only, not the daily burst: the burst
caps how fast a client may spend, and an alert is not a client's call but the service
keeping its word (the reasons: docs/alerts.md).

`charge` is the decision for one event, pure: deliver it and debit its price, or withhold it
because the month's pool cannot pay, with the notice that tells the owner so. The notice's id
is stable per owner, month and pool size, so deciding it at every withheld event records it
once (the outbox keeps one event per id): the owner is told once per exhaustion, and again
only after the pool refilled (a new month, or a grant that enlarged it) and ran dry again.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from enum import StrEnum

import attrs

from cleanair_core.alerts.events import EVENT_NAMESPACE, AlertEvent, EventKind
from cleanair_core.alerts.subscriptions import Target, Trip
from cleanair_core.credits.ledger import COSTS, Billable, CreditLimits, Usage, month_key

#: A place's alert: an observed episode's start, or a day's forecast. One credit, the
#: score's price: the evaluation is one cell's, shared by every subscription in it.
PLACE_ALERT_COST = COSTS[Billable.SCORE]
#: A trip's alert carries the best departure, a departures computation: a fifth of the
#: on-demand one (`Billable.ROUTE_DEPARTURES`), since the trip and window are known ahead
#: and computed in the quiet of the hourly round, once a day at most.
TRIP_ALERT_COST = COSTS[Billable.ROUTE_DEPARTURES] // 5
#: An all-clear ends what an alert began: it is paid for by its alert.
ALL_CLEAR_COST = 0
#: Telling the owner that the pool ran dry costs nothing (it could not be paid anyway).
NOTICE_COST = 0


def event_cost(event: AlertEvent, target: Target) -> int:
    """The credits `event` of a subscription watching `target` costs."""
    if event.kind is EventKind.ALL_CLEAR:
        return ALL_CLEAR_COST
    return TRIP_ALERT_COST if isinstance(target, Trip) else PLACE_ALERT_COST


#: The daily cap an alert's debit is checked against: none that counts (`alert_limits`).
_NO_DAILY_CAP = 2**31 - 1


def alert_limits(limits: CreditLimits) -> CreditLimits:
    """The limits an alert's debit is made under: the month's pool as it is, the daily
    burst lifted (the debit still counts in the day's usage, as every debit does)."""
    return CreditLimits(monthly=limits.monthly, daily=_NO_DAILY_CAP)


#: The month the worst case is worked over: the longest, with the most weekdays.
MONTH_DAYS = 31
MONTH_WEEKDAYS = 23


def worst_month(place_alerts: int = 3, trip_alerts: int = 1) -> int:
    """The most `place_alerts` place subscriptions and `trip_alerts` weekday trip
    subscriptions cost in a month, each telling at most once a day: a forecast alert a day
    (at most one a day unless the forecast worsens), or an observed episode a day (its
    all-clear free), and a trip alert every weekday."""
    return (
        place_alerts * MONTH_DAYS * PLACE_ALERT_COST
        + trip_alerts * MONTH_WEEKDAYS * TRIP_ALERT_COST
    )


class Verdict(StrEnum):
    """What becomes of an event."""

    #: Deliver it and debit its price (nothing for a free one).
    CHARGE = "charge"
    #: The month's pool cannot pay: record nothing of it, and tell the owner (`notice`).
    WITHHOLD = "withhold"


@attrs.frozen(kw_only=True)
class PoolExhausted:
    """The notice that `owner`'s pool for `month` (UTC, "2026-11") is spent, so alerts are
    withheld until it refills. `id` is stable for the owner, month and pool size."""

    id: uuid.UUID
    owner: str
    month: str
    pool: int


@attrs.frozen(kw_only=True)
class Charging:
    """The verdict on one event: `credits` to debit when charged; the notice to record (by
    its stable id, once) when withheld."""

    verdict: Verdict
    credits: int = 0
    notice: PoolExhausted | None = None


def exhausted_notice_id(owner: str, month: str, pool: int) -> uuid.UUID:
    """The id of the pool-exhausted notice of `owner`'s `month` when the pool held `pool`
    credits: a grant that enlarges the pool makes the next exhaustion a notice of its own."""
    return uuid.uuid5(EVENT_NAMESPACE, f"pool-exhausted/{owner}/{month}/{pool}")


def charge(
    owner: str, usage: Usage, cost: int, at: datetime, limits: CreditLimits | None = None
) -> Charging:
    """Whether an event costing `cost` credits, decided at `at`, goes out: charged when it
    is free or fits in what remains of the month's pool (`usage` of `at`'s month, grants
    included); withheld with the pool-exhausted notice otherwise. The daily burst is not
    consulted. The caller debits inside the same unit of work as it records the event."""
    if cost < 0:
        raise ValueError("a cost is 0 or more")
    limits = CreditLimits() if limits is None else limits
    pool = limits.monthly + usage.granted
    if cost == 0 or usage.month + cost <= pool:
        return Charging(verdict=Verdict.CHARGE, credits=cost)
    month = month_key(at)
    notice = PoolExhausted(
        id=exhausted_notice_id(owner, month, pool), owner=owner, month=month, pool=pool
    )
    return Charging(verdict=Verdict.WITHHOLD, notice=notice)

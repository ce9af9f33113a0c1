"""What alerts cost: the prices' worst month inside the pool beside normal use, the verdict
on each event (charged from the month's pool, never stopped by the daily burst), and the
pool-exhausted notice, told once per exhaustion."""

from __future__ import annotations

import calendar
import uuid
from datetime import UTC, date, datetime, time, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cleanair_core.alerts.costs import (
    ALL_CLEAR_COST,
    MONTH_DAYS,
    MONTH_WEEKDAYS,
    PLACE_ALERT_COST,
    TRIP_ALERT_COST,
    Verdict,
    alert_limits,
    charge,
    event_cost,
    exhausted_notice_id,
    worst_month,
)
from cleanair_core.alerts.events import EVENT_NAMESPACE, AlertEvent, EventKind
from cleanair_core.alerts.subscriptions import Place, Trip
from cleanair_core.credits.ledger import COSTS, Billable, CreditLimits, Usage, check_fits
from cleanair_core.errors import CreditsExhausted
from cleanair_core.geo import Point
from cleanair_core.routes.network import PlanActivityType

AT = datetime(2026, 11, 24, 10, 7, tzinfo=UTC)
POOL = CreditLimits().monthly
PLACE = Place(Point(60.17, 24.94))
TRIP = Trip(
    Point(60.17, 24.94),
    Point(60.19, 24.96),
    PlanActivityType.CYCLING,
    time(8),
    frozenset(range(1, 6)),
)
#: What the pool is sized to leave room for besides alerts: a person checking the score ten
#: times and a day's forecast five times a day, 20 credits a day, over the longest month.
NORMAL_USE = (10 * COSTS[Billable.SCORE] + 5 * COSTS[Billable.FORECAST]) * 31


def event(kind: EventKind) -> AlertEvent:
    return AlertEvent(
        id=uuid.uuid4(),
        kind=kind,
        subscription_id=uuid.uuid4(),
        category=3,
        decided_at=AT,
        due_at=AT,
        target_day=date(2026, 11, 25) if kind is EventKind.FORECAST else None,
    )


def test_prices() -> None:
    assert event_cost(event(EventKind.FORECAST), PLACE) == PLACE_ALERT_COST == 1
    assert event_cost(event(EventKind.ALERT), PLACE) == PLACE_ALERT_COST
    assert event_cost(event(EventKind.ALL_CLEAR), PLACE) == ALL_CLEAR_COST == 0
    assert event_cost(event(EventKind.FORECAST), TRIP) == TRIP_ALERT_COST == 5
    assert event_cost(event(EventKind.ALL_CLEAR), TRIP) == 0


def test_the_worst_month_of_three_place_alerts_and_a_weekday_trip_fits_comfortably() -> None:
    # The longest month and the most weekdays any month has, from the calendar.
    longest = max(calendar.monthrange(2026, month)[1] for month in range(1, 13))
    weekdays = max(
        sum(1 for day in range(1, calendar.monthrange(year, month)[1] + 1)
            if date(year, month, day).isoweekday() <= 5)
        for year in (2026, 2027, 2028)
        for month in range(1, 13)
    )  # fmt: skip
    assert (longest, weekdays) == (MONTH_DAYS, MONTH_WEEKDAYS)
    # Each place subscription tells at most once a day (a forecast alert, or an observed
    # episode's alert, its all-clear free), the trip every weekday.
    place_a_day = max(
        event_cost(event(EventKind.FORECAST), PLACE),
        event_cost(event(EventKind.ALERT), PLACE) + event_cost(event(EventKind.ALL_CLEAR), PLACE),
    )
    worst = 3 * longest * place_a_day + weekdays * event_cost(event(EventKind.FORECAST), TRIP)
    assert worst == worst_month() == 3 * 31 + 23 * 5 == 208
    # Comfortably: at most a quarter of the pool, and normal use beside it still leaves room.
    assert worst <= POOL // 4
    assert worst + NORMAL_USE <= POOL - 100


def test_an_alert_that_fits_the_month_is_charged() -> None:
    verdict = charge("alice", Usage(month=500, day=40), 1, AT)
    assert (verdict.verdict, verdict.credits, verdict.notice) == (Verdict.CHARGE, 1, None)
    # The last credit of the pool pays.
    assert charge("alice", Usage(month=POOL - 5, day=0), 5, AT).verdict is Verdict.CHARGE


def test_alerts_do_not_stop_at_the_daily_burst() -> None:
    usage = Usage(month=300, day=CreditLimits().daily)
    with pytest.raises(CreditsExhausted):
        check_fits(usage, 1, CreditLimits(), AT)  # a call would be refused today
    assert charge("alice", usage, 1, AT).verdict is Verdict.CHARGE
    # ... and the ledger's debit, checked under `alert_limits`, passes the day too.
    check_fits(usage, 5, alert_limits(CreditLimits()), AT)
    with pytest.raises(CreditsExhausted):
        check_fits(Usage(month=POOL, day=0), 1, alert_limits(CreditLimits()), AT)


def test_an_alert_the_month_cannot_pay_is_withheld_with_the_notice() -> None:
    verdict = charge("alice", Usage(month=POOL - 4, day=0), 5, AT)
    assert verdict.verdict is Verdict.WITHHOLD
    assert verdict.credits == 0
    assert verdict.notice is not None
    assert (verdict.notice.owner, verdict.notice.month, verdict.notice.pool) == (
        "alice",
        "2026-11",
        POOL,
    )
    assert verdict.notice.id == uuid.uuid5(EVENT_NAMESPACE, f"pool-exhausted/alice/2026-11/{POOL}")


def test_free_events_go_out_on_an_exhausted_pool() -> None:
    verdict = charge("alice", Usage(month=POOL + 20, day=0), ALL_CLEAR_COST, AT)
    assert (verdict.verdict, verdict.credits) == (Verdict.CHARGE, 0)


def test_a_grant_enlarges_the_pool_alerts_draw_on() -> None:
    assert charge("alice", Usage(month=POOL, day=0, granted=50), 1, AT).verdict is Verdict.CHARGE
    assert charge("alice", Usage(month=POOL + 50, day=0, granted=50), 1, AT).notice is not None
    assert charge("alice", Usage(month=90, day=0), 20, AT, CreditLimits(100, 10)).notice


def test_a_negative_cost_is_refused() -> None:
    with pytest.raises(ValueError, match="0 or more"):
        charge("alice", Usage(month=0, day=0), -1, AT)


def test_the_notice_id_names_owner_month_and_pool() -> None:
    ids = {
        exhausted_notice_id("alice", "2026-11", 1000),
        exhausted_notice_id("bob", "2026-11", 1000),
        exhausted_notice_id("alice", "2026-12", 1000),
        exhausted_notice_id("alice", "2026-11", 1050),
    }
    assert len(ids) == 4
    assert exhausted_notice_id("alice", "2026-11", 1000) == exhausted_notice_id(
        "alice", "2026-11", 1000
    )


class Recorder:
    """The ledger and the outbox as the evaluator will use them: a charged event is debited
    and recorded; a notice is recorded by its id, once (as `AlertOutbox` records)."""

    def __init__(self) -> None:
        self.spent: dict[str, int] = {}
        self.granted: dict[str, int] = {}
        self.recorded: list[uuid.UUID] = []
        self.notices: list[uuid.UUID] = []

    def decide(self, owner: str, cost: int, at: datetime) -> None:
        month = f"{at.year:04d}-{at.month:02d}"
        usage = Usage(month=self.spent.get(month, 0), day=0, granted=self.granted.get(month, 0))
        verdict = charge(owner, usage, cost, at)
        if verdict.verdict is Verdict.CHARGE:
            self.spent[month] = self.spent.get(month, 0) + verdict.credits
            self.recorded.append(uuid.uuid4())
        else:
            assert verdict.notice is not None
            if verdict.notice.id not in self.recorded:
                self.recorded.append(verdict.notice.id)
                self.notices.append(verdict.notice.id)


def test_the_owner_is_told_once_per_exhaustion() -> None:
    recorder = Recorder()
    at = datetime(2026, 11, 1, tzinfo=UTC)
    # Far more alerts than the pool pays: the pool runs dry once, the notice is one.
    for hour in range(24 * 29):
        recorder.decide("alice", TRIP_ALERT_COST, at + timedelta(hours=hour))
    assert recorder.spent["2026-11"] == POOL
    assert len(recorder.notices) == 1
    # A grant refills it; running dry again is told again, once.
    recorder.granted["2026-11"] = 100
    for _ in range(50):
        recorder.decide("alice", TRIP_ALERT_COST, datetime(2026, 11, 30, tzinfo=UTC))
    assert recorder.spent["2026-11"] == POOL + 100
    assert len(recorder.notices) == 2
    # The next month's pool is new, and so is its exhaustion.
    for _ in range(POOL // TRIP_ALERT_COST + 10):
        recorder.decide("alice", TRIP_ALERT_COST, datetime(2026, 12, 3, tzinfo=UTC))
    assert len(recorder.notices) == 3


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from([0, PLACE_ALERT_COST, TRIP_ALERT_COST]), st.integers(0, 60)),
        max_size=400,
    ),
    st.integers(0, 60),
)
def test_alerts_never_overspend_and_each_exhaustion_is_told_once(
    events: list[tuple[int, int]], monthly: int
) -> None:
    limits = CreditLimits(monthly=monthly, daily=1)
    spent = 0
    notices: set[uuid.UUID] = set()
    told = 0
    for cost, day in events:
        at = AT.replace(day=1) + timedelta(days=day % 30)
        verdict = charge("alice", Usage(month=spent, day=spent), cost, at, limits)
        if verdict.verdict is Verdict.CHARGE:
            assert verdict.credits == cost
            spent += cost
        else:
            assert cost > 0
            assert spent + cost > monthly
            assert verdict.notice is not None
            if verdict.notice.id not in notices:
                notices.add(verdict.notice.id)
                told += 1
        assert spent <= monthly
    assert told <= 1

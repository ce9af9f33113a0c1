"""The credit rules: what fits, what a refusal's Retry-After says, and what calls cost."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cleanair_core.credits.ledger import (
    Billable,
    CreditLimits,
    Quota,
    Usage,
    check_fits,
    cost_of,
    day_key,
    month_key,
    quota_of,
)
from cleanair_core.errors import CreditsExhausted

LIMITS = CreditLimits(monthly=1000, daily=100)
MID_JANUARY = datetime(2026, 1, 15, 12, 0, tzinfo=UTC)
SECONDS_TO_FEBRUARY = (16 * 24 + 12) * 3600  # Jan 15 12:00 -> Feb 1 00:00
SECONDS_TO_MIDNIGHT = 12 * 3600


def retry_after_of(usage: Usage, amount: int, at: datetime, limits: CreditLimits = LIMITS) -> int:
    with pytest.raises(CreditsExhausted) as raised:
        check_fits(usage, amount, limits, at)
    return raised.value.retry_after


# -- what fits --------------------------------------------------------------------------------


def test_exact_fit_of_the_day_is_allowed() -> None:
    check_fits(Usage(month=500, day=75), 25, LIMITS, MID_JANUARY)


def test_one_over_the_day_is_refused() -> None:
    assert retry_after_of(Usage(month=500, day=76), 25, MID_JANUARY) == SECONDS_TO_MIDNIGHT


def test_exact_fit_of_the_month_is_allowed() -> None:
    check_fits(Usage(month=975, day=0), 25, LIMITS, MID_JANUARY)


def test_one_over_the_month_is_refused() -> None:
    assert retry_after_of(Usage(month=976, day=0), 25, MID_JANUARY) == SECONDS_TO_FEBRUARY


def test_month_blocking_names_the_month_reset_even_when_the_day_blocks_too() -> None:
    assert retry_after_of(Usage(month=1000, day=100), 1, MID_JANUARY) == SECONDS_TO_FEBRUARY


def test_day_only_blocking_names_the_day_reset() -> None:
    assert retry_after_of(Usage(month=100, day=100), 1, MID_JANUARY) == SECONDS_TO_MIDNIGHT


def test_retry_half_a_second_before_midnight_is_one_second() -> None:
    at = datetime(2026, 1, 15, 23, 59, 59, 500_000, tzinfo=UTC)
    assert retry_after_of(Usage(month=100, day=100), 1, at) == 1


def test_retry_half_a_second_before_the_month_ends_is_one_second() -> None:
    at = datetime(2026, 1, 31, 23, 59, 59, 500_000, tzinfo=UTC)
    assert retry_after_of(Usage(month=1000, day=0), 1, at) == 1


def test_retry_rounds_a_fraction_up() -> None:
    at = datetime(2026, 1, 15, 23, 59, 58, 1, tzinfo=UTC)
    assert retry_after_of(Usage(month=0, day=100), 1, at) == 2


def test_december_resets_in_january() -> None:
    at = datetime(2026, 12, 31, 22, 0, tzinfo=UTC)
    assert retry_after_of(Usage(month=1000, day=0), 1, at) == 2 * 3600


def test_windows_are_utc_whatever_the_offset_of_the_instant() -> None:
    # 01:30 on Jan 1 at UTC+2 is 23:30 on Dec 31 UTC: still December's month and day.
    at = datetime(2026, 1, 1, 1, 30, tzinfo=timezone(timedelta(hours=2)))
    assert month_key(at) == "2025-12"
    assert day_key(at) == "2025-12-31"
    assert retry_after_of(Usage(month=0, day=100), 1, at) == 30 * 60
    assert retry_after_of(Usage(month=1000, day=0), 1, at) == 30 * 60


def test_a_debit_is_at_least_one_credit() -> None:
    with pytest.raises(ValueError, match="at least one"):
        check_fits(Usage(0, 0), 0, LIMITS, MID_JANUARY)


def test_negative_limits_are_rejected() -> None:
    with pytest.raises(ValueError, match="negative"):
        CreditLimits(monthly=-1)
    with pytest.raises(ValueError, match="negative"):
        CreditLimits(daily=-1)


def test_default_limits_are_the_contract_ones() -> None:
    assert CreditLimits() == CreditLimits(monthly=1000, daily=100)


@given(
    month=st.integers(0, 1200),
    day=st.integers(0, 150),
    amount=st.integers(1, 60),
    monthly=st.integers(0, 1100),
    daily=st.integers(0, 120),
    seconds=st.integers(0, 365 * 86_400),
)
def test_check_fits_refuses_exactly_what_does_not_fit(
    month: int, day: int, amount: int, monthly: int, daily: int, seconds: int
) -> None:
    limits = CreditLimits(monthly=monthly, daily=daily)
    at = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=seconds)
    month_ok = month + amount <= monthly
    day_ok = day + amount <= daily
    if month_ok and day_ok:
        check_fits(Usage(month, day), amount, limits, at)
        return
    retry = retry_after_of(Usage(month, day), amount, at, limits)
    if month_ok:  # only the day blocks: the retry lands exactly on the next UTC midnight
        landing = at + timedelta(seconds=retry)
        assert landing.time() == datetime.min.time()
        assert landing.date() == at.date() + timedelta(days=1)
    else:  # the month blocks: the retry lands on the first instant of the next month
        landing = at + timedelta(seconds=retry)
        assert (landing.day, landing.hour, landing.minute, landing.second) == (1, 0, 0, 0)
        assert (landing - timedelta(seconds=1)).month == at.month


# -- quota ------------------------------------------------------------------------------------


def test_quota_reports_what_remains() -> None:
    assert quota_of(Usage(month=130, day=30), LIMITS) == Quota(
        used=130, limit=1000, remaining=870, daily_used=30, daily_limit=100, daily_remaining=70
    )


def test_quota_remaining_never_goes_negative() -> None:
    quota = quota_of(Usage(month=1200, day=150), LIMITS)
    assert (quota.remaining, quota.daily_remaining) == (0, 0)


def test_a_day_grant_raises_the_days_figures_only() -> None:
    quota = quota_of(Usage(month=130, day=100, day_granted=50), LIMITS)
    assert quota == Quota(
        used=130, limit=1000, remaining=870, daily_used=100, daily_limit=150, daily_remaining=50
    )


@given(
    month=st.integers(0, 1200),
    day=st.integers(0, 250),
    granted=st.integers(0, 200),
    day_granted=st.integers(0, 200),
    amount=st.integers(1, 300),
)
def test_a_call_fits_exactly_when_the_quota_has_room_for_it_grants_included(
    month: int, day: int, granted: int, day_granted: int, amount: int
) -> None:
    usage = Usage(month=month, day=day, granted=granted, day_granted=day_granted)
    quota = quota_of(usage, LIMITS)
    assert (quota.limit, quota.daily_limit) == (1000 + granted, 100 + day_granted)
    try:
        check_fits(usage, amount, LIMITS, MID_JANUARY)
    except CreditsExhausted:
        fits = False
    else:
        fits = True
    # Both windows: a day grant never lets a call past what remains of the month.
    assert fits == (amount <= min(quota.remaining, quota.daily_remaining))


# -- costs (contract section 8) ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("billable", "units", "credits"),
    [
        (Billable.SCORE, 1, 1),
        (Billable.FORECAST, 1, 2),
        (Billable.ROUTE_ENRICHMENT, 1, 1),
        (Billable.ROUTE_ENRICHMENT, 7, 7),
        (Billable.ROUTE_ENRICHMENT, 250, 250),
        (Billable.ROUTE_PLAN, 1, 25),
    ],
)
def test_costs(billable: Billable, units: int, credits: int) -> None:
    assert cost_of(billable, units) == credits


def test_cost_needs_at_least_one_unit() -> None:
    with pytest.raises(ValueError, match="units"):
        cost_of(Billable.ROUTE_ENRICHMENT, 0)

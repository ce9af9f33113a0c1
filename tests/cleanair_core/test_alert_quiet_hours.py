"""Quiet hours follow the local wall clock, through daylight-saving changes included."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cleanair_core.alerts.quiet_hours import QuietHours, is_quiet, quiet_until

HELSINKI = ZoneInfo("Europe/Helsinki")
NEW_YORK = ZoneInfo("America/New_York")
LORD_HOWE = ZoneInfo("Australia/Lord_Howe")
#: Zones and days (2026) on which their clocks change: both hemispheres, a half-hour shift
#: (Lord Howe), and a zone without changes.
CHANGES = [
    (NEW_YORK, datetime(2026, 3, 8, tzinfo=UTC)),
    (NEW_YORK, datetime(2026, 11, 1, tzinfo=UTC)),
    (HELSINKI, datetime(2026, 3, 29, tzinfo=UTC)),
    (HELSINKI, datetime(2026, 10, 25, tzinfo=UTC)),
    (LORD_HOWE, datetime(2026, 4, 5, tzinfo=UTC)),
    (LORD_HOWE, datetime(2026, 10, 4, tzinfo=UTC)),
    (ZoneInfo("Asia/Kolkata"), datetime(2026, 10, 25, tzinfo=UTC)),
]
NIGHT = QuietHours(time(22), time(7))


def utc(year: int, month: int, day: int, hour: int, minute: int) -> datetime:
    return datetime(year, month, day, hour, minute, tzinfo=UTC)


def test_quiet_hours_that_wrap_midnight_end_the_next_morning() -> None:
    # Helsinki is UTC+2 in January.
    assert quiet_until(NIGHT, HELSINKI, utc(2026, 1, 15, 21, 0)) == utc(2026, 1, 16, 5, 0)
    assert quiet_until(NIGHT, HELSINKI, utc(2026, 1, 16, 3, 0)) == utc(2026, 1, 16, 5, 0)
    assert quiet_until(NIGHT, HELSINKI, utc(2026, 1, 15, 19, 59)) == utc(2026, 1, 15, 19, 59)
    assert quiet_until(NIGHT, HELSINKI, utc(2026, 1, 16, 5, 0)) == utc(2026, 1, 16, 5, 0)
    assert quiet_until(None, HELSINKI, utc(2026, 1, 16, 3, 0)) == utc(2026, 1, 16, 3, 0)


def test_quiet_hours_within_a_day() -> None:
    lunch = QuietHours(time(12), time(13, 30))
    assert not is_quiet(lunch, HELSINKI, utc(2026, 1, 15, 9, 59))
    assert is_quiet(lunch, HELSINKI, utc(2026, 1, 15, 10, 0))
    assert quiet_until(lunch, HELSINKI, utc(2026, 1, 15, 10, 0)) == utc(2026, 1, 15, 11, 30)
    assert not is_quiet(lunch, HELSINKI, utc(2026, 1, 15, 11, 30))


def test_an_end_the_clocks_skip_ends_the_period_at_the_jump() -> None:
    # Helsinki, 29 March 2026: 03:00 EET becomes 04:00 EEST at 01:00 UTC; 03:30 never shows.
    quiet = QuietHours(time(22), time(3, 30))
    assert quiet_until(quiet, HELSINKI, utc(2026, 3, 28, 21, 0)) == utc(2026, 3, 29, 1, 0)


def test_an_end_the_clocks_show_twice_ends_the_period_the_first_time() -> None:
    # Helsinki, 25 October 2026: 04:00 EEST becomes 03:00 EET at 01:00 UTC.
    quiet = QuietHours(time(22), time(3, 30))
    assert quiet_until(quiet, HELSINKI, utc(2026, 10, 24, 21, 0)) == utc(2026, 10, 25, 0, 30)


def test_the_hour_shown_twice_is_judged_by_the_time_it_shows() -> None:
    # New York, 1 November 2026: 02:00 EDT becomes 01:00 EST at 06:00 UTC. From 01:45 EDT
    # the clock goes back to 01:00, outside 01:30-03:00, then into the period again at 01:30.
    quiet = QuietHours(time(1, 30), time(3))
    assert quiet_until(quiet, NEW_YORK, utc(2026, 11, 1, 5, 45)) == utc(2026, 11, 1, 6, 0)
    assert quiet_until(quiet, NEW_YORK, utc(2026, 11, 1, 6, 40)) == utc(2026, 11, 1, 8, 0)


def test_quiet_hours_refuse_an_empty_period_and_aware_times() -> None:
    with pytest.raises(ValueError, match="different times"):
        QuietHours(time(7), time(7))
    with pytest.raises(ValueError, match="without a timezone"):
        QuietHours(time(7, tzinfo=UTC), time(8))
    with pytest.raises(ValueError, match="timezone-aware"):
        quiet_until(NIGHT, HELSINKI, datetime(2026, 1, 15, 3, 0))  # noqa: DTZ001 - to be refused


def brute_force_until(quiet: QuietHours, zone: ZoneInfo, at: datetime) -> datetime:
    """Minute by minute: exact when `at`, the period's ends and the zone's changes all fall on
    whole minutes."""
    while is_quiet(quiet, zone, at):
        at += timedelta(minutes=1)
    return at


# Clocks change between 01:00 and 04:00, so those hours are drawn more often.
wall_times = st.builds(
    time, st.one_of(st.integers(0, 4), st.integers(0, 23)), st.sampled_from([0, 15, 30, 45])
)


@settings(max_examples=500, deadline=None)
@given(
    change=st.sampled_from(CHANGES),
    start=wall_times,
    end=wall_times,
    minutes=st.integers(-36 * 60, 36 * 60),
)
def test_quiet_until_is_the_first_instant_that_is_not_quiet(
    change: tuple[ZoneInfo, datetime], start: time, end: time, minutes: int
) -> None:
    zone, day = change
    if start == end:
        return
    quiet = QuietHours(start, end)
    at = day + timedelta(minutes=minutes)
    until = quiet_until(quiet, zone, at)
    assert until == brute_force_until(quiet, zone, at)
    assert not is_quiet(quiet, zone, until)

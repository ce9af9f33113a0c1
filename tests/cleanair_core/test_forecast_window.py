"""The forecast's 4-day window and the hourly axis of a local day, daylight saving included."""

from __future__ import annotations

import itertools
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from cleanair_core.air.forecast_window import check_in_window, local_day_hours, parse_timezone
from cleanair_core.errors import OutsideForecastWindow, Unprocessable


@pytest.mark.parametrize(
    ("zone", "day", "hours", "first_local_hour"),
    [
        ("Europe/Helsinki", date(2026, 11, 22), 24, 0),
        ("Europe/Helsinki", date(2026, 3, 29), 23, 0),  # spring forward
        ("Europe/Helsinki", date(2026, 10, 25), 25, 0),  # fall back
        ("America/New_York", date(2026, 3, 8), 23, 0),
        ("America/New_York", date(2026, 11, 1), 25, 0),
        ("America/Santiago", date(2026, 9, 6), 23, 1),  # midnight does not exist that day
        ("UTC", date(2026, 3, 29), 24, 0),
    ],
)
def test_a_local_day_has_one_entry_per_real_hour(
    zone: str, day: date, hours: int, first_local_hour: int
) -> None:
    tz = ZoneInfo(zone)
    axis = local_day_hours(day, tz)
    assert len(axis) == hours
    assert all(b - a == timedelta(hours=1) for a, b in itertools.pairwise(axis))
    assert axis[0].astimezone(tz).date() == day
    assert axis[0].astimezone(tz).hour == first_local_hour
    assert axis[-1].astimezone(tz).date() == day
    assert (axis[-1] + timedelta(hours=1)).astimezone(tz).date() == day + timedelta(days=1)


def test_half_hour_zones_keep_local_whole_hours() -> None:
    axis = local_day_hours(date(2026, 11, 22), ZoneInfo("Asia/Kolkata"))
    assert axis[0] == datetime(2026, 11, 21, 18, 30, tzinfo=UTC)
    assert len(axis) == 24


@pytest.mark.parametrize(
    ("zone", "inside", "outside"),
    [
        # 23:30 UTC on 22 Nov is already 23 Nov in Auckland and still 22 Nov in Los Angeles.
        ("Pacific/Auckland", [date(2026, 11, 23), date(2026, 11, 26)], [date(2026, 11, 22)]),
        (
            "America/Los_Angeles",
            [date(2026, 11, 22), date(2026, 11, 25)],
            [date(2026, 11, 21), date(2026, 11, 26)],
        ),
        ("UTC", [date(2026, 11, 22), date(2026, 11, 25)], [date(2026, 11, 26), date(2025, 1, 1)]),
    ],
)
def test_the_window_is_today_to_today_plus_three_in_the_zone(
    zone: str, inside: list[date], outside: list[date]
) -> None:
    now = datetime(2026, 11, 22, 23, 30, tzinfo=UTC)
    for day in inside:
        check_in_window(day, ZoneInfo(zone), now)
    for day in outside:
        with pytest.raises(OutsideForecastWindow):
            check_in_window(day, ZoneInfo(zone), now)


@pytest.mark.parametrize("name", ["UTC", "Europe/Helsinki", "America/Argentina/Buenos_Aires"])
def test_known_zones_parse(name: str) -> None:
    assert parse_timezone(name).key == name


@pytest.mark.parametrize(
    "name",
    [
        "Mars/Olympus_Mons",
        "",
        "../../etc/passwd",
        "/etc/localtime",
        "Europe/" + "x" * 80,
        "Europe/",
        "localtime",  # the server's own zone, whatever that is
        "Factory",
        "posixrules",
        "right/Europe/Helsinki",  # leap-second variant: a different axis
        "posix/Europe/Helsinki",
    ],
)
def test_unknown_or_hostile_zone_names_are_unprocessable(name: str) -> None:
    with pytest.raises(Unprocessable):
        parse_timezone(name)

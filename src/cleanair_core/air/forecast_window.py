"""The forecast's calendar: the 4-day window and the hourly axis of one local day."""

from __future__ import annotations

import functools
import re
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from cleanair_core.errors import OutsideForecastWindow, Unprocessable

#: The window spans 4 days: today and the next three, "today" being the date in the
#: request's timezone when the request arrives.
WINDOW_DAYS = 4
_ZONE_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_+\-]*(/[A-Za-z0-9_+\-]+)*$")


@functools.cache
def _iana_names() -> frozenset[str]:
    # "localtime" would be the server's own zone and "Factory" is no place; available_timezones
    # already leaves out the posix/ and right/ variants, which are not IANA names.
    return frozenset(available_timezones()) - {"localtime", "Factory"}


def parse_timezone(name: str) -> ZoneInfo:
    """The IANA zone called `name`; raises Unprocessable (422) for anything else."""
    # Checked before zoneinfo sees it: the name becomes a file path inside the tz database.
    if len(name) > 64 or not _ZONE_NAME.fullmatch(name) or name not in _iana_names():
        raise Unprocessable()
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise Unprocessable() from None


def check_in_window(day: date, zone: ZoneInfo, now: datetime) -> None:
    """Raise OutsideForecastWindow unless `day` is today .. today + 3 in `zone`."""
    today = now.astimezone(zone).date()
    if not today <= day <= today + timedelta(days=WINDOW_DAYS - 1):
        raise OutsideForecastWindow()


def local_day_hours(day: date, zone: ZoneInfo) -> list[datetime]:
    """The instants (UTC) of each hour of the local day, from its first instant to its end.

    A day has 24 entries, 23 when clocks spring forward and 25 when they fall back. A day that
    starts in a gap (a transition at midnight) starts at the first instant that exists.
    """
    start = _first_instant(day, zone)
    end = _first_instant(day + timedelta(days=1), zone)
    hours = []
    at = start
    while at < end:
        hours.append(at)
        at += timedelta(hours=1)
    return hours


def _first_instant(day: date, zone: ZoneInfo) -> datetime:
    # fold=0 takes the offset in force before a transition; for a nonexistent local midnight
    # that lands on the first real instant after the gap.
    return datetime.combine(day, time(0), zone).astimezone(UTC)

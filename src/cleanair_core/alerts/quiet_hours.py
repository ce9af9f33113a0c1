"""Quiet hours: a daily local period in which a subscription's events are held back (issue 32).

An instant is quiet when the wall clock in the subscription's timezone reads a time inside the
period, so the rule follows the clock people read through daylight-saving changes: on the night
clocks spring forward past the period's end, the period ends at the jump; in the hour repeated
when they fall back, each pass of the hour is judged by the time it shows.
"""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

import attrs

#: Offset changes are looked for at this spacing; no zone changes its offset twice within it.
_SCAN = timedelta(hours=1)
_TICK = timedelta(microseconds=1)


def _wall_time(_: object, attribute: attrs.Attribute[time], value: time) -> None:
    if value.tzinfo is not None:
        raise ValueError(f"{attribute.name} must be a wall-clock time without a timezone")


@attrs.frozen
class QuietHours:
    """A daily quiet period from `start` (included) to `end` (excluded), wall-clock times in the
    subscription's timezone. It wraps midnight when `end` comes before `start` (22:00 to 07:00);
    `start` equal to `end` is refused, since it would be either no period or a day without
    deliveries."""

    start: time = attrs.field(validator=_wall_time)
    end: time = attrs.field(validator=_wall_time)

    def __attrs_post_init__(self) -> None:
        if self.start == self.end:
            raise ValueError("quiet hours must start and end at different times")


def is_quiet(quiet: QuietHours, zone: ZoneInfo, at: datetime) -> bool:
    """Whether the wall clock in `zone` shows a time inside `quiet` at the instant `at`."""
    wall = _require_aware(at).astimezone(zone).time()
    if quiet.start < quiet.end:
        return quiet.start <= wall < quiet.end
    return wall >= quiet.start or wall < quiet.end


def quiet_until(quiet: QuietHours | None, zone: ZoneInfo, at: datetime) -> datetime:
    """The first instant from `at` on that is not quiet (UTC): `at` itself outside quiet hours
    (or with none), else the end of the quiet period `at` falls in."""
    at = _require_aware(at).astimezone(UTC)
    if quiet is None:
        return at
    while is_quiet(quiet, zone, at):
        at = _leave(quiet, zone, at)
    return at


def _leave(quiet: QuietHours, zone: ZoneInfo, at: datetime) -> datetime:
    """From a quiet instant: the instant the wall clock reaches the period's end, or the first
    change of the zone's offset before that, whichever comes first."""
    offset = _offset(zone, at)
    wall = (at + offset).replace(tzinfo=None)
    end_day = wall.date() if wall.time() < quiet.end else wall.date() + timedelta(days=1)
    reaches_end = at + (datetime.combine(end_day, quiet.end) - wall)
    change = _offset_change(zone, at, reaches_end, offset)
    return reaches_end if change is None else change


def _offset_change(
    zone: ZoneInfo, after: datetime, until: datetime, offset: timedelta
) -> datetime | None:
    """The first instant in (after, until] at which `zone`'s offset is no longer `offset`."""
    low = after
    while low < until:
        high = min(low + _SCAN, until)
        if _offset(zone, high) != offset:
            # Offsets change at whole seconds, so halving down to a microsecond finds the
            # change's own instant.
            while high - low > _TICK:
                middle = low + (high - low) / 2
                if _offset(zone, middle) == offset:
                    low = middle
                else:
                    high = middle
            return high
        low = high
    return None


def _offset(zone: ZoneInfo, at: datetime) -> timedelta:
    offset = at.astimezone(zone).utcoffset()
    assert offset is not None  # a ZoneInfo always knows its offset at an instant
    return offset


def _require_aware(at: datetime) -> datetime:
    if at.tzinfo is None or at.utcoffset() is None:
        raise ValueError("instants must be timezone-aware")
    return at

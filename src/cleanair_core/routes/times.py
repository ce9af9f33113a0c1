"""When the person is at each waypoint of a route, and the window air-quality data exists for.

A route comes either as a recorded track (a time on every waypoint) or as bare points plus a
`start_time`; then each waypoint's time is estimated from the great-circle distance covered so
far at the activity's travel speed. Mixing the two, or giving neither, is a validation failure
(422), as is a recorded track whose times go backwards.

Times without a UTC offset are read as UTC (the contract's date-times are UTC by convention);
every time returned is timezone-aware UTC.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from cleanair_core.errors import OutsideDataWindow, Unprocessable
from cleanair_core.geo import Point, distance_m

#: Data reaches back no more than 30 days (contract section 8) ...
PAST_WINDOW = timedelta(days=30)
#: ... and forward to the 84-hour forecast horizon.
FORWARD_HORIZON = timedelta(hours=84)


def as_utc(at: datetime) -> datetime:
    """`at` in UTC; a naive datetime is taken to be UTC already.

    Raises OutsideDataWindow for a time that UTC cannot even hold (year 1 or 9999 with an
    offset): it is certainly outside the window data exists for.
    """
    if at.tzinfo is None:
        return at.replace(tzinfo=UTC)
    try:
        return at.astimezone(UTC)
    except OverflowError:
        raise OutsideDataWindow() from None


def waypoint_times(
    points: Sequence[Point],
    times: Sequence[datetime | None],
    start_time: datetime | None,
    speed_m_s: float,
) -> list[datetime]:
    """The UTC instant of every waypoint: the recorded ones, else estimated from `start_time`.

    Raises Unprocessable when some but not all waypoints have a time, when none has one and
    there is no `start_time`, or when recorded times go backwards.
    """
    if len(points) != len(times) or not points:
        raise Unprocessable()
    given = [at for at in times if at is not None]
    if given:
        if len(given) != len(times):
            raise Unprocessable()  # a recorded track has a time on every waypoint
        recorded = [as_utc(at) for at in given]
        if any(later < earlier for earlier, later in itertools.pairwise(recorded)):
            raise Unprocessable()
        return recorded
    if start_time is None:
        raise Unprocessable()
    return estimated_times(points, as_utc(start_time), speed_m_s)


def estimated_times(points: Sequence[Point], start: datetime, speed_m_s: float) -> list[datetime]:
    """Times at each point when leaving `start`'s point at `start` and moving at `speed_m_s`."""
    if not speed_m_s > 0:
        raise ValueError("a travel speed is positive")
    elapsed = 0.0
    times = [start]
    for a, b in itertools.pairwise(points):
        elapsed += distance_m(a, b) / speed_m_s
        try:
            times.append(start + timedelta(seconds=elapsed))
        except OverflowError:  # past year 9999: far beyond the window data exists for
            raise OutsideDataWindow() from None
    return times


def check_data_window(times: Sequence[datetime], now: datetime) -> None:
    """Raise OutsideDataWindow if any time is over 30 days ago or beyond now + 84 hours."""
    earliest, latest = now - PAST_WINDOW, now + FORWARD_HORIZON
    for at in times:
        if not earliest <= as_utc(at) <= latest:
            raise OutsideDataWindow()


def time_weights(times: Sequence[datetime]) -> list[float]:
    """Seconds of the route each waypoint stands for (trapezoid rule).

    Each leg between consecutive waypoints gives half its duration to either end, so the
    weights sum to the route's duration and a time-weighted mean integrates the values linearly
    along every leg. A single waypoint, or a route whose waypoints share one time, has weight 0
    everywhere: it lasts no time.
    """
    weights = [0.0] * len(times)
    for i, (a, b) in enumerate(itertools.pairwise(times)):
        half = (b - a).total_seconds() / 2
        weights[i] += half
        weights[i + 1] += half
    return weights


def time_weighted_mean(values: Sequence[float | None], weights: Sequence[float]) -> float | None:
    """The mean of the known values weighted by `weights`; None when no value is known.

    Unknown values are left out and the remaining weights renormalised. When the known values
    carry no weight at all (a route that lasts no time), they count equally, so a one-waypoint
    route's mean is that waypoint's value.
    """
    known = [(v, w) for v, w in zip(values, weights, strict=True) if v is not None]
    if not known:
        return None
    total = sum(w for _, w in known)
    if total <= 0:
        return float(sum(v for v, _ in known) / len(known))
    mean = sum(v * w for v, w in known) / total
    # Float rounding must not put the mean outside the values it averages.
    return float(min(max(mean, min(v for v, _ in known)), max(v for v, _ in known)))

"""Waypoint times: recorded or estimated, the data window, and time weighting."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cleanair_core.errors import OutsideDataWindow, Unprocessable
from cleanair_core.geo import Point, distance_m
from cleanair_core.routes.times import (
    FORWARD_HORIZON,
    PAST_WINDOW,
    check_data_window,
    estimated_times,
    time_weighted_mean,
    time_weights,
    waypoint_times,
)

NOW = datetime(2026, 11, 22, 10, 15, tzinfo=UTC)
A, B, C = Point(60.17, 24.94), Point(60.18, 24.94), Point(60.18, 24.96)


def at(minutes: float) -> datetime:
    return NOW + timedelta(minutes=minutes)


# -- recorded or estimated --------------------------------------------------------------------


def test_a_recorded_track_keeps_its_times() -> None:
    times = [at(0), at(5), at(5), at(12)]
    assert waypoint_times([A, B, C, A], times, None, 1.3) == times


def test_recorded_times_win_over_start_time() -> None:
    assert waypoint_times([A, B], [at(0), at(3)], at(-60), 1.3) == [at(0), at(3)]


def test_offsets_are_converted_and_naive_times_read_as_utc() -> None:
    helsinki = timezone(timedelta(hours=2))
    local = datetime(2026, 11, 22, 12, 15, tzinfo=helsinki)
    naive = datetime(2026, 11, 22, 10, 20)  # noqa: DTZ001 - the naive input under test
    times = waypoint_times([A, B], [local, naive], None, 1.3)
    assert times == [NOW, at(5)]
    assert all(t.tzinfo is UTC for t in times)


def test_recorded_times_must_not_go_backwards() -> None:
    with pytest.raises(Unprocessable):
        waypoint_times([A, B, C], [at(0), at(5), at(4)], None, 1.3)


@pytest.mark.parametrize("which", [0, 1, 2])
def test_times_on_some_waypoints_only_are_refused(which: int) -> None:
    times: list[datetime | None] = [at(0), at(1), at(2)]
    times[which] = None
    with pytest.raises(Unprocessable):
        waypoint_times([A, B, C], times, at(0), 1.3)


def test_no_times_and_no_start_time_is_refused() -> None:
    with pytest.raises(Unprocessable):
        waypoint_times([A, B], [None, None], None, 1.3)


def test_estimated_times_follow_distance_at_the_speed() -> None:
    times = waypoint_times([A, B, C], [None, None, None], NOW, 2.0)
    first_leg = distance_m(A, B) / 2.0
    second_leg = distance_m(B, C) / 2.0
    assert times[0] == NOW
    assert (times[1] - NOW).total_seconds() == pytest.approx(first_leg)
    assert (times[2] - NOW).total_seconds() == pytest.approx(first_leg + second_leg)


def test_a_faster_speed_arrives_sooner() -> None:
    slow = estimated_times([A, B, C], NOW, 1.3)
    fast = estimated_times([A, B, C], NOW, 5.0)
    assert fast[-1] < slow[-1]


def test_one_waypoint_is_at_the_start_time() -> None:
    assert waypoint_times([A], [None], NOW, 1.3) == [NOW]


# -- the data window --------------------------------------------------------------------------


def test_the_window_bounds_are_inclusive() -> None:
    check_data_window([NOW - PAST_WINDOW, NOW, NOW + FORWARD_HORIZON], NOW)


@pytest.mark.parametrize(
    "when",
    [NOW - PAST_WINDOW - timedelta(seconds=1), NOW + FORWARD_HORIZON + timedelta(seconds=1)],
)
def test_times_outside_the_window_are_refused(when: datetime) -> None:
    with pytest.raises(OutsideDataWindow):
        check_data_window([NOW, when, NOW], NOW)


def test_the_window_is_30_days_back_and_84_hours_ahead() -> None:
    assert timedelta(days=30) == PAST_WINDOW
    assert timedelta(hours=84) == FORWARD_HORIZON


# -- weights ----------------------------------------------------------------------------------


def test_each_leg_gives_half_its_duration_to_either_end() -> None:
    assert time_weights([at(0), at(10), at(30)]) == [300.0, 900.0, 600.0]


def test_a_route_that_lasts_no_time_weighs_nothing() -> None:
    assert time_weights([NOW]) == [0.0]
    assert time_weights([NOW, NOW]) == [0.0, 0.0]


def test_unknown_values_are_left_out_of_the_mean() -> None:
    assert time_weighted_mean([10.0, None, 40.0], [1.0, 5.0, 2.0]) == 30.0
    assert time_weighted_mean([None, None], [1.0, 1.0]) is None


def test_without_weight_known_values_count_equally() -> None:
    assert time_weighted_mean([10.0, 20.0], [0.0, 0.0]) == 15.0
    assert time_weighted_mean([70.0], [0.0]) == 70.0


gaps = st.lists(st.integers(min_value=0, max_value=3600), min_size=0, max_size=30)
values = st.one_of(st.none(), st.floats(min_value=0, max_value=100, allow_nan=False))


@given(gaps)
def test_weights_sum_to_the_duration(seconds: list[int]) -> None:
    times = [NOW]
    for gap in seconds:
        times.append(times[-1] + timedelta(seconds=gap))
    weights = time_weights(times)
    assert sum(weights) == pytest.approx((times[-1] - times[0]).total_seconds())
    assert all(w >= 0 for w in weights)


@given(st.data(), gaps)
def test_the_mean_lies_between_the_smallest_and_largest_value(
    data: st.DataObject, seconds: list[int]
) -> None:
    times = [NOW]
    for gap in seconds:
        times.append(times[-1] + timedelta(seconds=gap))
    vals = data.draw(st.lists(values, min_size=len(times), max_size=len(times)))
    mean = time_weighted_mean(vals, time_weights(times))
    known = [v for v in vals if v is not None]
    if not known:
        assert mean is None
    else:
        assert mean is not None
        assert min(known) <= mean <= max(known)

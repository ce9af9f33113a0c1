"""Screening observations at intake (upper bounds, hours in the future), the retention's
rules an import tells of, and replaying a past sample by whole days."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cleanair_core import CleanAir, ManualClock, Policy, TokenKeys, generate_key
from cleanair_core.air.observations import OBSERVED, Observation, Station
from cleanair_core.air.pollutants import Pollutant
from cleanair_core.air.retention import (
    days_to_keep,
    last_full_hour,
    replay_shift,
    retention_cutoff,
)
from cleanair_core.air.screening import (
    UPPER_BOUNDS,
    HeldBack,
    HeldBackCounts,
    ObservationImport,
    held_back,
    screen_observations,
)
from cleanair_core.geo import Point
from cleanair_core.ports import Store

NOW = datetime(2026, 6, 1, 12, 30, tzinfo=UTC)
KALLIO = Station("openaq:2178", "Kallio", Point(60.18, 24.95))
FULL_HOUR = datetime(2026, 6, 1, 12, tzinfo=UTC)


def reading(pollutant: Pollutant, value: float, hour_end: datetime = FULL_HOUR) -> Observation:
    return Observation(KALLIO.id, pollutant, hour_end, value)


def test_every_observed_pollutant_has_a_bound() -> None:
    assert set(UPPER_BOUNDS) == set(OBSERVED)


@pytest.mark.parametrize(
    ("pollutant", "extreme"),
    [
        (Pollutant.PM10, 8_100.0),  # Beijing's dust storm of 15 March 2021
        (Pollutant.PM10, 15_000.0),  # heavier than any hourly mean on record: still kept
        (Pollutant.PM25, 1_985.0),  # Delhi's and Beijing's worst smog hours
        (Pollutant.NO2, 800.0),  # London, December 1991 (423 ppb)
        (Pollutant.O3, 1_335.0),  # Los Angeles, 1955 (0.68 ppm)
    ],
)
def test_real_extremes_are_kept(pollutant: Pollutant, extreme: float) -> None:
    assert held_back(reading(pollutant, extreme), NOW) is None


@pytest.mark.parametrize("pollutant", OBSERVED)
def test_a_value_over_its_bound_is_held_back_and_the_bound_itself_kept(
    pollutant: Pollutant,
) -> None:
    bound = UPPER_BOUNDS[pollutant]
    assert held_back(reading(pollutant, bound), NOW) is None
    assert held_back(reading(pollutant, bound * 1.0001), NOW) is HeldBack.OVER_BOUND
    assert held_back(reading(pollutant, 1e300), NOW) is HeldBack.OVER_BOUND


def test_an_hour_ending_after_now_is_held_back_and_the_last_full_hour_kept() -> None:
    assert held_back(reading(Pollutant.NO2, 20.0, FULL_HOUR), NOW) is None
    # The hour ending at the current full hour, read at that very instant: it has ended.
    assert held_back(reading(Pollutant.NO2, 20.0, FULL_HOUR), FULL_HOUR) is None
    ahead = FULL_HOUR + timedelta(hours=1)
    assert held_back(reading(Pollutant.NO2, 20.0, ahead), NOW) is HeldBack.FUTURE
    two_ahead = FULL_HOUR + timedelta(hours=2)
    assert held_back(reading(Pollutant.NO2, 20.0, two_ahead), NOW) is HeldBack.FUTURE
    # Both wrong: counted once, by its value.
    assert held_back(reading(Pollutant.NO2, 1e300, two_ahead), NOW) is HeldBack.OVER_BOUND


observations = st.builds(
    reading,
    st.sampled_from(OBSERVED),
    st.one_of(
        st.floats(min_value=0.0, max_value=30_000.0),
        st.sampled_from([0.0, 1e300, *UPPER_BOUNDS.values()]),
    ),
    st.integers(min_value=-100, max_value=100).map(lambda h: FULL_HOUR + timedelta(hours=h)),
)


@given(st.lists(observations, max_size=40), st.integers(min_value=0, max_value=3599))
def test_no_kept_observation_is_over_its_bound_or_in_the_future_and_counts_add_up(
    given_observations: list[Observation], seconds: int
) -> None:
    now = FULL_HOUR + timedelta(seconds=seconds)
    kept, counts = screen_observations(given_observations, now)
    for observation in kept:
        assert observation.value <= UPPER_BOUNDS[observation.pollutant]
        assert observation.hour_end <= now
    assert len(kept) + counts.over_bound + counts.future == len(given_observations)
    assert counts.total == counts.over_bound + counts.future
    # Nothing within the rules is held back, and what is kept keeps its order.
    assert kept == [o for o in given_observations if held_back(o, now) is None]
    assert counts.over_bound == sum(o.value > UPPER_BOUNDS[o.pollutant] for o in given_observations)


def test_counts_add_up_by_reason() -> None:
    total = HeldBackCounts(1, 2) + HeldBackCounts(3, 4)
    assert total == HeldBackCounts(over_bound=4, future=6)
    assert (total.count(HeldBack.OVER_BOUND), total.count(HeldBack.FUTURE)) == (4, 6)


def test_on_every_adapter_an_import_stores_only_what_the_screening_keeps(store: Store) -> None:
    """One 1e300 and one reading dated two hours ahead are counted, not stored, and do not
    stop the rest: the import is no longer poisoned by them."""
    core = CleanAir(store, TokenKeys(generate_key()), Policy(), ManualClock(NOW))
    good = reading(Pollutant.PM25, 8.0, FULL_HOUR - timedelta(hours=1))
    poison = reading(Pollutant.PM25, 1e300, FULL_HOUR)
    ahead = reading(Pollutant.NO2, 20.0, FULL_HOUR + timedelta(hours=2))
    done = core.import_observations([KALLIO, good, poison, ahead], chunk_size=1)
    assert done.held_back == HeldBackCounts(over_bound=1, future=1)
    assert (done.stations, done.written.added) == (1, 1)
    stored = store.observations_between(NOW - timedelta(days=1), NOW + timedelta(days=1))
    assert stored == [good]
    assert done == ObservationImport(1, done.written, HeldBackCounts(1, 1))


# -- the retention and replaying -----------------------------------------------------------


def test_the_retention_cutoff_and_the_days_that_keep_a_row() -> None:
    assert retention_cutoff(NOW, 0) is None  # kept for ever
    assert retention_cutoff(NOW, 400 * 86_400) == NOW - timedelta(days=400)
    assert days_to_keep(NOW - timedelta(days=3), NOW) == 3
    assert days_to_keep(NOW - timedelta(days=3, hours=1), NOW) == 4
    assert days_to_keep(NOW - timedelta(minutes=30), NOW) == 1


instants = st.datetimes(
    min_value=datetime(2000, 1, 1),  # noqa: DTZ001 - hypothesis wants naive bounds
    max_value=datetime(2040, 1, 1),  # noqa: DTZ001
    timezones=st.just(UTC),
)


@given(instants.map(last_full_hour), instants)
def test_a_replay_shift_is_whole_days_and_lands_within_the_day_before_the_last_full_hour(
    latest: datetime, now: datetime
) -> None:
    shift = replay_shift(latest, now)
    assert shift % timedelta(days=1) == timedelta(0)  # each value keeps its hour of the day
    landed = latest + shift
    assert last_full_hour(now) - timedelta(days=1) < landed <= last_full_hour(now) <= now


def test_a_sample_ending_at_the_last_full_hour_is_not_moved() -> None:
    assert replay_shift(FULL_HOUR, NOW) == timedelta(0)
    assert replay_shift(FULL_HOUR - timedelta(hours=1), NOW) == timedelta(0)
    assert replay_shift(FULL_HOUR + timedelta(hours=1), NOW) == timedelta(days=-1)
    beijing_end = datetime(2016, 12, 31, 15, tzinfo=UTC)  # 23:00 at +08:00
    assert beijing_end + replay_shift(beijing_end, NOW) == datetime(2026, 5, 31, 15, tzinfo=UTC)

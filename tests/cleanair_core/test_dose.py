"""The relative inhaled dose: reference values and the properties issue 4 asks for."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cleanair_core.air.activities import ActivityType, ventilation_ratio
from cleanair_core.air.dose import GUIDELINE_LEVELS, air_load, dose_pollutants, inhaled_dose
from cleanair_core.air.exposure import EnvironmentType
from cleanair_core.air.pollutants import SCORED, Concentrations, Pollutant
from cleanair_core.geo import Point
from cleanair_core.routes.enrichment import enrich
from cleanair_core.routes.times import time_weights

NOW = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
AT_GUIDELINES: Concentrations = dict(GUIDELINE_LEVELS)


def test_an_hour_of_light_effort_at_the_guidelines_is_a_dose_of_one() -> None:
    weights = time_weights([NOW, NOW + timedelta(hours=1)])
    assert inhaled_dose([AT_GUIDELINES, AT_GUIDELINES], weights, 1.0) == pytest.approx(1.0)


def test_the_guidelines_are_the_who_2021_short_term_levels() -> None:
    assert dict(GUIDELINE_LEVELS) == {
        Pollutant.PM25: 15.0,
        Pollutant.PM10: 45.0,
        Pollutant.NO2: 25.0,
        Pollutant.O3: 100.0,
        Pollutant.SO2: 40.0,
    }


def test_the_air_load_is_the_mean_multiple_of_the_guidelines() -> None:
    air: Concentrations = {Pollutant.PM25: 30.0, Pollutant.NO2: 0.0}
    assert air_load(air, (Pollutant.PM25, Pollutant.NO2)) == pytest.approx(1.0)
    assert air_load({Pollutant.PM25: -3.0}, (Pollutant.PM25,)) == 0.0


def test_the_basis_is_the_pollutants_known_everywhere() -> None:
    airs: list[Concentrations] = [
        {Pollutant.PM25: 5.0, Pollutant.NO2: 10.0, Pollutant.CO2: 400.0},
        {Pollutant.PM25: 6.0, Pollutant.NO2: None, Pollutant.CO2: 410.0},
    ]
    assert dose_pollutants(airs) == (Pollutant.PM25,)


def test_no_common_pollutant_means_no_dose() -> None:
    airs: list[Concentrations] = [{Pollutant.PM25: 5.0}, {Pollutant.NO2: 10.0}]
    assert inhaled_dose(airs, [30.0, 30.0], 1.0) is None


def test_a_route_that_lasts_no_time_has_dose_zero() -> None:
    assert inhaled_dose([AT_GUIDELINES], [0.0], 4.0) == 0.0


# -- properties -------------------------------------------------------------------------------

concentration = st.floats(min_value=0.0, max_value=500.0, allow_nan=False)
airs_strategy = st.lists(
    st.fixed_dictionaries(dict.fromkeys(SCORED, concentration)), min_size=2, max_size=20
)
gap = st.integers(min_value=1, max_value=1800)


def route_of(airs: list[dict[Pollutant, float]], gaps: list[int]) -> list[datetime]:
    times = [NOW]
    for seconds in gaps[: len(airs) - 1]:
        times.append(times[-1] + timedelta(seconds=seconds))
    while len(times) < len(airs):
        times.append(times[-1] + timedelta(seconds=60))
    return times


def dose_of(
    airs: list[dict[Pollutant, float]],
    times: list[datetime],
    activity: ActivityType = ActivityType.WALKING,
    environment: EnvironmentType = EnvironmentType.OUTDOOR,
) -> float:
    points = [Point(60.0 + i * 0.001, 25.0) for i in range(len(airs))]
    typed: list[Concentrations] = [dict(air) for air in airs]
    dose = enrich(points, times, typed, activity, environment).summary.inhaled_dose
    assert dose is not None
    return dose


@given(airs_strategy, st.lists(gap, min_size=19, max_size=19), st.floats(1.01, 10.0))
def test_dose_grows_with_duration(
    airs: list[dict[Pollutant, float]], gaps: list[int], stretch: float
) -> None:
    times = route_of(airs, gaps)
    longer = [NOW + (t - NOW) * stretch for t in times]
    before, after = dose_of(airs, times), dose_of(airs, longer)
    assert after >= before
    if before > 0:
        assert after > before
        assert after == pytest.approx(before * stretch)


@given(
    airs_strategy,
    st.lists(gap, min_size=19, max_size=19),
    st.sampled_from(list(ActivityType)),
    st.sampled_from(list(ActivityType)),
)
def test_dose_grows_with_breathing(
    airs: list[dict[Pollutant, float]], gaps: list[int], a: ActivityType, b: ActivityType
) -> None:
    if ventilation_ratio(a) > ventilation_ratio(b):
        a, b = b, a
    times = route_of(airs, gaps)
    calm, hard = dose_of(airs, times, a), dose_of(airs, times, b)
    assert calm <= hard
    if ventilation_ratio(a) < ventilation_ratio(b) and calm > 0:
        assert calm < hard


@given(
    airs_strategy,
    st.lists(gap, min_size=19, max_size=19),
    st.data(),
    st.floats(min_value=0.0, max_value=200.0),
)
def test_dose_never_falls_when_concentrations_rise(
    airs: list[dict[Pollutant, float]],
    gaps: list[int],
    data: st.DataObject,
    rise: float,
) -> None:
    times = route_of(airs, gaps)
    index = data.draw(st.integers(0, len(airs) - 1))
    pollutant = data.draw(st.sampled_from(SCORED))
    dirtier = [dict(air) for air in airs]
    dirtier[index][pollutant] += rise
    assert dose_of(dirtier, times) >= dose_of(airs, times)


@given(airs_strategy, st.lists(gap, min_size=19, max_size=19))
def test_indoor_dose_is_lower_than_outdoor(
    airs: list[dict[Pollutant, float]], gaps: list[int]
) -> None:
    times = route_of(airs, gaps)
    outdoor = dose_of(airs, times, environment=EnvironmentType.OUTDOOR)
    indoor = dose_of(airs, times, environment=EnvironmentType.INDOOR)
    assert indoor <= outdoor
    if outdoor > 0:
        assert indoor < outdoor
    assert dose_of(airs, times, environment=EnvironmentType.UNKNOWN) == outdoor

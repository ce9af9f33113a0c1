"""Environment and activity adjustments of the score."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cleanair_core.air.activities import ActivityType, ventilation_ratio
from cleanair_core.air.exposure import (
    INDOOR_RATIOS,
    EnvironmentType,
    breathed_air,
    breathing_factor,
    personal_score,
)
from cleanair_core.air.pollutants import SCORED, Pollutant
from cleanair_core.air.score import clean_air_score

airs = st.dictionaries(
    st.sampled_from(SCORED), st.floats(min_value=0, max_value=1000) | st.none(), max_size=5
)
activities = st.sampled_from(list(ActivityType))


@given(airs, activities)
def test_indoor_never_scores_worse_than_outdoor(
    air: dict[Pollutant, float | None], activity: ActivityType
) -> None:
    indoor = personal_score(air, activity, EnvironmentType.INDOOR)
    outdoor = personal_score(air, activity, EnvironmentType.OUTDOOR)
    assert (indoor is None) == (outdoor is None)
    if indoor is not None and outdoor is not None:
        assert indoor >= outdoor


@given(airs, activities, activities, st.sampled_from(list(EnvironmentType)))
def test_heavier_breathing_never_scores_better(
    air: dict[Pollutant, float | None],
    a: ActivityType,
    b: ActivityType,
    environment: EnvironmentType,
) -> None:
    light, heavy = sorted((a, b), key=ventilation_ratio)
    light_score = personal_score(air, light, environment)
    heavy_score = personal_score(air, heavy, environment)
    if light_score is not None and heavy_score is not None:
        assert heavy_score <= light_score


@given(airs)
def test_other_and_unknown_activities_and_unknown_environment_are_neutral(
    air: dict[Pollutant, float | None],
) -> None:
    plain = clean_air_score(air)
    assert personal_score(air, ActivityType.OTHER, EnvironmentType.OUTDOOR) == plain
    assert personal_score(air, ActivityType.UNKNOWN, EnvironmentType.OUTDOOR) == plain
    assert personal_score(air, ActivityType.OTHER, EnvironmentType.UNKNOWN) == plain


def test_breathing_hard_lowers_the_score_of_the_same_air() -> None:
    air: dict[Pollutant, float | None] = {Pollutant.PM25: 10.0}
    resting = personal_score(air, ActivityType.AT_REST)
    running = personal_score(air, ActivityType.RUNNING_OUTDOOR)
    neutral = personal_score(air, ActivityType.OTHER)
    assert resting is not None
    assert running is not None
    assert neutral is not None
    assert running < neutral < resting
    assert (
        breathing_factor(ActivityType.RUNNING_OUTDOOR)
        > 1.0
        > breathing_factor(ActivityType.AT_REST)
    )


def test_indoor_air_applies_the_ratios_and_leaves_other_measures_alone() -> None:
    air: dict[Pollutant, float | None] = {
        Pollutant.PM25: 10.0,
        Pollutant.O3: 100.0,
        Pollutant.NO2: None,
        Pollutant.CO2: 800.0,
    }
    indoor = breathed_air(air, EnvironmentType.INDOOR)
    assert indoor[Pollutant.PM25] == 10.0 * INDOOR_RATIOS[Pollutant.PM25]
    assert indoor[Pollutant.O3] == 100.0 * INDOOR_RATIOS[Pollutant.O3]
    assert indoor[Pollutant.NO2] is None
    assert indoor[Pollutant.CO2] == 800.0
    assert breathed_air(air, EnvironmentType.OUTDOOR) == air
    assert breathed_air(air, EnvironmentType.UNKNOWN) == air
    assert all(0 < ratio <= 1 for ratio in INDOOR_RATIOS.values())


def test_the_documented_running_example_holds() -> None:
    # docs/science.md: running (high effort, 50 L/min) in 4 µg/m³ PM2.5 scores 73 where the
    # neutral score is 84; the square root of 50/12 scales 4 to 8.16 µg/m³.
    air: dict[Pollutant, float | None] = {Pollutant.PM25: 4.0}
    assert personal_score(air, ActivityType.OTHER) == 84
    assert personal_score(air, ActivityType.RUNNING_OUTDOOR) == 73
    assert breathing_factor(ActivityType.RUNNING_OUTDOOR) == pytest.approx((50 / 12) ** 0.5)

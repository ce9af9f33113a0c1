"""The activity table: the contract's ActivityType values, effort classes, ventilation, speeds."""

from __future__ import annotations

import itertools
import math
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cleanair_core.air.activities import (
    ACTIVITIES,
    REFERENCE_EFFORT,
    VENTILATION_L_MIN,
    WALKING_SPEED_M_S,
    Activity,
    ActivityType,
    EffortClass,
    activity_of,
    effort_of_met,
    speed_m_s,
    ventilation_l_min,
    ventilation_ratio,
)

DOCS_TABLE = Path(__file__).resolve().parents[2] / "docs" / "activities.md"

# Copied by hand from the contract, api-spec.md section 2.9 "ActivityType (exact values)".
# It lists 82 values; science.md's "83 activity types" is not borne out by the list.
CONTRACT_ACTIVITY_TYPES = (
    "archery",
    "at_rest",
    "badminton",
    "baseball",
    "basketball",
    "bowling",
    "boxing",
    "bus",
    "car",
    "climbing",
    "core_training",
    "cricket",
    "curling",
    "cycling",
    "cycling_electric",
    "cycling_hand",
    "cycling_stationary",
    "dance",
    "disc_sports",
    "elliptical",
    "equestrian_sports",
    "fencing",
    "fishing",
    "fitness_gaming",
    "football_american",
    "football_australian",
    "frisbee",
    "golf",
    "gymnastics",
    "handball",
    "hiking",
    "hockey_field",
    "hockey_ice",
    "kickboxing",
    "lacrosse",
    "martial_arts",
    "metro",
    "mind_and_body",
    "motorbike",
    "other",
    "paddle_sports",
    "padel",
    "paragliding",
    "pickleball",
    "pilates",
    "preparation_and_recovery",
    "racquetball",
    "rowing_indoor",
    "rowing_outdoor",
    "rugby",
    "running_outdoor",
    "running_treadmill",
    "sailing",
    "skating_sports",
    "skipping",
    "snow_sports",
    "soccer",
    "softball",
    "squash",
    "stair_climbing",
    "strength_training",
    "stretching",
    "surfing_sports",
    "swimming_indoor",
    "swimming_outdoor",
    "table_tennis",
    "tennis",
    "track_and_field",
    "train",
    "triatholon",
    "underwater_diving",
    "unknown",
    "volleyball",
    "walking",
    "water_fitness",
    "water_polo",
    "water_sports",
    "wheelchair_run_pace",
    "wheelchair_walk_pace",
    "workout",
    "wrestling",
    "yoga",
)

PASSENGERS = (ActivityType.BUS, ActivityType.CAR, ActivityType.METRO, ActivityType.TRAIN)
EFFORT_ORDER = (EffortClass.SEDENTARY, EffortClass.LIGHT, EffortClass.MODERATE, EffortClass.HIGH)
activities = st.sampled_from(list(ActivityType))


def rank(effort: EffortClass) -> int:
    return EFFORT_ORDER.index(effort)


# --- the enum is the contract's -------------------------------------------------------------


def test_the_enum_holds_exactly_the_contracts_values() -> None:
    assert len(CONTRACT_ACTIVITY_TYPES) == len(set(CONTRACT_ACTIVITY_TYPES)) == 82
    assert {a.value for a in ActivityType} == set(CONTRACT_ACTIVITY_TYPES)
    assert len(ActivityType) == 82


def test_member_names_are_the_values_upper_cased() -> None:
    for activity in ActivityType:
        assert activity.name == activity.value.upper()
    assert ActivityType("triatholon") is ActivityType.TRIATHOLON


def test_effort_classes_are_the_four_epa_levels() -> None:
    assert [e.value for e in EffortClass] == ["sedentary", "light", "moderate", "high"]


# --- the table is complete, immutable and sane ----------------------------------------------


def test_every_activity_type_has_exactly_one_entry() -> None:
    assert set(ACTIVITIES) == set(ActivityType)
    assert len(ACTIVITIES) == len(ActivityType)


def test_the_tables_cannot_be_changed() -> None:
    with pytest.raises(TypeError):
        ACTIVITIES[ActivityType.WALKING] = ACTIVITIES[ActivityType.CAR]  # type: ignore[index]
    with pytest.raises(TypeError):
        VENTILATION_L_MIN[EffortClass.HIGH] = 1.0  # type: ignore[index]


@pytest.mark.parametrize("activity", list(ActivityType))
def test_speeds_are_positive_and_below_40_m_s(activity: ActivityType) -> None:
    speed = ACTIVITIES[activity].speed_m_s
    assert math.isfinite(speed)
    assert 0 < speed < 40


@pytest.mark.parametrize("activity", list(ActivityType))
def test_activities_done_in_place_fall_back_to_walking_speed(activity: ActivityType) -> None:
    entry = ACTIVITIES[activity]
    if not entry.moving:
        assert entry.speed_m_s == WALKING_SPEED_M_S


@pytest.mark.parametrize("speed", [0.0, -1.3, math.inf, math.nan])
def test_an_activity_refuses_a_speed_that_is_not_positive_and_finite(speed: float) -> None:
    with pytest.raises(ValueError, match="speed_m_s"):
        Activity(EffortClass.LIGHT, speed, moving=True)


def test_an_activity_refuses_an_effort_that_is_not_an_effort_class() -> None:
    with pytest.raises(TypeError):
        Activity("light", 1.3, moving=True)  # type: ignore[arg-type]


# --- ventilation --------------------------------------------------------------------------


def test_ventilation_is_the_epa_table_and_strictly_increasing() -> None:
    assert dict(VENTILATION_L_MIN) == {
        EffortClass.SEDENTARY: 4.2,
        EffortClass.LIGHT: 12.0,
        EffortClass.MODERATE: 26.0,
        EffortClass.HIGH: 50.0,
    }
    rates = [VENTILATION_L_MIN[e] for e in EFFORT_ORDER]
    assert all(low < high for low, high in itertools.pairwise(rates))


def test_other_and_unknown_are_the_neutral_reference() -> None:
    assert REFERENCE_EFFORT is EffortClass.LIGHT
    assert ventilation_ratio(ActivityType.OTHER) == 1.0
    assert ventilation_ratio(ActivityType.UNKNOWN) == 1.0
    for neutral in (ActivityType.OTHER, ActivityType.UNKNOWN):
        assert ACTIVITIES[neutral].effort is EffortClass.LIGHT
        assert ACTIVITIES[neutral].speed_m_s == WALKING_SPEED_M_S


@given(activities)
def test_the_functions_read_the_table(activity: ActivityType) -> None:
    entry = ACTIVITIES[activity]
    assert activity_of(activity) is entry
    assert ventilation_l_min(activity) == VENTILATION_L_MIN[entry.effort]
    assert ventilation_ratio(activity) == ventilation_l_min(activity) / 12.0
    assert speed_m_s(activity) == entry.speed_m_s


@given(activities, activities)
def test_ventilation_ratio_follows_the_class_order(a: ActivityType, b: ActivityType) -> None:
    effort_a, effort_b = ACTIVITIES[a].effort, ACTIVITIES[b].effort
    if rank(effort_a) > rank(effort_b):
        assert ventilation_ratio(a) > ventilation_ratio(b)
    elif effort_a == effort_b:
        assert ventilation_ratio(a) == ventilation_ratio(b)


# --- the MET rule -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("met", "effort"),
    [
        (1.0, EffortClass.SEDENTARY),
        (1.5, EffortClass.SEDENTARY),
        (1.6, EffortClass.LIGHT),
        (3.0, EffortClass.LIGHT),
        (3.1, EffortClass.MODERATE),
        (6.0, EffortClass.MODERATE),
        (6.1, EffortClass.HIGH),
        (23.0, EffortClass.HIGH),
    ],
)
def test_met_bins_are_the_epas(met: float, effort: EffortClass) -> None:
    assert effort_of_met(met) is effort


@given(
    st.floats(min_value=0.1, max_value=30, allow_nan=False),
    st.floats(min_value=0.1, max_value=30, allow_nan=False),
)
def test_more_mets_never_mean_less_effort(a: float, b: float) -> None:
    low, high = sorted((a, b))
    assert rank(effort_of_met(low)) <= rank(effort_of_met(high))


@pytest.mark.parametrize("met", [0.0, -2.0, math.inf, math.nan])
def test_met_must_be_positive_and_finite(met: float) -> None:
    with pytest.raises(ValueError, match="MET"):
        effort_of_met(met)


# --- sanity anchors -----------------------------------------------------------------------


def test_passengers_and_rest_are_sedentary() -> None:
    for activity in (*PASSENGERS, ActivityType.AT_REST):
        assert ACTIVITIES[activity].effort is EffortClass.SEDENTARY


def test_passengers_travel_and_rail_is_faster_than_road() -> None:
    assert all(ACTIVITIES[p].moving for p in PASSENGERS)
    assert speed_m_s(ActivityType.BUS) < speed_m_s(ActivityType.METRO)
    assert speed_m_s(ActivityType.METRO) < speed_m_s(ActivityType.TRAIN)


def test_walking_is_the_peers_pace() -> None:
    assert ACTIVITIES[ActivityType.WALKING].moving
    assert 1.2 <= speed_m_s(ActivityType.WALKING) <= 1.4


def test_running_outdoor_is_hard_work_and_faster_than_walking() -> None:
    running = ACTIVITIES[ActivityType.RUNNING_OUTDOOR]
    assert running.effort in {EffortClass.MODERATE, EffortClass.HIGH}
    assert running.moving
    assert running.speed_m_s > speed_m_s(ActivityType.WALKING)


def test_cycling_sits_between_running_and_the_car() -> None:
    assert speed_m_s(ActivityType.RUNNING_OUTDOOR) < speed_m_s(ActivityType.CYCLING)
    assert speed_m_s(ActivityType.CYCLING) < speed_m_s(ActivityType.CAR)
    assert speed_m_s(ActivityType.CYCLING) <= speed_m_s(ActivityType.CYCLING_ELECTRIC)


def test_a_cyclist_breathes_more_than_a_car_passenger() -> None:
    # On-road studies put the cyclist at 2.1x (Zuurbier 2009) to 4.3x (Int Panis 2010).
    assert ventilation_ratio(ActivityType.CYCLING) >= 2 * ventilation_ratio(ActivityType.CAR)


def test_treadmill_and_gym_work_does_not_travel() -> None:
    for activity in (
        ActivityType.RUNNING_TREADMILL,
        ActivityType.CYCLING_STATIONARY,
        ActivityType.ROWING_INDOOR,
        ActivityType.YOGA,
        ActivityType.STRENGTH_TRAINING,
        ActivityType.SOCCER,
    ):
        assert not ACTIVITIES[activity].moving


def test_indoor_and_outdoor_twins_share_their_effort() -> None:
    pairs = [
        (ActivityType.RUNNING_OUTDOOR, ActivityType.RUNNING_TREADMILL),
        (ActivityType.ROWING_OUTDOOR, ActivityType.ROWING_INDOOR),
        (ActivityType.SWIMMING_OUTDOOR, ActivityType.SWIMMING_INDOOR),
        (ActivityType.CYCLING, ActivityType.CYCLING_STATIONARY),
    ]
    for outdoor, indoor in pairs:
        assert ACTIVITIES[outdoor].effort is ACTIVITIES[indoor].effort


# --- docs/activities.md agrees with the code ----------------------------------------------


def docs_rows() -> dict[str, list[str]]:
    """Cells of the table rows of docs/activities.md, keyed by activity value."""
    rows: dict[str, list[str]] = {}
    for line in DOCS_TABLE.read_text(encoding="utf-8").splitlines():
        match = re.fullmatch(r"\|\s*`([a-z_]+)`\s*\|(.*)\|", line.strip())
        if match:
            assert match[1] not in rows, f"{match[1]} is listed twice"
            rows[match[1]] = [cell.strip() for cell in match[2].split("|")]
    return rows


def test_the_docs_table_lists_every_activity_once() -> None:
    assert set(docs_rows()) == {a.value for a in ActivityType}


@pytest.mark.parametrize("activity", list(ActivityType))
def test_the_docs_table_agrees_with_the_code(activity: ActivityType) -> None:
    effort, l_min, km_h, moving, met, basis = docs_rows()[activity.value]
    entry = ACTIVITIES[activity]
    assert effort == entry.effort.value
    assert float(l_min) == VENTILATION_L_MIN[entry.effort]
    assert float(km_h) == pytest.approx(entry.speed_m_s * 3.6, abs=0.005)
    assert moving == ("yes" if entry.moving else "no")
    assert basis
    if met != "—":
        # The class must be the one the documented MET value earns.
        assert effort_of_met(float(met)) is entry.effort

"""The contract's activity types, how hard each makes a person breathe, and how fast it travels.

Dose along a route is concentration times minute ventilation times time, and across activities
ventilation differs far more than the air does (science.md, "Breathing and dose"). Each of the
contract's ActivityType values is therefore mapped to one of four effort classes, each with an
adult mean minute ventilation from the US EPA Exposure Factors Handbook 2011 (chapter 6,
table 6-2): sedentary 4.2, light 12, moderate 26, high 50 L/min.

Classification rule: the activity's MET value from the Compendium of Physical Activities (2024
Adult Compendium, Herrmann et al., J Sport Health Sci 2024;13:6-12) is binned the way the EPA
binned METs to derive table 6-2: MET <= 1.5 sedentary, <= 3.0 light, <= 6.0 moderate, above 6.0
high (`effort_of_met`). Where the Compendium has no entry for a sport, the nearest entry stands
in and the table says so. docs/activities.md lists every entry with its MET value and source;
a test keeps it in step with this module.

Speeds only estimate times along a route that has none: walking 1.3 m/s, running 10 km/h,
cycling 18 km/h, e-bike 20 km/h, bus 17, metro 33 and commuter rail 50 km/h follow the peers
cited in science.md; the others are typical values named in the table. Activities done in place
or on a pitch have no travel speed: a route given for one of them is assumed walked between its
points, so they carry the walking speed and `moving=False`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType

import attrs


class ActivityType(StrEnum):
    """The contract's ActivityType enum (section 2.9): exactly its values, in its order.

    The contract lists 82 values (science.md and early notes say 83); the list is what counts.
    """

    ARCHERY = "archery"
    AT_REST = "at_rest"
    BADMINTON = "badminton"
    BASEBALL = "baseball"
    BASKETBALL = "basketball"
    BOWLING = "bowling"
    BOXING = "boxing"
    BUS = "bus"
    CAR = "car"
    CLIMBING = "climbing"
    CORE_TRAINING = "core_training"
    CRICKET = "cricket"
    CURLING = "curling"
    CYCLING = "cycling"
    CYCLING_ELECTRIC = "cycling_electric"
    CYCLING_HAND = "cycling_hand"
    CYCLING_STATIONARY = "cycling_stationary"
    DANCE = "dance"
    DISC_SPORTS = "disc_sports"
    ELLIPTICAL = "elliptical"
    EQUESTRIAN_SPORTS = "equestrian_sports"
    FENCING = "fencing"
    FISHING = "fishing"
    FITNESS_GAMING = "fitness_gaming"
    FOOTBALL_AMERICAN = "football_american"
    FOOTBALL_AUSTRALIAN = "football_australian"
    FRISBEE = "frisbee"
    GOLF = "golf"
    GYMNASTICS = "gymnastics"
    HANDBALL = "handball"
    HIKING = "hiking"
    HOCKEY_FIELD = "hockey_field"
    HOCKEY_ICE = "hockey_ice"
    KICKBOXING = "kickboxing"
    LACROSSE = "lacrosse"
    MARTIAL_ARTS = "martial_arts"
    METRO = "metro"
    MIND_AND_BODY = "mind_and_body"
    MOTORBIKE = "motorbike"
    OTHER = "other"
    PADDLE_SPORTS = "paddle_sports"
    PADEL = "padel"
    PARAGLIDING = "paragliding"
    PICKLEBALL = "pickleball"
    PILATES = "pilates"
    PREPARATION_AND_RECOVERY = "preparation_and_recovery"
    RACQUETBALL = "racquetball"
    ROWING_INDOOR = "rowing_indoor"
    ROWING_OUTDOOR = "rowing_outdoor"
    RUGBY = "rugby"
    RUNNING_OUTDOOR = "running_outdoor"
    RUNNING_TREADMILL = "running_treadmill"
    SAILING = "sailing"
    SKATING_SPORTS = "skating_sports"
    SKIPPING = "skipping"
    SNOW_SPORTS = "snow_sports"
    SOCCER = "soccer"
    SOFTBALL = "softball"
    SQUASH = "squash"
    STAIR_CLIMBING = "stair_climbing"
    STRENGTH_TRAINING = "strength_training"
    STRETCHING = "stretching"
    SURFING_SPORTS = "surfing_sports"
    SWIMMING_INDOOR = "swimming_indoor"
    SWIMMING_OUTDOOR = "swimming_outdoor"
    TABLE_TENNIS = "table_tennis"
    TENNIS = "tennis"
    TRACK_AND_FIELD = "track_and_field"
    TRAIN = "train"
    TRIATHOLON = "triatholon"  # the contract's spelling; clients send exactly this
    UNDERWATER_DIVING = "underwater_diving"
    UNKNOWN = "unknown"
    VOLLEYBALL = "volleyball"
    WALKING = "walking"
    WATER_FITNESS = "water_fitness"
    WATER_POLO = "water_polo"
    WATER_SPORTS = "water_sports"
    WHEELCHAIR_RUN_PACE = "wheelchair_run_pace"
    WHEELCHAIR_WALK_PACE = "wheelchair_walk_pace"
    WORKOUT = "workout"
    WRESTLING = "wrestling"
    YOGA = "yoga"


class EffortClass(StrEnum):
    """Activity levels of the EPA Exposure Factors Handbook 2011, table 6-2, lowest first."""

    SEDENTARY = "sedentary"
    LIGHT = "light"
    MODERATE = "moderate"
    HIGH = "high"


#: Adult mean minute ventilation per effort class, L/min (EPA Exposure Factors Handbook 2011,
#: ch. 6, table 6-2).
VENTILATION_L_MIN: Mapping[EffortClass, float] = MappingProxyType(
    {
        EffortClass.SEDENTARY: 4.2,
        EffortClass.LIGHT: 12.0,
        EffortClass.MODERATE: 26.0,
        EffortClass.HIGH: 50.0,
    }
)

#: The effort of `other` and `unknown`. Ratios are taken against it so that an unspecified
#: activity neither inflates nor shrinks a dose.
REFERENCE_EFFORT: EffortClass = EffortClass.LIGHT

#: Walking speed, m/s (science.md: peers use 1.2-1.4; openrouteservice 5 km/h, Green Paths 1.2).
#: Also the fallback speed of activities that do not travel.
WALKING_SPEED_M_S: float = 1.3

# Upper MET bounds of the EPA's bins (sedentary, light, moderate); above the last is high.
_MET_BINS: tuple[tuple[float, EffortClass], ...] = (
    (1.5, EffortClass.SEDENTARY),
    (3.0, EffortClass.LIGHT),
    (6.0, EffortClass.MODERATE),
)


def effort_of_met(met: float) -> EffortClass:
    """The effort class of an activity of `met` METs: ≤ 1.5 sedentary, ≤ 3 light, ≤ 6 moderate.

    Raises ValueError for a MET value that is not a positive finite number.
    """
    if not (math.isfinite(met) and met > 0):
        raise ValueError(f"a MET value must be positive and finite, not {met!r}")
    for upper, effort in _MET_BINS:
        if met <= upper:
            return effort
    return EffortClass.HIGH


def _positive_finite(_instance: object, attribute: attrs.Attribute[float], value: float) -> None:
    # A zero, negative, infinite or NaN speed would turn a route's distance into nonsense times.
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{attribute.name} must be positive and finite, not {value!r}")


@attrs.frozen
class Activity:
    """How hard an activity makes a person breathe, and how fast it covers a route.

    `speed_m_s` estimates the time along a route whose waypoints carry no times. `moving` is
    False for activities done in place or on a pitch (treadmill, yoga, gym, team sports...):
    their speed is the walking fallback, because a route given for one is assumed walked.
    """

    effort: EffortClass = attrs.field(validator=attrs.validators.instance_of(EffortClass))
    speed_m_s: float = attrs.field(validator=_positive_finite)
    moving: bool = attrs.field(validator=attrs.validators.instance_of(bool))


def _travel(effort: EffortClass, km_h: float) -> Activity:
    return Activity(effort, km_h / 3.6, moving=True)


def _walking_pace(effort: EffortClass) -> Activity:
    return Activity(effort, WALKING_SPEED_M_S, moving=True)


def _in_place(effort: EffortClass) -> Activity:
    return Activity(effort, WALKING_SPEED_M_S, moving=False)


_SEDENTARY = EffortClass.SEDENTARY
_LIGHT = EffortClass.LIGHT
_MODERATE = EffortClass.MODERATE
_HIGH = EffortClass.HIGH

# Comments name the Compendium code, its description and MET value, then the speed's source.
# "2011" marks an entry whose 2024 value was not checked (2024 kept most 2011 values).
ACTIVITIES: Mapping[ActivityType, Activity] = MappingProxyType(
    {
        ActivityType.ARCHERY: _in_place(_MODERATE),  # 15010 archery, non-hunting: 4.3
        ActivityType.AT_REST: _in_place(_SEDENTARY),  # 07021 sitting quietly: 1.0
        ActivityType.BADMINTON: _in_place(_MODERATE),  # 15030 badminton, social: 5.5
        ActivityType.BASEBALL: _in_place(_MODERATE),  # 15620 softball or baseball: 5.0
        ActivityType.BASKETBALL: _in_place(_HIGH),  # 15055 basketball, general: 7.5
        ActivityType.BOWLING: _in_place(_MODERATE),  # 15092 bowling, indoor alley: 3.8
        ActivityType.BOXING: _in_place(_HIGH),  # 15100 boxing, in ring, general: 12.3
        # 16016 riding in a bus or train: 1.3; urban bus 16-19 km/h (science.md)
        ActivityType.BUS: _travel(_SEDENTARY, 17.0),
        # 16015 riding in a car: 1.3 (driving, 16010, is 2.0); urban average ~30 km/h
        ActivityType.CAR: _travel(_SEDENTARY, 30.0),
        ActivityType.CLIMBING: _in_place(_HIGH),  # 15533 rock or mountain climbing: 8.0
        ActivityType.CORE_TRAINING: _in_place(_LIGHT),  # 02024 crunches, plank, light: 2.8
        ActivityType.CRICKET: _in_place(_MODERATE),  # 15150 cricket: 4.8
        ActivityType.CURLING: _in_place(_MODERATE),  # 15170 curling: 4.0
        # 01020 bicycling, 10-11.9 mph: 6.8; 18 km/h (openrouteservice; Green Paths 20)
        ActivityType.CYCLING: _travel(_HIGH, 18.0),
        # 16005 e-bike for transportation: 6.8; 20 km/h (science.md peers: 20-21)
        ActivityType.CYCLING_ELECTRIC: _travel(_HIGH, 20.0),
        # 02118 arm ergometer, hand bike, 45 W: 3.5; recreational handbike ~15 km/h
        ActivityType.CYCLING_HAND: _travel(_MODERATE, 15.0),
        ActivityType.CYCLING_STATIONARY: _in_place(_HIGH),  # 01200 stationary bike: 6.8
        ActivityType.DANCE: _in_place(_MODERATE),  # 03025 ethnic or cultural dancing: 4.5
        ActivityType.DISC_SPORTS: _in_place(_HIGH),  # 15250 frisbee, ultimate: 8.0
        ActivityType.ELLIPTICAL: _in_place(_MODERATE),  # 02048 elliptical, moderate: 5.0
        # 15370 horseback riding, general: 5.5; a hack is mostly at walk (~6.5) with trots
        ActivityType.EQUESTRIAN_SPORTS: _travel(_MODERATE, 8.0),
        ActivityType.FENCING: _in_place(_MODERATE),  # 15200 fencing, general: 6.0
        ActivityType.FISHING: _in_place(_MODERATE),  # 04001 fishing, general: 3.5 (2011)
        ActivityType.FITNESS_GAMING: _in_place(_MODERATE),  # 02143 video workout, moderate: 4.0
        ActivityType.FOOTBALL_AMERICAN: _in_place(_HIGH),  # 15210 football, competitive: 8.0
        ActivityType.FOOTBALL_AUSTRALIAN: _in_place(_HIGH),  # no entry; 15210 as above: 8.0
        ActivityType.FRISBEE: _in_place(_LIGHT),  # 15240 frisbee playing, general: 3.0
        ActivityType.GOLF: _in_place(_MODERATE),  # 15255 golf, general: 4.5
        ActivityType.GYMNASTICS: _in_place(_MODERATE),  # 15300 gymnastics, general: 3.8
        ActivityType.HANDBALL: _in_place(_HIGH),  # 15330 handball, team: 8.0
        # 17082 hiking, normal pace, fields and hillsides: 5.3; trail pace ~4 km/h
        ActivityType.HIKING: _travel(_MODERATE, 4.0),
        ActivityType.HOCKEY_FIELD: _in_place(_HIGH),  # 15350 hockey, field: 7.8
        ActivityType.HOCKEY_ICE: _in_place(_HIGH),  # 15360 hockey, ice, general: 8.0
        ActivityType.KICKBOXING: _in_place(_HIGH),  # 15457 kickboxing: 7.3
        ActivityType.LACROSSE: _in_place(_HIGH),  # 15460 lacrosse: 8.0
        ActivityType.MARTIAL_ARTS: _in_place(_HIGH),  # 15430 martial arts, moderate pace: 10.3
        # 16016 riding in a bus or train: 1.3; metro ~33 km/h (science.md)
        ActivityType.METRO: _travel(_SEDENTARY, 33.0),
        ActivityType.MIND_AND_BODY: _in_place(_MODERATE),  # 15670 tai chi, qi gong: 3.3
        # 16030 motor scooter, motorcycle: 2.8; same urban speed as a car
        ActivityType.MOTORBIKE: _travel(_LIGHT, 30.0),
        # Neutral reference: unknown effort counts as light, a route as walked.
        ActivityType.OTHER: _walking_pace(REFERENCE_EFFORT),
        # 18100 kayaking, moderate effort: 5.0 (2011); touring kayak or canoe ~7 km/h
        ActivityType.PADDLE_SPORTS: _travel(_MODERATE, 7.0),
        ActivityType.PADEL: _in_place(_MODERATE),  # no entry; 15685 tennis, doubles: 4.5
        # 15503 paragliding: 1.8; cross-country ground speed ~30 km/h
        ActivityType.PARAGLIDING: _travel(_LIGHT, 30.0),
        ActivityType.PICKLEBALL: _in_place(_MODERATE),  # no entry; 15685 tennis, doubles: 4.5
        ActivityType.PILATES: _in_place(_LIGHT),  # 02105 pilates, general: 2.8
        ActivityType.PREPARATION_AND_RECOVERY: _in_place(_LIGHT),  # 02101 stretching, mild: 2.3
        ActivityType.RACQUETBALL: _in_place(_HIGH),  # 15530 racquetball, general: 7.0
        ActivityType.ROWING_INDOOR: _in_place(_MODERATE),  # 02071 rowing ergometer, <100 W: 5.0
        # 18050 canoeing, rowing, 4.0-5.9 mph, moderate: 5.8 (2011); 8 km/h = 5 mph
        ActivityType.ROWING_OUTDOOR: _travel(_MODERATE, 8.0),
        ActivityType.RUGBY: _in_place(_HIGH),  # 15560 rugby union, competitive: 8.3
        # 12050 running, 6-6.3 mph: 9.3; 10 km/h (science.md)
        ActivityType.RUNNING_OUTDOOR: _travel(_HIGH, 10.0),
        ActivityType.RUNNING_TREADMILL: _in_place(_HIGH),  # 12050 running, 6-6.3 mph: 9.3
        # 18120 sailing, general: 3.0 (2011); leisure sailing ~5 knots
        ActivityType.SAILING: _travel(_LIGHT, 9.0),
        # 15591 in-line skating, 14.4 km/h, recreational: 7.5; speed from the same entry
        ActivityType.SKATING_SPORTS: _travel(_HIGH, 14.4),
        ActivityType.SKIPPING: _in_place(_HIGH),  # 15551 rope jumping, moderate pace: 11.8
        ActivityType.SNOW_SPORTS: _in_place(_HIGH),  # 19160 downhill skiing, moderate: 6.3
        ActivityType.SOCCER: _in_place(_HIGH),  # 15610 soccer, casual, general: 7.0
        ActivityType.SOFTBALL: _in_place(_MODERATE),  # 15620 softball or baseball: 5.0
        ActivityType.SQUASH: _in_place(_HIGH),  # 15652 squash, general: 7.3
        ActivityType.STAIR_CLIMBING: _in_place(_HIGH),  # 17131 stair climbing, general: 6.8
        ActivityType.STRENGTH_TRAINING: _in_place(_MODERATE),  # 02054 resistance, 8-15 reps: 3.5
        ActivityType.STRETCHING: _in_place(_LIGHT),  # 02101 stretching, mild: 2.3
        ActivityType.SURFING_SPORTS: _in_place(_LIGHT),  # 18220 surfing, general: 3.0 (2011)
        ActivityType.SWIMMING_INDOOR: _in_place(_MODERATE),  # 18240 laps, freestyle, slow: 5.8
        # 18300 swimming, lake, ocean, river: 6.0; 2:24 per 100 m
        ActivityType.SWIMMING_OUTDOOR: _travel(_MODERATE, 2.5),
        ActivityType.TABLE_TENNIS: _in_place(_MODERATE),  # 15660 table tennis: 4.0
        ActivityType.TENNIS: _in_place(_HIGH),  # 15675 tennis, general: 6.8
        ActivityType.TRACK_AND_FIELD: _in_place(_MODERATE),  # 15733 jumps, javelin: 6.0
        # 16016 riding in a bus or train: 1.3; commuter rail ~50 km/h (science.md)
        ActivityType.TRAIN: _travel(_SEDENTARY, 50.0),
        # Time-weighted legs (swim 6.0, bike 01040 10.0, run 12050 9.3): 9.1; 51.5 km in 3 h
        ActivityType.TRIATHOLON: _travel(_HIGH, 17.0),
        ActivityType.UNDERWATER_DIVING: _in_place(_HIGH),  # 18200 scuba diving: 7.0 (2011)
        # Neutral reference: unknown effort counts as light, a route as walked.
        ActivityType.UNKNOWN: _walking_pace(REFERENCE_EFFORT),
        ActivityType.VOLLEYBALL: _in_place(_MODERATE),  # 15710 volleyball: 4.0
        # 17190 walking, 2.8-3.4 mph: 3.8; 1.3 m/s = 2.9 mph (science.md)
        ActivityType.WALKING: _walking_pace(_MODERATE),
        ActivityType.WATER_FITNESS: _in_place(_MODERATE),  # 02120 water aerobics: 5.3
        ActivityType.WATER_POLO: _in_place(_HIGH),  # 18360 water polo: 10.0 (2011)
        ActivityType.WATER_SPORTS: _in_place(_MODERATE),  # 18150 water skiing: 6.0 (2011)
        # No adult MET; assumed as running at the same pace, 10 km/h
        ActivityType.WHEELCHAIR_RUN_PACE: _travel(_HIGH, 10.0),
        # No adult MET; assumed as walking at the same pace, 1.3 m/s
        ActivityType.WHEELCHAIR_WALK_PACE: _walking_pace(_MODERATE),
        ActivityType.WORKOUT: _in_place(_MODERATE),  # 02060 health club exercise: 5.5
        ActivityType.WRESTLING: _in_place(_MODERATE),  # 15730 wrestling, competitive: 6.0
        ActivityType.YOGA: _in_place(_LIGHT),  # 02150 yoga, hatha: 2.3
    }
)

# activity_of promises an entry for every ActivityType; fail at import, not mid-request.
_MISSING = set(ActivityType) - set(ACTIVITIES)
if _MISSING:
    raise RuntimeError(f"activity types without an entry: {sorted(_MISSING)}")


def activity_of(activity: ActivityType) -> Activity:
    """The effort class and speed of `activity`."""
    return ACTIVITIES[activity]


def ventilation_l_min(activity: ActivityType) -> float:
    """Adult mean minute ventilation during `activity`, L/min (EPA table 6-2 by effort class)."""
    return VENTILATION_L_MIN[ACTIVITIES[activity].effort]


def ventilation_ratio(activity: ActivityType) -> float:
    """Ventilation of `activity` relative to the reference (light) effort; 1.0 for other/unknown.

    This is the factor by which the activity scales an inhaled dose against an unspecified one.
    """
    return ventilation_l_min(activity) / VENTILATION_L_MIN[REFERENCE_EFFORT]


def speed_m_s(activity: ActivityType) -> float:
    """The speed, m/s, that estimates times along a route for `activity` (walking if in place)."""
    return ACTIVITIES[activity].speed_m_s

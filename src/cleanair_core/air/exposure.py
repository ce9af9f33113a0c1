"""What a person breathes: indoor versus outdoor air, and how hard they breathe.

Two adjustments turn the outdoor air at a place into a score for a person there:
- Environment: indoors, each pollutant is multiplied by a typical indoor/outdoor ratio for a
  building without indoor sources. `unknown` is treated as outdoor, so a score never claims
  cleaner air than the outdoor air allows.
- Activity: heavier breathing draws more of the same air into the lungs. Concentrations are
  scaled by the square root of the activity's minute ventilation over the reference (light
  effort, the class of `other` and `unknown`, so those two are neutral). The square root is
  our dampening choice: short-term risk is not linear in dose, and an exercising person in
  clean air should still read as clean. The scaling never lowers with more breathing, so
  heavier breathing never scores better.
The reported pollutant concentrations carry the environment adjustment only: breathing harder
changes the dose, not the air.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType

from cleanair_core.air.activities import ActivityType, ventilation_ratio
from cleanair_core.air.pollutants import Concentrations, Pollutant
from cleanair_core.air.score import clean_air_score


class EnvironmentType(StrEnum):
    INDOOR = "indoor"
    OUTDOOR = "outdoor"
    UNKNOWN = "unknown"


#: Indoor/outdoor concentration ratios without indoor sources (midpoints of study ranges; see
#: docs/science.md). PM10 and SO2 deposit faster than PM2.5, hence the lower ratios. Pollutants
#: not listed (indoor-only measures such as CO2) are left as they are.
INDOOR_RATIOS: Mapping[Pollutant, float] = MappingProxyType(
    {
        Pollutant.PM25: 0.55,  # 0.4-0.7, Chen & Zhao 2011
        Pollutant.PM10: 0.45,  # below PM2.5: coarse particles settle and filter out faster
        Pollutant.NO2: 0.65,  # 0.5-0.8 without gas appliances
        Pollutant.O3: 0.35,  # 0.2-0.3 schools/offices, up to 0.6 homes (Salonen 2018)
        Pollutant.SO2: 0.4,  # deposits on indoor surfaces; no good study found, kept low
    }
)


def breathed_air(concentrations: Concentrations, environment: EnvironmentType) -> Concentrations:
    """The concentrations where the person is: indoor ratios applied when indoors."""
    if environment is not EnvironmentType.INDOOR:
        return dict(concentrations)
    return {
        pollutant: None if value is None else value * INDOOR_RATIOS.get(pollutant, 1.0)
        for pollutant, value in concentrations.items()
    }


def breathing_factor(activity: ActivityType) -> float:
    """How much the activity scales the concentrations scored (1.0 for `other`/`unknown`)."""
    return math.sqrt(ventilation_ratio(activity))


def personal_score(
    concentrations: Concentrations,
    activity: ActivityType = ActivityType.OTHER,
    environment: EnvironmentType = EnvironmentType.OUTDOOR,
) -> int | None:
    """The Clean Air Score for a person doing `activity` in `environment` in this air."""
    factor = breathing_factor(activity)
    air = breathed_air(concentrations, environment)
    return clean_air_score(
        {pollutant: None if value is None else value * factor for pollutant, value in air.items()}
    )

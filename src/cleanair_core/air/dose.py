"""The relative inhaled dose of a route: concentration x breathing x time, made comparable.

The physical dose is D = sum of C * VE * t (science.md, "Breathing and dose"). One number has to
stand for several pollutants and be comparable across routes, activities and the route planner,
so each factor is put on a fixed reference (our documented choice, docs/science.md):

- Air: each pollutant's concentration as a multiple of its WHO 2021 short-term guideline level
  (PM2.5 15, PM10 45, NO2 25, SO2 40 ug/m3 over 24 h; O3 100 ug/m3 over 8 h). The air load at a
  waypoint is the mean of these multiples over the route's dose pollutants, so air exactly at the
  guidelines has load 1. Dividing by the guideline weighs each pollutant by what counts as
  harmful for it, instead of letting the pollutant with the largest numbers dominate.
- Breathing: the activity's minute ventilation over the reference (light effort, 12 L/min, the
  class of `other`).
- Time: hours.

A dose of 1 is therefore one hour of light effort (an easy walk) in air at the WHO guideline
levels. The dose pollutants are the scored ones with a value at every waypoint, so every part of
one route is measured against the same basis; with none, there is no dose. Breathed
(environment-adjusted) concentrations go in, so indoors gives a lower dose than outdoors.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType

from cleanair_core.air.pollutants import SCORED, Concentrations, Pollutant

#: WHO 2021 Global Air Quality Guidelines, short-term levels, ug/m3.
GUIDELINE_LEVELS: Mapping[Pollutant, float] = MappingProxyType(
    {
        Pollutant.PM25: 15.0,  # 24-hour
        Pollutant.PM10: 45.0,  # 24-hour
        Pollutant.NO2: 25.0,  # 24-hour
        Pollutant.O3: 100.0,  # 8-hour
        Pollutant.SO2: 40.0,  # 24-hour
    }
)
_SECONDS_PER_HOUR = 3600.0


def dose_pollutants(airs: Sequence[Concentrations]) -> tuple[Pollutant, ...]:
    """The scored pollutants known at every one of `airs`, in the scored order."""
    return tuple(p for p in SCORED if all(air.get(p) is not None for air in airs))


def air_load(air: Concentrations, pollutants: Sequence[Pollutant]) -> float:
    """Mean multiple of the guideline levels over `pollutants` (all known in `air`)."""
    total = 0.0
    for pollutant in pollutants:
        value = air[pollutant]
        assert value is not None  # the caller chose pollutants known here
        total += max(0.0, value) / GUIDELINE_LEVELS[pollutant]
    return total / len(pollutants)


def inhaled_dose(
    airs: Sequence[Concentrations], weights_s: Sequence[float], ventilation_ratio: float
) -> float | None:
    """The relative dose of breathing `airs` for `weights_s` seconds each at `ventilation_ratio`.

    `airs` are the breathed concentrations at the waypoints, `weights_s` the seconds each stands
    for (see `route_times.time_weights`). None when no pollutant is known along the whole route.
    A route that lasts no time has dose 0.
    """
    if len(airs) != len(weights_s):
        raise ValueError("one weight per waypoint")
    pollutants = dose_pollutants(airs)
    if not airs or not pollutants:
        return None
    exposure_s = sum(
        air_load(air, pollutants) * weight for air, weight in zip(airs, weights_s, strict=True)
    )
    return exposure_s / _SECONDS_PER_HOUR * ventilation_ratio

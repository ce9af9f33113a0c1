"""The UK Daily Air Quality Index (Defra; the implementation note of April 2013 and the
uk-air pages): 1-10 in four bands, from O3's running 8-hour mean, NO2's hourly mean, SO2's
15-minute mean (the service has hourly values: the hour stands in, said as "1h") and PM2.5's
and PM10's running 24-hour means, each rounded to an integer µg/m³; the index is the worst
pollutant's.
"""

from __future__ import annotations

from cleanair_core.air.indexes import (
    AveragedConcentration,
    Averaging,
    HealthAdvice,
    HourlyHistory,
    IndexValue,
    round_half_up,
    running_mean,
)
from cleanair_core.air.pollutants import Pollutant

CODE = "uk_daqi"
NAME = "UK Daily Air Quality Index"

#: Each pollutant's upper limits of indexes 1..9 (µg/m³, integers); above the last, 10.
LIMITS: dict[Pollutant, tuple[int, ...]] = {
    Pollutant.O3: (33, 66, 100, 120, 140, 160, 187, 213, 240),
    Pollutant.NO2: (67, 134, 200, 267, 334, 400, 467, 534, 600),
    Pollutant.SO2: (88, 177, 266, 354, 443, 532, 710, 887, 1064),
    Pollutant.PM25: (11, 23, 35, 41, 47, 53, 58, 64, 70),
    Pollutant.PM10: (16, 33, 50, 58, 66, 75, 83, 91, 100),
}

#: Defra's colours of indexes 1-10.
COLOURS = (
    "#9CFF9C", "#31FF00", "#31CF00", "#FFFF00", "#FFCF00",
    "#FF9A00", "#FF6464", "#FF0000", "#990000", "#CE30FF",
)  # fmt: skip

#: (highest index, band, general advice, advice for at-risk individuals), Defra's wording.
BANDS: tuple[tuple[int, str, str, str], ...] = (
    (3, "Low", "Enjoy your usual outdoor activities.",
     "Enjoy your usual outdoor activities."),
    (6, "Moderate", "Enjoy your usual outdoor activities.",
     "Adults and children with lung problems, and adults with heart problems, who experience "
     "symptoms, should consider reducing strenuous physical activity, particularly outdoors."),
    (9, "High",
     "Anyone experiencing discomfort such as sore eyes, cough or sore throat should consider "
     "reducing activity, particularly outdoors.",
     "Adults and children with lung problems, and adults with heart problems, should reduce "
     "strenuous physical exertion, particularly outdoors, and particularly if they experience "
     "symptoms. People with asthma may find they need to use their reliever inhaler more "
     "often. Older people should also reduce physical exertion."),
    (10, "Very High",
     "Reduce physical exertion, particularly outdoors, especially if you experience symptoms "
     "such as cough or sore throat.",
     "Adults and children with lung problems, adults with heart problems, and older people, "
     "should avoid strenuous physical activity. People with asthma may find they need to use "
     "their reliever inhaler more often."),
)  # fmt: skip

#: (hours averaged, hours that must have values) per pollutant; 1 hour for the hourly ones.
PERIODS: dict[Pollutant, tuple[int, int]] = {
    Pollutant.O3: (8, 6),
    Pollutant.NO2: (1, 1),
    Pollutant.SO2: (1, 1),
    Pollutant.PM25: (24, 18),
    Pollutant.PM10: (24, 18),
}


def index_of(pollutant: Pollutant, concentration: float) -> int:
    """The index, 1-10, of a concentration (rounded to an integer first)."""
    rounded = round_half_up(concentration)
    for number, limit in enumerate(LIMITS[pollutant], start=1):
        if rounded <= limit:
            return number
    return 10


def uk_daqi(history: HourlyHistory) -> IndexValue | None:
    """The DAQI from `history` (µg/m³, oldest first), or None without any of its pollutants."""
    found: dict[Pollutant, tuple[int, AveragedConcentration]] = {}
    for pollutant, (hours, at_least) in PERIODS.items():
        values = history.get(pollutant)
        if not values:
            continue
        if hours == 1:
            last = values[-1]
            used = None if last is None else (last, Averaging.HOUR)
        else:
            used = running_mean(values, hours, at_least)
        if used is not None:
            found[pollutant] = (index_of(pollutant, used[0]), AveragedConcentration(*used))
    if not found:
        return None
    dominant = max(found, key=lambda p: found[p][0])
    value = found[dominant][0]
    _, band, general, sensitive = next(b for b in BANDS if value <= b[0])
    return IndexValue(
        code=CODE,
        name=NAME,
        value=value,
        category=band,
        colour=COLOURS[value - 1],
        dominant_pollutant=dominant,
        concentrations={p: used for p, (_, used) in found.items()},
        health=HealthAdvice(general, sensitive),
    )

"""The European Air Quality Index of the EEA, as revised in 2024 (ETC HE Report 2024/17):
six bands from hourly concentrations of PM2.5, PM10, NO2, O3 and SO2 (µg/m³); the index is
the worst pollutant's band. A value on a band's upper limit belongs to that band (0-5 is
Good, above 5 Fair).
"""

from __future__ import annotations

from cleanair_core.air.indexes import (
    AveragedConcentration,
    Averaging,
    HealthAdvice,
    HourlyHistory,
    IndexValue,
)
from cleanair_core.air.pollutants import Pollutant

CODE = "eu_eaqi_2024"
NAME = "European Air Quality Index (EEA, 2024)"

#: Each pollutant's upper limits of the bands Good..Very poor; above the last, Extremely poor.
LIMITS: dict[Pollutant, tuple[float, float, float, float, float]] = {
    Pollutant.PM25: (5, 15, 50, 90, 140),
    Pollutant.PM10: (15, 45, 120, 195, 270),
    Pollutant.NO2: (10, 25, 60, 100, 150),
    Pollutant.O3: (60, 100, 120, 160, 180),
    Pollutant.SO2: (20, 40, 125, 190, 275),
}

#: (name, colour, general advice, advice for sensitive populations) per band, 1-6, as the
#: EEA's index viewer gives them.
BANDS: tuple[tuple[str, str, str, str], ...] = (
    ("Good", "#50F0E6",
     "The air quality is good. Enjoy your usual outdoor activities.",
     "The air quality is good. Enjoy your usual outdoor activities."),
    ("Fair", "#50CCAA",
     "Enjoy your usual outdoor activities.",
     "Enjoy your usual outdoor activities."),
    ("Moderate", "#F0E641",
     "Enjoy your usual outdoor activities.",
     "Consider reducing intense outdoor activities, if you experience symptoms."),
    ("Poor", "#FF5050",
     "Consider reducing intense activities outdoors, if you experience symptoms such as sore "
     "eyes, a cough or sore throat.",
     "Consider reducing physical activities, particularly outdoors, especially if you "
     "experience symptoms."),
    ("Very poor", "#960032",
     "Consider reducing intense activities outdoors, if you experience symptoms such as sore "
     "eyes, a cough or sore throat.",
     "Reduce physical activities, particularly outdoors, especially if you experience "
     "symptoms."),
    ("Extremely poor", "#7D2181",
     "Reduce physical activities outdoors.",
     "Avoid physical activities outdoors."),
)  # fmt: skip


def band(pollutant: Pollutant, concentration: float) -> int:
    """The band, 1 (Good) to 6 (Extremely poor), of an hourly concentration."""
    for number, limit in enumerate(LIMITS[pollutant], start=1):
        if concentration <= limit:
            return number
    return len(BANDS)


def eu_eaqi(history: HourlyHistory) -> IndexValue | None:
    """The index from the last hour of `history`, or None without any of its pollutants."""
    bands: dict[Pollutant, tuple[int, float]] = {}
    for pollutant in LIMITS:
        values = history.get(pollutant)
        last = values[-1] if values else None
        if last is not None:
            bands[pollutant] = (band(pollutant, last), last)
    if not bands:
        return None
    dominant = max(bands, key=lambda p: bands[p][0])
    value = bands[dominant][0]
    name, colour, general, sensitive = BANDS[value - 1]
    return IndexValue(
        code=CODE,
        name=NAME,
        value=value,
        category=name,
        colour=colour,
        dominant_pollutant=dominant,
        concentrations={p: AveragedConcentration(c, Averaging.HOUR) for p, (_, c) in bands.items()},
        health=HealthAdvice(general, sensitive),
    )

"""Pollutants the contract names, and the concentrations sources report for them."""

from __future__ import annotations

from enum import StrEnum


class Pollutant(StrEnum):
    """The contract's Pollutant enum; values are its measure keys (µg/m³ unless noted)."""

    PM25 = "pm25"
    PM10 = "pm10"
    NO2 = "no2"
    O3 = "o3"
    SO2 = "so2"
    PM1 = "pm1"
    CO2 = "co2"  # ppm; indoor sensors only, never scored
    TVOC = "tvoc"
    TVOC_INDEX = "tvoc_index"


#: The pollutants the Clean Air Score is computed from, in the order measures are reported.
SCORED: tuple[Pollutant, ...] = (
    Pollutant.PM25,
    Pollutant.PM10,
    Pollutant.NO2,
    Pollutant.O3,
    Pollutant.SO2,
)

#: Concentrations at one place and time, µg/m³. A pollutant that is absent, or maps to None,
#: is unknown there; it is never guessed as zero.
Concentrations = dict[Pollutant, float | None]

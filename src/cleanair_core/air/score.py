"""The Clean Air Score: an integer 0-100 from concentrations, 100 cleanest, and its five bands.

Formula (our choice, documented in docs/science.md): each pollutant's concentration is placed on
the European Air Quality Index bands of the EEA's 2024 revision (ETC HE Report 2024/17, hourly
µg/m³). Each EEA band is worth 20 points, interpolated linearly inside the band, which gives
the pollutant a sub-index 0-100 (anything in the "extremely poor" band is 100). The score is
100 minus the worst sub-index, rounded down so that a score never looks cleaner than the air,
clamped to 0-100. The five EEA bands Good … Very poor become Excellent … Very Poor.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping
from types import MappingProxyType

import attrs

from cleanair_core.air.pollutants import Pollutant

#: Upper bounds of the EEA 2024 bands Good, Fair, Moderate, Poor, Very poor (µg/m³). Above the
#: last bound the air is "extremely poor".
EEA_2024_BOUNDS: Mapping[Pollutant, tuple[float, float, float, float, float]] = MappingProxyType(
    {
        Pollutant.PM25: (5.0, 15.0, 50.0, 90.0, 140.0),
        Pollutant.PM10: (15.0, 45.0, 120.0, 195.0, 270.0),
        Pollutant.NO2: (10.0, 25.0, 60.0, 100.0, 150.0),
        Pollutant.O3: (60.0, 100.0, 120.0, 160.0, 180.0),
        Pollutant.SO2: (20.0, 40.0, 125.0, 190.0, 275.0),
    }
)
POINTS_PER_BAND = 20.0


def sub_index(pollutant: Pollutant, concentration: float) -> float:
    """The pollutant's position 0-100 on the EEA bands (0 clean air, 100 extremely poor).

    Non-decreasing in the concentration; negative readings count as zero.
    """
    bounds = EEA_2024_BOUNDS[pollutant]
    lower = 0.0
    for band, upper in enumerate(bounds):
        if concentration <= upper:
            fraction = max(0.0, concentration - lower) / (upper - lower)
            return POINTS_PER_BAND * (band + fraction)
        lower = upper
    return 100.0


def clean_air_score(concentrations: Mapping[Pollutant, float | None]) -> int | None:
    """The Clean Air Score of the scored pollutants present, or None when none is known.

    Unknown values (None, NaN) and pollutants outside the EEA bands (CO2, TVOC, PM1) are left
    out rather than guessed.
    """
    # `sub_index` inlined over precomputed bands (every score and tile asks this): the band
    # by bisection, then the same operations on the same floats, so bit for bit its value.
    worst: float | None = None
    for pollutant, value in concentrations.items():
        if value is None:
            continue
        bands = _BANDS.get(pollutant)
        if bands is None or math.isnan(value):
            continue
        bounds, lowers, widths = bands
        band = bisect.bisect_left(bounds, value)
        if band == len(bounds):
            index = 100.0
        else:
            index = POINTS_PER_BAND * (band + max(0.0, value - lowers[band]) / widths[band])
        if worst is None or index > worst:
            worst = index
    if worst is None:
        return None
    return max(0, min(100, math.floor(100.0 - worst + 1e-9)))


def _bands_of(
    bounds: tuple[float, ...],
) -> tuple[tuple[float, ...], tuple[float, ...], tuple[float, ...]]:
    """A pollutant's band uppers, each band's lower bound and its width (upper - lower)."""
    lowers = (0.0, *bounds[:-1])
    return bounds, lowers, tuple(upper - lower for upper, lower in zip(bounds, lowers, strict=True))


_BANDS = {pollutant: _bands_of(bounds) for pollutant, bounds in EEA_2024_BOUNDS.items()}


@attrs.frozen
class Band:
    """One of the five bands of the score: number 1 (cleanest) to 5, label and colour."""

    number: int
    label: str
    colour: str
    lowest_score: int


#: Cleanest first. The colours are the EEA index colours of the matching EEA bands.
BANDS: tuple[Band, ...] = (
    Band(1, "Excellent", "#50F0E6", 80),
    Band(2, "Good", "#50CCAA", 60),
    Band(3, "Moderate", "#F0E641", 40),
    Band(4, "Poor", "#FF5050", 20),
    Band(5, "Very Poor", "#960032", 0),
)


def band_of(score: float) -> Band:
    """The band a score 0-100 falls in (fractional scores, as route summaries have, too)."""
    if not 0.0 <= score <= 100.0:
        raise ValueError("a Clean Air Score lies within 0..100")
    for band in BANDS:
        if score >= band.lowest_score:
            return band
    raise AssertionError("unreachable: the last band starts at 0")  # pragma: no cover


@attrs.frozen
class BandedScore:
    """A (route) score with its band: `band` is the band number as a string, `description`
    its label (contract 2.8)."""

    score: float
    band: str
    description: str
    colour: str


def banded(score: float) -> BandedScore:
    """`score` with the band it falls in."""
    band = band_of(score)
    return BandedScore(score, str(band.number), band.label, band.colour)

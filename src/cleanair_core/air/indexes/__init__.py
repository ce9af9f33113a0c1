"""Official air-quality indexes: the index a government publishes, computed from the service's
hourly concentrations, with the averaged values it was computed from and its own health
advice.

Each index is a function of an `HourlyHistory` (each pollutant's hourly means, µg/m³, oldest
first, ending with the hour of interest) returning an `IndexValue`, or None when no pollutant
it uses has a value. Where the history is shorter than the official averaging period, the
index is computed from what there is and `averaging` says so (a "1h" where the rules ask for
"8h", say). Sources, breakpoints and rules: docs/indexes.md.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from enum import StrEnum

import attrs

from cleanair_core.air.pollutants import Pollutant

#: Each pollutant's hourly means, µg/m³, oldest first; the last is the hour of interest. None
#: marks an hour without a value.
HourlyHistory = Mapping[Pollutant, Sequence[float | None]]


class Averaging(StrEnum):
    """How the concentration an index was computed from was averaged."""

    HOUR = "1h"
    EIGHT_HOURS = "8h"
    DAY = "24h"
    NOWCAST = "nowcast"


@attrs.frozen
class AveragedConcentration:
    """A concentration (µg/m³) as an index used it."""

    concentration: float
    averaging: Averaging


@attrs.frozen
class HealthAdvice:
    """The index's own advice for its category."""

    general: str
    sensitive: str


@attrs.frozen
class IndexValue:
    """One official index at one place and hour."""

    code: str
    name: str
    value: int
    category: str
    colour: str
    dominant_pollutant: Pollutant
    concentrations: dict[Pollutant, AveragedConcentration]
    health: HealthAdvice


@attrs.frozen
class OfficialIndex:
    """An index the service computes: its code, name, where it is official and how."""

    code: str
    name: str
    #: ISO 3166-1 alpha-2 codes of the countries that publish it.
    countries: frozenset[str]
    compute: Callable[[HourlyHistory], IndexValue | None]
    #: Hours of history the index can use (its longest averaging period).
    hours_needed: int


def latest(values: Sequence[float | None]) -> float | None:
    """The last hour's value."""
    return values[-1] if values else None


def running_mean(
    values: Sequence[float | None], hours: int, at_least: int
) -> tuple[float, Averaging] | None:
    """The mean of the last `hours` hours when at least `at_least` of them have values
    (the official completeness rule), with the averaging that names it; else the last hour's
    value as a "1h" average; None when that is missing too."""
    window = [v for v in values[-hours:] if v is not None]
    if len(values) >= hours and len(window) >= at_least:
        averaging = {8: Averaging.EIGHT_HOURS, 24: Averaging.DAY}[hours]
        return sum(window) / len(window), averaging
    last = latest(values)
    return (last, Averaging.HOUR) if last is not None else None


def round_half_up(value: float) -> int:
    """Round to the nearest integer, halves up (as the index documents' examples do), not
    to the nearest even integer as Python's round does."""
    import math

    return math.floor(value + 0.5)

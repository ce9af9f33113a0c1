"""A point's conditions now: the score, the concentrations, the official indexes people know,
and where the numbers come from (the extension API's `POST /ext/v1/airquality/conditions`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta

import attrs

from cleanair_core.air.fused_air import FusedAir, FusedValue, StationUsed, background_values
from cleanair_core.air.indexes import IndexValue, OfficialIndex
from cleanair_core.air.point_score import current_hour
from cleanair_core.air.pollutants import SCORED, Concentrations, Pollutant
from cleanair_core.air.quality_source import AirQualitySource, Sample
from cleanair_core.air.score import clean_air_score
from cleanair_core.errors import SourceUnavailable
from cleanair_core.geo import Point

#: Hours of history asked of the source: the longest averaging period of any index (24 h).
HISTORY_HOURS = 24


@attrs.frozen
class Provenance:
    """Where a point's numbers come from: the source (`embedded-model`, `cams`, with
    `+stations` when observations changed any of them by more than 0.1 %), the hour they
    describe, how old that is (seconds from the start of that hour), and the stations whose
    weight at the point is at least 1 % for some pollutant (their largest weight)."""

    source: str
    data_time: datetime
    age_seconds: int
    stations: tuple[StationUsed, ...]


@attrs.frozen
class Conditions:
    """The conditions at a point now."""

    clean_air_score: int
    pollutants: Concentrations
    indexes: tuple[IndexValue, ...]
    provenance: Provenance
    #: Per pollutant of `pollutants`: its standard error, 90 % interval and stations
    #: (`FusedAir.explain`; the background's own error for an unfused source).
    uncertainty: dict[Pollutant, FusedValue]
    #: The score at the concentrations' 90 % intervals: at their high ends, at their low.
    score_interval90: tuple[int, int]


async def conditions_at(
    source: AirQualitySource,
    point: Point,
    now: datetime,
    indexes: Sequence[OfficialIndex],
    background: str,
) -> Conditions:
    """The conditions at `point` at `now` from `source`: its last 24 hours feed the indexes
    (their running means and NowCast). `background` names the unfused source
    (`embedded-model`, `cams`). Raises SourceUnavailable when the hour has no data."""
    step = max(1, int(source.update_interval))
    hour = current_hour(now, step)
    hours = [hour - timedelta(seconds=step * k) for k in range(HISTORY_HOURS - 1, -1, -1)]
    airs = await source.concentrations([Sample(point, at) for at in hours])
    air = airs[-1]
    score = clean_air_score(air)
    if score is None:
        raise SourceUnavailable("No air-quality data is available for this location")
    history = {pollutant: [a.get(pollutant) for a in airs] for pollutant in SCORED}
    values = tuple(value for index in indexes if (value := index.compute(history)) is not None)
    explained = background_values(air)
    if isinstance(source, FusedAir):
        explained |= await source.explain(point, hour)
        # The hour's values and their provenance from one computation (new observations
        # may have arrived since the history was asked).
        air = {**air, **{p: v.value for p, v in explained.items()}}
        rescored = clean_air_score(air)
        score = score if rescored is None else rescored
    pollutants: Concentrations = {p: v for p, v in air.items() if v is not None}
    stations = _stations(explained.values())
    corrected = any(value.corrected for value in explained.values())
    return Conditions(
        clean_air_score=score,
        pollutants=pollutants,
        indexes=values,
        provenance=Provenance(
            source=background + ("+stations" if corrected else ""),
            data_time=hour,
            age_seconds=max(0, int((now - hour).total_seconds())),
            stations=stations,
        ),
        uncertainty=explained,
        score_interval90=_score_band(explained, score),
    )


def _score_band(values: dict[Pollutant, FusedValue], score: int) -> tuple[int, int]:
    """The score with every concentration at its interval's high end, and at its low end."""
    worst = clean_air_score({p: v.high for p, v in values.items()})
    best = clean_air_score({p: v.low for p, v in values.items()})
    return (
        score if worst is None else min(worst, score),
        score if best is None else max(best, score),
    )


def _stations(values: Iterable[FusedValue]) -> tuple[StationUsed, ...]:
    """Every station reported for any pollutant, once, with its largest weight, heaviest
    first."""
    heaviest: dict[str, StationUsed] = {}
    for value in values:
        for station in value.stations:
            known = heaviest.get(station.id)
            if known is None or abs(station.weight) > abs(known.weight):
                heaviest[station.id] = station
    return tuple(sorted(heaviest.values(), key=lambda s: (-abs(s.weight), s.distance_m, s.id)))

"""A point's conditions now: the score, the concentrations, the official indexes people know,
and where the numbers come from (the extension API's `POST /ext/v1/airquality/conditions`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

import attrs

from cleanair_core.air.fused_air import FusedAir, StationUsed
from cleanair_core.air.indexes import IndexValue, OfficialIndex
from cleanair_core.air.point_score import current_hour
from cleanair_core.air.pollutants import SCORED, Concentrations
from cleanair_core.air.quality_source import AirQualitySource, Sample
from cleanair_core.air.score import clean_air_score
from cleanair_core.errors import SourceUnavailable
from cleanair_core.geo import Point

#: Hours of history asked of the source: the longest averaging period of any index (24 h).
HISTORY_HOURS = 24


@attrs.frozen
class Provenance:
    """Where a point's numbers come from: the source (`embedded-model`, `cams`, with
    `+stations` when observations correct them), the hour they describe, how old that is
    (seconds from the start of that hour), and the stations used."""

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
    stations = tuple(source.stations_near(point, hour)) if isinstance(source, FusedAir) else ()
    return Conditions(
        clean_air_score=score,
        pollutants={p: v for p, v in air.items() if v is not None},
        indexes=values,
        provenance=Provenance(
            source=background + ("+stations" if stations else ""),
            data_time=hour,
            age_seconds=max(0, int((now - hour).total_seconds())),
            stations=stations,
        ),
    )

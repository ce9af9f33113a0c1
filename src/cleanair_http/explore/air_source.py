"""Where the explorer's air comes from: the deployment's background source and, for a point
now, the monitoring stations the fused air is corrected with and the hour they measured.

The source is the deployment's `air_quality_source` setting, named for people. The stations
are those whose weight at the point is at least 1 % (`FusedAir.explain`), and the air counts
as fused there only where they changed a value by more than 0.1 %: stations a continent
away neither appear nor make it "fused".
"""

from __future__ import annotations

from datetime import datetime

import msgspec

from cleanair_core.air.fused_air import FusedAir
from cleanair_core.air.quality_source import AirQualitySource
from cleanair_core.geo import Point

#: The setting's values as a person reads them.
SOURCE_LABELS = {
    "embedded": "the embedded air-quality model (modelled offline, not measured)",
    "open-meteo": "CAMS forecasts via Open-Meteo",
}


class PollutantStations(msgspec.Struct):
    pollutant: str
    #: Station ids, as stored (`openaq:2178`), heaviest first.
    stations: list[str]
    #: Each one's weight at the point (its residual's share in the correction).
    weights: list[float]
    #: The end of the hour those stations measured.
    hour_end: datetime
    #: Whether they changed this pollutant's value there by more than 0.1 %.
    corrected: bool


class AirSource(msgspec.Struct):
    #: The `CLEANAIR_AIR_QUALITY_SOURCE` setting: `embedded` or `open-meteo`.
    source: str
    label: str
    #: Whether station observations changed the air at the point now (by more than 0.1 %).
    fused: bool
    #: Every station used for any pollutant, sorted.
    stations: list[str]
    pollutants: list[PollutantStations]
    #: When the answer was worked out (the server's clock).
    at: datetime


def source_label(source: str) -> str:
    return SOURCE_LABELS.get(source, source)


async def air_source(
    source: str, air: AirQualitySource | None, point: Point | None, now: datetime
) -> AirSource:
    """The source's label and, when `point` is given and `air` is fused, the stations
    correcting the air at `point` at `now` (the fused source is asked for it once)."""
    pollutants: list[PollutantStations] = []
    corrected = False
    if isinstance(air, FusedAir) and point is not None:
        explained = await air.explain(point, now)
        # Many stations each under 1 % may still move a value: it is fused all the same.
        corrected = any(value.corrected for value in explained.values())
        pollutants = [
            PollutantStations(
                pollutant.value,
                [s.id for s in value.stations],
                [round(s.weight, 4) for s in value.stations],
                value.stations[0].last_hour_end,
                value.corrected,
            )
            for pollutant, value in sorted(explained.items(), key=lambda item: item[0].value)
            if value.stations
        ]
    stations = sorted({station for entry in pollutants for station in entry.stations})
    return AirSource(
        source=source,
        label=source_label(source),
        fused=corrected,
        stations=stations,
        pollutants=pollutants,
        at=now,
    )

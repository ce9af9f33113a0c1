"""Where the explorer's air comes from: the deployment's background source and, for a point
now, the monitoring stations the fused air is corrected with and the hour they measured.

The source is the deployment's `air_quality_source` setting, named for people. The stations
are `FusedAir.stations_used` after the fused source was asked for the point once (so the
residual fields of this hour are computed: the embedded model computes, Open-Meteo answers
from its per-cell cache after the first call, and fused fields are kept per hour).
"""

from __future__ import annotations

from datetime import datetime

import msgspec

from cleanair_core.air.fused_air import FusedAir
from cleanair_core.air.quality_source import AirQualitySource, Sample
from cleanair_core.geo import Point

#: The setting's values as a person reads them.
SOURCE_LABELS = {
    "embedded": "the embedded air-quality model (modelled offline, not measured)",
    "open-meteo": "CAMS forecasts via Open-Meteo",
}


class PollutantStations(msgspec.Struct):
    pollutant: str
    #: Station ids, as stored (`openaq:2178`).
    stations: list[str]
    #: The end of the hour those stations measured.
    hour_end: datetime


class AirSource(msgspec.Struct):
    #: The `CLEANAIR_AIR_QUALITY_SOURCE` setting: `embedded` or `open-meteo`.
    source: str
    label: str
    #: Whether station observations correct the air at the point now.
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
    if isinstance(air, FusedAir) and point is not None:
        await air.concentrations([Sample(point, now)])
        used = air.stations_used(now)
        pollutants = [
            PollutantStations(pollutant.value, list(field.stations), field.hour_end)
            for pollutant, field in sorted(used.items(), key=lambda item: item[0].value)
        ]
    stations = sorted({station for entry in pollutants for station in entry.stations})
    return AirSource(
        source=source,
        label=source_label(source),
        fused=bool(stations),
        stations=stations,
        pollutants=pollutants,
        at=now,
    )

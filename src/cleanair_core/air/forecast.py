"""Use case: hourly scores and concentrations for one local day at a place (contract 4.3)."""

from __future__ import annotations

from datetime import datetime

import attrs

from cleanair_core.air.activities import ActivityType
from cleanair_core.air.exposure import EnvironmentType, breathed_air, personal_score
from cleanair_core.air.pollutants import SCORED
from cleanair_core.air.quality_source import AirQualitySource, Sample
from cleanair_core.errors import SourceUnavailable
from cleanair_core.geo import Point

#: The measure key of the score in forecasts and routes.
SCORE_MEASURE = "clean_air_score"


@attrs.frozen
class Forecast:
    """`measures` maps a measure key to values parallel to `timestamps` (epoch seconds)."""

    location: str
    timestamps: list[int]
    measures: dict[str, list[float | None]]


async def forecast_hours(
    source: AirQualitySource,
    point: Point,
    location: str,
    hours: list[datetime],
    activity: ActivityType,
    environment: EnvironmentType,
) -> Forecast:
    """Score every hour; pollutants appear only when at least one hour has a value."""
    airs = await source.concentrations([Sample(point, at) for at in hours])
    if len(airs) != len(hours):
        raise SourceUnavailable()
    scores: list[float | None] = []
    series: dict[str, list[float | None]] = {pollutant.value: [] for pollutant in SCORED}
    for air in airs:
        scores.append(personal_score(air, activity, environment))
        breathed = breathed_air(air, environment)
        for pollutant in SCORED:
            value = breathed.get(pollutant)
            series[pollutant.value].append(None if value is None else round(value, 2))
    if all(score is None for score in scores):
        raise SourceUnavailable("No air-quality data is available for this location")
    measures: dict[str, list[float | None]] = {SCORE_MEASURE: scores}
    measures.update(
        (key, values) for key, values in series.items() if any(v is not None for v in values)
    )
    return Forecast(location, [int(at.timestamp()) for at in hours], measures)

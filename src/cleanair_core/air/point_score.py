"""Use case: the Clean Air Score of one point now (contract 4.2)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import attrs

from cleanair_core.air.quality_source import AirQualitySource, Sample
from cleanair_core.air.score import clean_air_score
from cleanair_core.air.wifi import WifiAccessPoint, WifiGeolocator
from cleanair_core.errors import LocationUnresolved, SourceUnavailable
from cleanair_core.geo import Point

#: Bounds of `ttl`: never ask a client to poll more often than once a minute, nor to wait
#: more than an hour, whatever cadence a source declares.
TTL_MIN = 60
TTL_MAX = 3600


@attrs.frozen
class PointScore:
    score: int
    ttl: int


async def resolve_point(
    point: Point | None, wifi: Sequence[WifiAccessPoint], geolocator: WifiGeolocator | None
) -> Point:
    """Coordinates win; otherwise the scan is geolocated. Raises LocationUnresolved."""
    if point is not None:
        return point
    if geolocator is None:
        raise LocationUnresolved()
    located = await geolocator.locate(wifi)
    if located is None:
        raise LocationUnresolved()
    return located


def current_hour(now: datetime, interval: int) -> datetime:
    """The start of the source's update period containing `now` (UTC)."""
    stamp = int(now.timestamp())
    return datetime.fromtimestamp(stamp - stamp % interval, UTC)


def ttl_at(now: datetime, interval: int) -> int:
    """Seconds until the source's next value, bounded to TTL_MIN..TTL_MAX."""
    stamp = now.timestamp()
    remaining = int(interval - stamp % interval + 0.999)
    return max(TTL_MIN, min(TTL_MAX, remaining))


def score_sample(source: AirQualitySource, point: Point, now: datetime) -> Sample:
    """What a score at `point` asks `source` for: its value of the period containing `now`."""
    return Sample(point, current_hour(now, max(1, int(source.update_interval))))


async def score_at(source: AirQualitySource, point: Point, now: datetime) -> PointScore:
    """The score of the source's current value at `point`; SourceUnavailable without data."""
    interval = max(1, int(source.update_interval))
    [air] = await source.concentrations([score_sample(source, point, now)])
    score = clean_air_score(air)
    if score is None:
        raise SourceUnavailable("No air-quality data is available for this location")
    return PointScore(score, ttl_at(now, interval))

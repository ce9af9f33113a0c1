"""The stored form of a station, shared by the SQLite and PostgreSQL adapters: one row of
`stations` (id, name, lat, lon, station_type, area_type; types NULL when unknown)."""

from __future__ import annotations

from cleanair_core.air.observations import AreaType, Station, StationType
from cleanair_core.geo import Point


def station_from_row(
    station_id: str,
    name: str,
    lat: float,
    lon: float,
    station_type: str | None,
    area_type: str | None,
) -> Station:
    """The station a `stations` row holds."""
    return Station(
        station_id,
        name,
        Point(lat, lon),
        None if station_type is None else StationType(station_type),
        None if area_type is None else AreaType(area_type),
    )

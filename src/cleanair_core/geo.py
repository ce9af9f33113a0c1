"""Points on the WGS-84 ellipsoid and the distances between them."""

from __future__ import annotations

import math

import attrs

EARTH_RADIUS_M = 6_371_008.8  # mean radius (IUGG); a sphere is accurate to ~0.5 % here


@attrs.frozen
class Point:
    """A WGS-84 position in decimal degrees."""

    lat: float
    lon: float

    def __attrs_post_init__(self) -> None:
        if not (-90.0 <= self.lat <= 90.0 and -180.0 <= self.lon <= 180.0):
            raise ValueError("latitude must be within -90..90 and longitude within -180..180")


def distance_m(a: Point, b: Point) -> float:
    """Great-circle (haversine) distance in metres."""
    phi1, phi2 = math.radians(a.lat), math.radians(b.lat)
    dphi = phi2 - phi1
    dlmb = math.radians(b.lon - a.lon)
    h = math.sin(dphi / 2) ** 2 + math.cos(phi1) * math.cos(phi2) * math.sin(dlmb / 2) ** 2
    return 2 * EARTH_RADIUS_M * math.asin(min(1.0, math.sqrt(h)))

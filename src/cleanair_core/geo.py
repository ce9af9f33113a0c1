"""Points on the WGS-84 ellipsoid and the distances between them, one pair or many."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, TypeAlias

import attrs

# NumPy is imported by the functions that compute: the operator CLI's commands import this
# module and start faster without NumPy (tests/cleanair_runtime/test_cli_startup.py).
if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

EARTH_RADIUS_M = 6_371_008.8  # mean radius (IUGG); a sphere is accurate to ~0.5 % here

#: Degrees or metres, one per point or edge.
FloatArray: TypeAlias = "npt.NDArray[np.float64]"


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


def distances_m(
    lat1: FloatArray | float,
    lon1: FloatArray | float,
    lat2: FloatArray | float,
    lon2: FloatArray | float,
) -> FloatArray:
    """Great-circle (haversine) distances in metres, elementwise: `distance_m` over NumPy
    arrays of degrees that broadcast together, so a float against arrays is one point against
    many. The same formula in the same order as `distance_m`; NumPy's sine and cosine may
    differ from the math module's in the last bit."""
    import numpy as np

    phi1, phi2 = np.radians(lat1), np.radians(lat2)
    h = (
        np.sin((phi2 - phi1) / 2.0) ** 2
        + np.cos(phi1) * np.cos(phi2) * np.sin(np.radians(lon2 - lon1) / 2.0) ** 2
    )
    distance: FloatArray = 2.0 * EARTH_RADIUS_M * np.arcsin(np.minimum(1.0, np.sqrt(h)))
    return distance

"""Web-Mercator XYZ tile geometry (the slippy-map convention of OpenStreetMap and Google):
at zoom z the world between ±85.0511° is 2^z x 2^z tiles of `TILE_SIZE` pixels, x growing
east from 180° W, y growing south from the top edge."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import attrs

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    FloatArray = npt.NDArray[np.float64]

TILE_SIZE = 256
MIN_ZOOM = 0
MAX_ZOOM = 18
#: The latitude where the square Mercator world ends: atan(sinh(π)).
MAX_LATITUDE = math.degrees(math.atan(math.sinh(math.pi)))
#: The sphere Web Mercator projects (WGS 84's semi-major axis), metres.
_EARTH_RADIUS_M = 6_378_137.0


@attrs.frozen
class Tile:
    """One tile: zoom `z`, column `x`, row `y`; `valid_tile` says whether it exists."""

    z: int
    x: int
    y: int


def valid_tile(tile: Tile) -> bool:
    """Whether the zoom is within `MIN_ZOOM`..`MAX_ZOOM` and x, y within 0..2^z - 1."""
    if not MIN_ZOOM <= tile.z <= MAX_ZOOM:
        return False
    side = 1 << tile.z
    return 0 <= tile.x < side and 0 <= tile.y < side


def world_size(z: int) -> int:
    """Pixels across the whole world at zoom `z`."""
    return TILE_SIZE << z


def lon_of(px: FloatArray | float, z: int) -> FloatArray:
    """The longitude of world pixel coordinate `px` (0 at 180° W) at zoom `z`."""
    import numpy as np

    return np.asarray(px, dtype=np.float64) / world_size(z) * 360.0 - 180.0


def lat_of(py: FloatArray | float, z: int) -> FloatArray:
    """The latitude of world pixel coordinate `py` (0 at the top edge) at zoom `z`."""
    import numpy as np

    n = math.pi - 2.0 * math.pi * np.asarray(py, dtype=np.float64) / world_size(z)
    return np.degrees(np.arctan(np.sinh(n)))


def px_of(lon: FloatArray | float, z: int) -> FloatArray:
    """The world pixel coordinate of longitude `lon` at zoom `z`."""
    import numpy as np

    return (np.asarray(lon, dtype=np.float64) + 180.0) / 360.0 * world_size(z)


def py_of(lat: FloatArray | float, z: int) -> FloatArray:
    """The world pixel coordinate of latitude `lat` at zoom `z` (clamped to the map's edge)."""
    import numpy as np

    clamped = np.clip(np.asarray(lat, dtype=np.float64), -MAX_LATITUDE, MAX_LATITUDE)
    y = np.log(np.tan(np.pi / 4.0 + np.radians(clamped) / 2.0))
    return (1.0 - y / math.pi) / 2.0 * world_size(z)


def pixel_centres(tile: Tile) -> tuple[FloatArray, FloatArray]:
    """The latitude of each row's pixel centres and the longitude of each column's, top to
    bottom and west to east (Mercator: a row shares its latitude, a column its longitude)."""
    import numpy as np

    offsets = np.arange(TILE_SIZE, dtype=np.float64) + 0.5
    return lat_of(tile.y * TILE_SIZE + offsets, tile.z), lon_of(
        tile.x * TILE_SIZE + offsets, tile.z
    )


def bounds(tile: Tile) -> tuple[float, float, float, float]:
    """The tile's (south, west, north, east) edges, degrees."""
    top, left = tile.y * TILE_SIZE, tile.x * TILE_SIZE
    return (
        float(lat_of(top + TILE_SIZE, tile.z)),
        float(lon_of(left, tile.z)),
        float(lat_of(top, tile.z)),
        float(lon_of(left + TILE_SIZE, tile.z)),
    )


def metres_per_pixel(lat: float, z: int) -> float:
    """The ground size of one pixel at latitude `lat` and zoom `z`."""
    return 2.0 * math.pi * _EARTH_RADIUS_M * math.cos(math.radians(lat)) / world_size(z)

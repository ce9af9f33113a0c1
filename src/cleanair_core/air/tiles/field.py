"""The air one tile draws, for one hour: the fused background on a lattice over the tile,
interpolated to every pixel, and each loaded street's own street-level value along it.

The background is the air as the service fuses it (stations fused into the background
source, as the conditions and score compute it) without the streets' traffic increments:
the air of the background cell where no street is. Sampled on a lattice every
`LATTICE_STEP` pixels (a background cell is kilometres wide; a station's correction varies
over hundreds of metres at least) and interpolated bilinearly in the map's projection, it
costs a few thousand points a tile, not 65,536. The streets are drawn over it, each with the
street-level value at its centre line (`cleanair_core.air.street_level`, fused).
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

import attrs

from cleanair_core.air.gridded_fused_air import GriddedFusedAir
from cleanair_core.air.pollutants import SCORED, Pollutant
from cleanair_core.air.quality_source import AirQualitySource, GriddedAir, Sample
from cleanair_core.air.street_level import GriddedStreetLevelAir
from cleanair_core.air.tiles.geometry import TILE_SIZE, Tile, lat_of, lon_of, px_of, py_of
from cleanair_core.geo import Point

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    FloatArray = npt.NDArray[np.float64]
    BoolArray = npt.NDArray[np.bool_]

#: Pixels between the lattice's points: 33 x 33 points a tile (150 m apart at zoom 12 in
#: Helsinki, 1.2 m at zoom 18; a background cell is kilometres wide).
LATTICE_STEP = 8


@attrs.frozen(eq=False)
class Streets:
    """Street segments to draw: their ends (degrees) and widths (metres), one entry each."""

    lat0: FloatArray
    lon0: FloatArray
    lat1: FloatArray
    lon1: FloatArray
    width_m: FloatArray
    #: Each segment's bounding box in world pixels at zoom 0 (rows west, east, north, south),
    #: worked out once for all the tiles that test it (`boxed`); None: worked out per tile.
    box: FloatArray | None = None

    def __len__(self) -> int:
        return int(self.lat0.size)

    def subset(self, which: BoolArray) -> Streets:
        return Streets(
            self.lat0[which], self.lon0[which], self.lat1[which], self.lon1[which],
            self.width_m[which], None if self.box is None else self.box[:, which],
        )  # fmt: skip


def boxed(streets: Streets) -> Streets:
    """`streets` with their bounding boxes worked out (`Streets.box`)."""
    import numpy as np

    x0, x1 = px_of(streets.lon0, 0), px_of(streets.lon1, 0)
    y0, y1 = py_of(streets.lat0, 0), py_of(streets.lat1, 0)
    box = np.stack([np.minimum(x0, x1), np.maximum(x0, x1), np.minimum(y0, y1), np.maximum(y0, y1)])
    return attrs.evolve(streets, box=box)


def no_streets() -> Streets:
    import numpy as np

    empty = np.zeros(0, dtype=np.float64)
    return Streets(empty, empty, empty, empty, empty)


@attrs.frozen(eq=False)
class TileAir:
    """The air of one tile and hour: `background` a row per pixel (row-major, top left
    first) and a column per `SCORED` pollutant; `streets` the segments crossing the tile and
    `street_air` their street-level air (a row each)."""

    tile: Tile
    background: FloatArray
    streets: Streets
    street_air: FloatArray


def lattice(tile: Tile, step: int = LATTICE_STEP) -> tuple[FloatArray, FloatArray]:
    """The latitudes (top to bottom) and longitudes (west to east) of the lattice's lines:
    every `step` pixels from the tile's top-left corner to its bottom-right one."""
    import numpy as np

    offsets = np.arange(0, TILE_SIZE + 1, step, dtype=np.float64)
    return lat_of(tile.y * TILE_SIZE + offsets, tile.z), lon_of(
        tile.x * TILE_SIZE + offsets, tile.z
    )


def interpolated(values: FloatArray, step: int = LATTICE_STEP) -> FloatArray:
    """Values on the lattice (a row per point, row-major, n x n points) bilinearly
    interpolated at every pixel centre: a row per pixel, row-major."""
    import numpy as np

    n = TILE_SIZE // step + 1
    grid = values.reshape(n, n, -1)
    at = (np.arange(TILE_SIZE, dtype=np.float64) + 0.5) / step
    low = np.minimum(at.astype(np.intp), n - 2)
    share = (at - low)[:, None]
    # Along x, then along y: each a weighted sum of two neighbours.
    across = grid[:, low, :] * (1.0 - share)[None, :, :] + grid[:, low + 1, :] * share[None, :, :]
    down = across[low, :, :] * (1.0 - share)[:, :, None] + across[low + 1, :, :] * share[:, :, None]
    result: FloatArray = down.reshape(TILE_SIZE * TILE_SIZE, -1)
    return result


def crossing(streets: Streets, tile: Tile, margin_px: float) -> BoolArray:
    """The segments whose bounding box comes within `margin_px` of the tile."""

    box = (streets if streets.box is not None else boxed(streets)).box
    assert box is not None
    # The tile widened by the margin, in world pixels at zoom 0.
    scale = float(1 << tile.z)
    left, top = (tile.x * TILE_SIZE - margin_px) / scale, (tile.y * TILE_SIZE - margin_px) / scale
    right = left + (TILE_SIZE + 2 * margin_px) / scale
    bottom = top + (TILE_SIZE + 2 * margin_px) / scale
    inside: BoolArray = (box[1] >= left) & (box[0] <= right) & (box[3] >= top) & (box[2] <= bottom)
    return inside


def fused_background(
    source: GriddedAir, lats: FloatArray, lons: FloatArray, hour: datetime
) -> FloatArray:
    """The air at the points without the streets' traffic: for the service's source (the
    street level fused with the stations) the background source corrected by the stations'
    correction at each point (the fused value minus the street level there); for a source
    without street level, its own values."""
    import numpy as np

    unfused = source.unfused if isinstance(source, GriddedFusedAir) else None
    street = unfused if isinstance(unfused, GriddedStreetLevelAir) else None
    if street is None:
        if isinstance(source, GriddedStreetLevelAir) and isinstance(source.background, GriddedAir):
            return source.background.air_at_hour(lats, lons, hour)
        return source.air_at_hour(lats, lons, hour)
    background = street.background
    if not isinstance(background, GriddedAir):  # `street_level_air` never builds one so
        return source.air_at_hour(lats, lons, hour)
    fused = source.air_at_hour(lats, lons, hour)
    local = street.air_at_hour(lats, lons, hour)
    result = np.maximum(background.air_at_hour(lats, lons, hour) + (fused - local), 0.0)
    pm25, pm10 = SCORED.index(Pollutant.PM25), SCORED.index(Pollutant.PM10)
    result[:, pm10] = np.fmax(result[:, pm10], result[:, pm25])  # PM10 contains PM2.5
    return result


def gridded_tile_air(
    source: GriddedAir, tile: Tile, hour: datetime, streets: Streets, margin_px: float
) -> TileAir:
    """The tile's air from a source that computes its values (CPU work: off the event loop).
    `streets` are all the loaded ones; those within `margin_px` of the tile are kept."""
    import numpy as np

    lats, lons = lattice(tile)
    grid_lat, grid_lon = np.meshgrid(lats, lons, indexing="ij")
    points = fused_background(source, grid_lat.reshape(-1), grid_lon.reshape(-1), hour)
    background = interpolated(points)
    kept = streets.subset(crossing(streets, tile, margin_px)) if len(streets) else streets
    if len(kept):
        street_air = source.air_at_hour(
            (kept.lat0 + kept.lat1) / 2.0, (kept.lon0 + kept.lon1) / 2.0, hour
        )
    else:
        street_air = np.zeros((0, len(SCORED)), dtype=np.float64)
    return TileAir(tile, background, kept, street_air)


#: Pixels between the lattice's points for a source that answers sample by sample (a remote
#: one): 17 x 17 points a tile.
SAMPLED_STEP = 16


async def sampled_tile_air(
    source: AirQualitySource, tile: Tile, hour: datetime, streets: Streets, margin_px: float
) -> TileAir:
    """The tile's air from a source that answers samples (a remote one): its values, street
    level included where it has any, on a coarser lattice, and at the streets' middles."""
    import numpy as np

    lats, lons = lattice(tile, SAMPLED_STEP)
    samples = [Sample(Point(float(a), float(o)), hour) for a in lats for o in lons]
    kept = streets.subset(crossing(streets, tile, margin_px)) if len(streets) else streets
    middles = zip(
        ((kept.lat0 + kept.lat1) / 2.0).tolist(),
        ((kept.lon0 + kept.lon1) / 2.0).tolist(),
        strict=True,
    )
    samples += [Sample(Point(a, o), hour) for a, o in middles]
    airs = await source.concentrations(samples)
    values = np.array(
        [[_or_nan(air.get(p)) for p in SCORED] for air in airs], dtype=np.float64
    ).reshape(len(samples), len(SCORED))
    on_lattice = lats.size * lons.size
    background = interpolated(values[:on_lattice], SAMPLED_STEP)
    return TileAir(tile, background, kept, values[on_lattice:])


def _or_nan(value: float | None) -> float:
    return float("nan") if value is None else value

"""The traffic increment of each street-level pollutant, from street networks' roads.

`NetworkIncrements` is the core's `TrafficIncrements` port for the loaded networks. For a
pollutant p with traffic effect (a_p, L_p, R_p) (`cleanair_core.air.street_level`), the
increment at daily-mean traffic at a point x is the sum over every road r within R_p

    ΔC_p(x) = a_p · Σ_r (V_r / 10,000) · ∫_r K_p(d(x, s)) ds / N_p

with V_r the road's vehicles a day (`StreetNetwork.edge_traffic`), K_p the shifted exponential
decay of `road_decay` and N_p its integral along a long straight road, so that such a road of
10,000 vehicles a day gives a_p at its centre line.

How it is computed, once per network when it is loaded: the area the network covers (plus
the largest reach around it) is laid on a raster of `CELL_M` metres (coarser for a very large
area, so that no network takes more than `MAX_CELLS` raster points). Every road is cut into
pieces of at most half a raster cell, each piece's traffic x length is added to its nearest
raster point, and the result is convolved with each decay kernel by FFT (NumPy's: importing
`scipy.signal` for its `fftconvolve` took seconds of every server's start-up). The fields are kept
as float32, four values per raster point: `MAX_CELLS` x 16 bytes = 32 MB at most per network,
about 0.9 MB for the shipped central-Helsinki extract. A point is then read by bilinear
interpolation between the four raster points around it: a few microseconds, whatever the
number of roads.

A network mapped from the machine's network file (`cleanair_storage.network_files`) carries
its raster already (`StreetNetwork.derived`, `increment_arrays`): every process then reads
one copy, and none convolves.

Only points inside a network's bounding box get an increment (the raster's margin serves the
convolution, not the lookup); anywhere else the background applies unchanged.

A cell's mean (`cell_mean`) is over the whole background cell: the raster points inside it
give the covered part's mean, weighted by the area of the boxes inside the cell; the rest of
the cell carries the `REMAINDER_QUANTILE` of those points' increments.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import numpy as np
import numpy.typing as npt

from cleanair_core.air.street_level import (
    REMAINDER_QUANTILE,
    TRAFFIC_EFFECTS,
    GridCell,
    road_decay,
    straight_road_integral,
)
from cleanair_core.geo import EARTH_RADIUS_M
from cleanair_core.routes.network import StreetNetwork

FloatArray = npt.NDArray[np.float64]

#: Raster spacing, metres: finer than a street's width, so a kerb and the pavement across the
#: road differ, coarse enough to keep a city in a few megabytes.
CELL_M = 10.0
#: Most raster points of one network (see the module documentation for the memory it bounds).
MAX_CELLS = 2_000_000
#: The version of `increment_arrays`' layout: a change to it, or to the fields' model, must
#: change this.
DERIVATION = "increments-1"

_M_PER_DEG = EARTH_RADIUS_M * math.pi / 180.0
_MARGIN_M = max(effect.reach_m for effect in TRAFFIC_EFFECTS)
_VEHICLES_UNIT = 10_000.0


def _smooth_size(n: int) -> int:
    """The least 2-3-5-smooth number >= `n`: the FFT is fast at such a size."""
    best = 1 << max(n - 1, 0).bit_length()  # a power of two always is
    power5 = 1
    while power5 < best:
        power35 = power5
        while power35 < best:
            size = power35
            while size < n:
                size *= 2
            best = min(best, size)
            power35 *= 3
        power5 *= 5
    return best


def _convolve_same(image: FloatArray, kernel: FloatArray) -> FloatArray:
    """`image` convolved with the odd-sized `kernel`, the result the size of `image` and
    centred on it (scipy.signal.fftconvolve's mode="same")."""
    rows = image.shape[0] + kernel.shape[0] - 1
    columns = image.shape[1] + kernel.shape[1] - 1
    shape = (_smooth_size(rows), _smooth_size(columns))
    product = np.fft.rfft2(image, shape) * np.fft.rfft2(kernel, shape)
    full = np.fft.irfft2(product, shape)
    top, left = (kernel.shape[0] - 1) // 2, (kernel.shape[1] - 1) // 2
    same: FloatArray = full[top : top + image.shape[0], left : left + image.shape[1]]
    return same


class _Raster:
    """One network's increments on a regular raster in a local equirectangular projection."""

    def __init__(self, network: StreetNetwork, cell_m: float, max_cells: int) -> None:
        self.south, self.west, self.north, self.east = network.bounds
        if "increments.field" in network.derived and (cell_m, max_cells) == (CELL_M, MAX_CELLS):
            self._mapped(network.derived)
            return
        self.m_per_deg_lon = _M_PER_DEG * math.cos(math.radians((self.south + self.north) / 2))
        width = (self.east - self.west) * self.m_per_deg_lon + 2 * _MARGIN_M
        height = (self.north - self.south) * _M_PER_DEG + 2 * _MARGIN_M
        step = cell_m
        if (width / step + 2) * (height / step + 2) > max_cells:
            step = math.sqrt(width * height / max_cells) * 1.05
            while (width / step + 2) * (height / step + 2) > max_cells:
                step *= 1.05
        self.step = step
        self.columns = math.ceil(width / step) + 2
        self.rows = math.ceil(height / step) + 2
        emissions = self._emissions(network)
        self.field = np.empty((self.rows, self.columns, len(TRAFFIC_EFFECTS)), dtype=np.float32)
        convolved: dict[tuple[float, float], FloatArray] = {}
        for index, effect in enumerate(TRAFFIC_EFFECTS):
            shape = (effect.decay_m, effect.reach_m)
            if shape not in convolved:
                convolved[shape] = self._convolve(emissions, index)
            self.field[:, :, index] = effect.per_10k_vehicles * convolved[shape]

    def _mapped(self, derived: Mapping[str, npt.NDArray[Any]]) -> None:
        self.m_per_deg_lon, self.step, columns, rows = derived["increments.raster"].tolist()
        self.columns, self.rows = int(columns), int(rows)
        self.field = derived["increments.field"]

    def arrays(self) -> dict[str, npt.NDArray[Any]]:
        """The raster, named for a file."""
        raster = [self.m_per_deg_lon, self.step, self.columns, self.rows]
        return {"increments.raster": np.array(raster), "increments.field": self.field}

    # -- projection ---------------------------------------------------------------------------

    def _x(self, lons: FloatArray) -> FloatArray:
        """Raster column coordinate (fractional) of each longitude."""
        x: FloatArray = ((lons - self.west) * self.m_per_deg_lon + _MARGIN_M) / self.step
        return x

    def _y(self, lats: FloatArray) -> FloatArray:
        y: FloatArray = ((lats - self.south) * _M_PER_DEG + _MARGIN_M) / self.step
        return y

    def _emissions(self, network: StreetNetwork) -> FloatArray:
        """Traffic (in 10,000 vehicles a day) x metres of road, summed at each raster point."""
        traffic = np.asarray(network.edge_traffic, dtype=np.float64)
        edges = np.flatnonzero((traffic > 0) & np.isfinite(traffic))
        grid = np.zeros(self.rows * self.columns, dtype=np.float64)
        if edges.size == 0:
            return grid.reshape(self.rows, self.columns)
        frm, to = network.edge_from[edges], network.edge_to[edges]
        x0, x1 = self._x(network.node_lon[frm]), self._x(network.node_lon[to])
        y0, y1 = self._y(network.node_lat[frm]), self._y(network.node_lat[to])
        length = network.edge_length[edges]
        pieces = np.maximum(np.ceil(np.hypot(x1 - x0, y1 - y0) * 2.0), 1).astype(np.int64)
        piece_edge = np.repeat(np.arange(edges.size), pieces)
        first = np.cumsum(pieces) - pieces
        t = (np.arange(piece_edge.size) - np.repeat(first, pieces) + 0.5) / pieces[piece_edge]
        x = x0[piece_edge] + t * (x1 - x0)[piece_edge]
        y = y0[piece_edge] + t * (y1 - y0)[piece_edge]
        weight = (traffic[edges] / _VEHICLES_UNIT * length / pieces)[piece_edge]
        column = np.clip(np.rint(x).astype(np.int64), 0, self.columns - 1)
        row = np.clip(np.rint(y).astype(np.int64), 0, self.rows - 1)
        grid += np.bincount(row * self.columns + column, weights=weight, minlength=grid.size)
        return grid.reshape(self.rows, self.columns)

    def _convolve(self, emissions: FloatArray, index: int) -> FloatArray:
        """The emissions spread by effect `index`'s decay, per unit of its kerb increment."""
        effect = TRAFFIC_EFFECTS[index]
        radius = math.ceil(effect.reach_m / self.step)
        offsets = np.arange(-radius, radius + 1) * self.step
        distance = np.hypot(offsets[:, None], offsets[None, :])
        kernel = road_decay(distance, effect) / straight_road_integral(effect)
        spread = _convolve_same(emissions, kernel)
        # FFT round-off leaves tiny negative values where there is no road at all.
        return np.maximum(spread, 0.0)

    # -- lookups ------------------------------------------------------------------------------

    def inside(self, lats: FloatArray, lons: FloatArray) -> npt.NDArray[np.bool_]:
        """Whether each point lies in the network's bounding box."""
        box: npt.NDArray[np.bool_] = (
            (lats >= self.south) & (lats <= self.north) & (lons >= self.west) & (lons <= self.east)
        )
        return box

    def at(self, lats: FloatArray, lons: FloatArray) -> FloatArray:
        """Bilinear interpolation of the fields at points inside the bounding box."""
        x, y = self._x(lons), self._y(lats)
        c0 = np.clip(np.floor(x).astype(np.int64), 0, self.columns - 2)
        r0 = np.clip(np.floor(y).astype(np.int64), 0, self.rows - 2)
        fx = np.clip(x - c0, 0.0, 1.0)[:, None]
        fy = np.clip(y - r0, 0.0, 1.0)[:, None]
        f = self.field
        value: FloatArray = (1 - fy) * ((1 - fx) * f[r0, c0] + fx * f[r0, c0 + 1]) + fy * (
            (1 - fx) * f[r0 + 1, c0] + fx * f[r0 + 1, c0 + 1]
        )
        return value

    def at_one(self, lat: float, lon: float) -> list[float]:
        """`at` for one point, in plain floats (a score asks for one point: no array set-up)."""
        x = ((lon - self.west) * self.m_per_deg_lon + _MARGIN_M) / self.step
        y = ((lat - self.south) * _M_PER_DEG + _MARGIN_M) / self.step
        c0 = min(max(math.floor(x), 0), self.columns - 2)
        r0 = min(max(math.floor(y), 0), self.rows - 2)
        fx, fy = min(max(x - c0, 0.0), 1.0), min(max(y - r0, 0.0), 1.0)
        corners = self.field[r0 : r0 + 2, c0 : c0 + 2].tolist()
        (a, b), (c, d) = corners
        return [
            (1 - fy) * ((1 - fx) * p + fx * q) + fy * ((1 - fx) * r + fx * t)
            for p, q, r, t in zip(a, b, c, d, strict=True)
        ]

    def area_in(self, cell: GridCell) -> float:
        """The area of the bounding box inside `cell`, m² (in the raster's projection)."""
        height = min(cell.north, self.north) - max(cell.south, self.south)
        width = min(cell.east, self.east) - max(cell.west, self.west)
        return max(height, 0.0) * _M_PER_DEG * max(width, 0.0) * self.m_per_deg_lon

    def points_in(
        self, cell: GridCell, others: Sequence[_Raster]
    ) -> tuple[npt.NDArray[np.bool_], slice, slice] | None:
        """The raster points inside both `cell` and the bounding box and inside no box of
        `others`: a mask over the rows and columns the two boxes share, or None."""
        south, north = max(cell.south, self.south), min(cell.north, self.north)
        west, east = max(cell.west, self.west), min(cell.east, self.east)
        if south > north or west > east:
            return None
        y = self._y(np.array([south, north]))
        x = self._x(np.array([west, east]))
        rows = slice(max(math.ceil(y[0]), 0), min(math.floor(y[1]) + 1, self.rows))
        columns = slice(max(math.ceil(x[0]), 0), min(math.floor(x[1]) + 1, self.columns))
        if rows.start >= rows.stop or columns.start >= columns.stop:
            return None
        lats = self.south + (np.arange(rows.start, rows.stop) * self.step - _MARGIN_M) / _M_PER_DEG
        lons = (
            self.west
            + (np.arange(columns.start, columns.stop) * self.step - _MARGIN_M) / self.m_per_deg_lon
        )
        grid_lats, grid_lons = np.meshgrid(lats, lons, indexing="ij")
        mask = np.ones(grid_lats.shape, dtype=np.bool_)
        for other in others:
            mask &= ~other.inside(grid_lats, grid_lons)
        return mask, rows, columns


def increment_arrays(network: StreetNetwork) -> dict[str, npt.NDArray[Any]]:
    """The raster `NetworkIncrements` derives from `network`, built now (none for a network
    without nodes)."""
    if not network.node_count:
        return {}
    return _Raster(attrs.evolve(network, derived={}), CELL_M, MAX_CELLS).arrays()


class NetworkIncrements:
    """`TrafficIncrements` from the roads of street networks (one raster each).

    A point inside several networks' bounding boxes takes the first network's value (in the
    order given); cell means count each place once, by the same rule.
    """

    def __init__(
        self,
        networks: Sequence[StreetNetwork],
        *,
        cell_m: float = CELL_M,
        max_cells: int = MAX_CELLS,
    ) -> None:
        self._rasters = [
            _Raster(network, cell_m, max_cells) for network in networks if network.node_count
        ]

    @property
    def memory_bytes(self) -> int:
        """What the increment fields take, all networks together."""
        return sum(raster.field.nbytes for raster in self._rasters)

    def at(self, lats: FloatArray, lons: FloatArray) -> FloatArray:
        """See `TrafficIncrements.at`."""
        lat = np.asarray(lats, dtype=np.float64).reshape(-1)
        lon = np.asarray(lons, dtype=np.float64).reshape(-1)
        result = np.full((lat.size, len(TRAFFIC_EFFECTS)), np.nan)
        if lat.size == 1:
            if (one := self.at_one(float(lat[0]), float(lon[0]))) is not None:
                result[0] = one
            return result
        todo = np.ones(lat.size, dtype=np.bool_)
        for raster in self._rasters:
            here = np.flatnonzero(todo & raster.inside(lat, lon))  # NaN is never inside
            if here.size:
                result[here] = raster.at(lat[here], lon[here])
                todo[here] = False
        return result

    def at_one(self, lat: float, lon: float) -> list[float] | None:
        """`at` of one point in plain floats, None outside every network (a score's)."""
        for raster in self._rasters:
            if raster.south <= lat <= raster.north and raster.west <= lon <= raster.east:
                return raster.at_one(lat, lon)
        return None

    def cell_cover(self, cell: GridCell) -> CellCover | None:
        """What the networks say about `cell`: the share of its area they cover, the mean
        increment over that part and the quiet increment the rest is taken to carry (None: the
        networks miss the cell)."""
        area = 0.0
        fields: list[FloatArray] = []
        for index, raster in enumerate(self._rasters):
            found = raster.points_in(cell, self._rasters[:index])
            if found is None:
                continue
            mask, rows, columns = found
            # Each raster point stands for the same area: the part of the box inside the cell,
            # less what an earlier network's box already counted.
            area += raster.area_in(cell) * float(mask.mean())
            fields.append(raster.field[rows, columns][mask].astype(np.float64))
        if not fields:
            return None
        values = np.concatenate(fields)
        sign = np.sign([effect.per_10k_vehicles for effect in TRAFFIC_EFFECTS])
        # "Quiet" is a small traffic effect: a low quantile of the increase, and for ozone,
        # which traffic lowers, of the loss.
        quiet: FloatArray = sign * np.quantile(sign * values, REMAINDER_QUANTILE, axis=0)
        return CellCover(
            share=min(area / _cell_area_m2(cell), 1.0),
            covered_mean=values.mean(axis=0),
            remainder=quiet,
        )

    def cell_mean(self, cell: GridCell) -> FloatArray | None:
        """See `TrafficIncrements.cell_mean`: the covered part's mean and the remainder's
        quiet increment, each weighted by its share of the cell's area."""
        cover = self.cell_cover(cell)
        return None if cover is None else cover.whole_cell_mean


@attrs.frozen
class CellCover:
    """The networks' part of one background cell (one value per `TRAFFIC_EFFECTS`)."""

    share: float
    covered_mean: FloatArray
    remainder: FloatArray

    @property
    def whole_cell_mean(self) -> FloatArray:
        mean: FloatArray = self.share * self.covered_mean + (1.0 - self.share) * self.remainder
        return mean


def _cell_area_m2(cell: GridCell) -> float:
    """The cell's area on the sphere, m²: cells are a few kilometres, so a flat rectangle at
    the middle latitude (as the rasters project) is exact to well under 0.1 %."""
    middle = math.radians((cell.south + cell.north) / 2.0)
    return (
        (cell.north - cell.south)
        * _M_PER_DEG
        * (cell.east - cell.west)
        * _M_PER_DEG
        * math.cos(middle)
    )

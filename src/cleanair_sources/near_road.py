"""How close a point is to heavy traffic, from a street network's roads.

`NetworkNearRoad` is the embedded model's `NearRoadIncrement` for the area a street network
covers: 0 away from traffic, 1 at the kerb of an arterial road or a motorway. For a point x

    R(x) = max over roads r of  w(class of r) · f(d(x, r))

with d the distance from x to the road's centre line, the class weights w below and

    f(d) = (exp(-d / L) - exp(-D / L)) / (1 - exp(-D / L))   for d < D, else 0,

an exponential decay with scale L = 60 m, shifted and rescaled so that it is 1 on the road and
falls to exactly 0 at D = 250 m (no step at the edge of the reach). A point farther than D from
every weighted road, including anywhere outside the network, gets 0.

Why these numbers: concentrations of traffic pollutants fall steeply with distance from a busy
road. In the synthesis of 41 roadside studies by Karner, Eisinger and Niemeier (2010, Environ.
Sci. Technol. 44:5334, "Near-roadway air quality: synthesizing the findings from real-world
data") almost all pollutants reach background within 115-570 m of the road edge, and the
fastest-decaying ones (CO, ultrafine particles) lose at least half their edge-of-road excess by
150 m, while NO2 decays more gradually over the whole range. L = 60 m and D = 250 m are a chosen
calibration that puts most of the roadside increment within ~100-150 m of the road, where those
studies find most of the gradient; f(30 m) ≈ 0.60, f(100 m) ≈ 0.18, f(200 m) ≈ 0.02.

Class weights (a chosen calibration, standing for traffic volume): arterials and motorways 1,
collectors 0.5, local streets 0.15, paths 0.

How it is computed: every weighted edge is sampled at points at most 20 m apart along it, and
the samples of each weight go into a k-d tree over Earth-centred 3-D coordinates (straight-line
distances, within a millimetre of distances along the ground at these ranges; an edge is the
straight chord between its nodes, which sags below the ground by length² / 8R: 2 cm for a 1 km
edge). The nearest sample bounds the distance to the nearest road of that weight within half
the sample spacing, so the exact point-to-segment distance is then taken over the edges of the
samples within that bound. One point (`__call__`) costs some tens of microseconds in a city
centre; for many points at once `many` is several times cheaper per point.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
from scipy.spatial import cKDTree

from cleanair_core.geo import EARTH_RADIUS_M, Point
from cleanair_core.routes.network import RoadClass, StreetNetwork

FloatArray = npt.NDArray[np.float64]

#: Decay scale L of the near-road increment, metres (see the module documentation).
DECAY_M = 60.0
#: Reach D: farther than this from every weighted road the increment is 0, metres.
REACH_M = 250.0
#: Weight of each road class: how much traffic it stands for (a chosen calibration).
CLASS_WEIGHTS: dict[RoadClass, float] = {
    RoadClass.PATH: 0.0,
    RoadClass.LOCAL: 0.15,
    RoadClass.COLLECTOR: 0.5,
    RoadClass.ARTERIAL: 1.0,
    RoadClass.MOTORWAY: 1.0,
}
#: Batches up to this size take the scalar path in `many` (cheaper than vectorising them).
SCALAR_BATCH = 8
#: Largest distance between consecutive sample points along an edge, metres.
SAMPLE_SPACING_M = 20.0

_HALF_SPACING_M = SAMPLE_SPACING_M / 2.0 + 1e-6  # every point of an edge is this near a sample
_M_PER_DEG = EARTH_RADIUS_M * math.pi / 180.0
_FLOOR = math.exp(-REACH_M / DECAY_M)


def proximity(distance_m: FloatArray) -> FloatArray:
    """f(d): 1 on the road, decaying with scale DECAY_M to exactly 0 at REACH_M and beyond."""
    d = np.asarray(distance_m, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        shifted = (np.exp(-d / DECAY_M) - _FLOOR) / (1.0 - _FLOOR)
        value: FloatArray = np.where(d < REACH_M, np.clip(shifted, 0.0, 1.0), 0.0)
    return value


def _proximity_one(distance_m: float) -> float:
    """`proximity` of one distance."""
    if not distance_m < REACH_M:
        return 0.0
    return min(max((math.exp(-distance_m / DECAY_M) - _FLOOR) / (1.0 - _FLOOR), 0.0), 1.0)


def _distance_where(value: float) -> float:
    """The distance at which `proximity` falls to `value` (REACH_M for 0)."""
    if value <= 0.0:
        return REACH_M
    return min(-DECAY_M * math.log(value * (1.0 - _FLOOR) + _FLOOR), REACH_M)


def _to_xyz(lats: FloatArray, lons: FloatArray) -> FloatArray:
    """Earth-centred coordinates in metres on the core's sphere, one row per point."""
    phi, lam = np.radians(lats), np.radians(lons)
    cos_phi = np.cos(phi)
    xyz: FloatArray = (
        np.stack((cos_phi * np.cos(lam), cos_phi * np.sin(lam), np.sin(phi)), axis=-1)
        * EARTH_RADIUS_M
    )
    return xyz


class _RoadsOfOneWeight:
    """The edges of one weight: their end points and a k-d tree of points sampled along them."""

    def __init__(self, weight: float, start: FloatArray, end: FloatArray) -> None:
        self.weight = weight
        self.start = start  # (edges, 3)
        self.span = end - start  # (edges, 3)
        self.span_sq = np.maximum(np.einsum("ij,ij->i", self.span, self.span), 1e-12)
        pieces = np.maximum(np.ceil(np.sqrt(self.span_sq) / SAMPLE_SPACING_M), 1).astype(np.int64)
        # Samples at k / pieces of each edge for k = 0..pieces (both ends included).
        counts = pieces + 1
        self.sample_edge = np.repeat(np.arange(counts.size), counts)
        first_of_edge = np.cumsum(counts) - counts
        k = np.arange(self.sample_edge.size) - np.repeat(first_of_edge, counts)
        t = k / np.repeat(pieces, counts)
        samples = self.start[self.sample_edge] + t[:, None] * self.span[self.sample_edge]
        self.tree = cKDTree(samples)

    def distances(self, xyz: FloatArray) -> FloatArray:
        """The distance from each point to the nearest of these edges (inf beyond the reach)."""
        result = np.full(xyz.shape[0], np.inf)
        nearest, _ = self.tree.query(xyz, k=1, distance_upper_bound=REACH_M + _HALF_SPACING_M)
        near = np.flatnonzero(np.isfinite(nearest))
        if near.size == 0:
            return result
        # The nearest edge has a sample within (nearest sample distance + half the spacing).
        candidates = self.tree.query_ball_point(xyz[near], r=nearest[near] + _HALF_SPACING_M)
        counts = np.fromiter((len(c) for c in candidates), dtype=np.int64, count=near.size)
        which = np.repeat(near, counts)
        edges = self.sample_edge[np.concatenate(candidates).astype(np.int64)]
        offset = xyz[which] - self.start[edges]
        t = np.clip(np.einsum("ij,ij->i", offset, self.span[edges]) / self.span_sq[edges], 0, 1)
        gap = offset - t[:, None] * self.span[edges]
        exact = np.sqrt(np.einsum("ij,ij->i", gap, gap))
        np.minimum.at(result, which, exact)
        return result

    def distance_to(self, xyz: tuple[float, float, float], bound: float) -> float:
        """`distances` for one point, or inf when it is farther than `bound` from these edges."""
        nearest, _ = self.tree.query(xyz, k=1, distance_upper_bound=bound + _HALF_SPACING_M)
        if not math.isfinite(nearest):
            return math.inf
        x, y, z = xyz
        best = math.inf
        candidates = self.tree.query_ball_point(xyz, nearest + _HALF_SPACING_M)
        for edge in set(self.sample_edge[candidates].tolist()):
            sx, sy, sz = self.start[edge].tolist()
            vx, vy, vz = self.span[edge].tolist()
            ox, oy, oz = x - sx, y - sy, z - sz
            t = min(max((ox * vx + oy * vy + oz * vz) / float(self.span_sq[edge]), 0.0), 1.0)
            gx, gy, gz = ox - t * vx, oy - t * vy, oz - t * vz
            best = min(best, math.sqrt(gx * gx + gy * gy + gz * gz))
        return best


class NetworkNearRoad:
    """Proximity to heavy traffic (0..1) from the roads of one street network.

    A `NearRoadIncrement` for `EmbeddedModel`; `many` evaluates arrays of points at once.
    """

    def __init__(self, network: StreetNetwork) -> None:
        self.network = network
        weights = np.zeros(256, dtype=np.float64)
        for road_class, weight in CLASS_WEIGHTS.items():
            weights[road_class] = weight
        edge_weight = weights[network.edge_class]
        self._groups: list[_RoadsOfOneWeight] = []
        node_xyz = _to_xyz(network.node_lat, network.node_lon)
        for weight in sorted(set(edge_weight[edge_weight > 0].tolist()), reverse=True):
            edges = np.flatnonzero(edge_weight == weight)
            self._groups.append(
                _RoadsOfOneWeight(
                    weight, node_xyz[network.edge_from[edges]], node_xyz[network.edge_to[edges]]
                )
            )
        # A bounding box that holds every point within reach of a weighted road: points outside
        # it are 0 without a tree search.
        self._box: tuple[float, float, float, float] | None = None
        if self._groups:
            used = np.flatnonzero(edge_weight > 0)
            ends = np.concatenate((network.edge_from[used], network.edge_to[used]))
            lats, lons = network.node_lat[ends], network.node_lon[ends]
            margin = (REACH_M + _HALF_SPACING_M) / _M_PER_DEG * 1.01
            south, north = float(lats.min()) - margin, float(lats.max()) + margin
            west, east = -math.inf, math.inf  # near a pole or across the antimeridian
            if south > -89.0 and north < 89.0:
                lon_margin = margin / math.cos(math.radians(max(-south, north)))
                if (
                    float(lons.min()) - lon_margin > -180.0
                    and float(lons.max()) + lon_margin < 180.0
                ):
                    west, east = float(lons.min()) - lon_margin, float(lons.max()) + lon_margin
            self._box = (south, west, north, east)

    def _within_box(self, lats: FloatArray, lons: FloatArray) -> npt.NDArray[np.bool_]:
        if self._box is None:
            return np.zeros(lats.shape, dtype=np.bool_)
        south, west, north, east = self._box
        inside: npt.NDArray[np.bool_] = (
            (lats >= south) & (lats <= north) & (lons >= west) & (lons <= east)
        )
        return inside

    def __call__(self, point: Point) -> float:
        """Proximity to heavy traffic at `point`, 0..1."""
        if self._box is None:
            return 0.0
        south, west, north, east = self._box
        lat, lon = point.lat, point.lon
        if not (south <= lat <= north and west <= lon <= east):
            return 0.0
        phi, lam = math.radians(lat), math.radians(lon)
        cos_phi = math.cos(phi)
        xyz = (  # as `_to_xyz` computes them
            cos_phi * math.cos(lam) * EARTH_RADIUS_M,
            cos_phi * math.sin(lam) * EARTH_RADIUS_M,
            math.sin(phi) * EARTH_RADIUS_M,
        )
        best = 0.0
        for group in self._groups:  # heaviest first
            if group.weight <= best:
                break  # no road of this weight or lighter can beat `best`
            # Only roads nearer than where weight · f(d) falls to `best` can raise it.
            bound = _distance_where(best / group.weight) + 1e-6
            distance = group.distance_to(xyz, bound)
            if distance < REACH_M:
                best = max(best, group.weight * _proximity_one(distance))
        return best

    def many(self, lats: npt.ArrayLike, lons: npt.ArrayLike) -> FloatArray:
        """Proximity to heavy traffic at each point (`lats`, `lons` in degrees, same shape)."""
        lat = np.asarray(lats, dtype=np.float64)
        lon = np.asarray(lons, dtype=np.float64)
        if lat.shape != lon.shape:
            raise ValueError("lats and lons must have the same shape")
        result = np.zeros(lat.shape, dtype=np.float64)
        flat_lat, flat_lon = lat.reshape(-1), lon.reshape(-1)
        todo = np.flatnonzero(self._within_box(flat_lat, flat_lon))  # NaN is never inside
        if todo.size == 0:
            return result
        if todo.size <= SCALAR_BATCH:
            # A score asks for one point: the scalar search, which stops at the first weight
            # that cannot be beaten, is several times faster than the vectorised set-up.
            for index in todo.tolist():
                result.reshape(-1)[index] = self(Point(flat_lat[index], flat_lon[index]))
            return result
        xyz = _to_xyz(flat_lat[todo], flat_lon[todo])
        best = np.zeros(todo.size, dtype=np.float64)
        for group in self._groups:
            best = np.maximum(best, group.weight * proximity(group.distances(xyz)))
        result.reshape(-1)[todo] = best
        return result

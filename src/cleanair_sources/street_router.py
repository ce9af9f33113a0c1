"""The graph router: shortest paths on a street network with SciPy's sparse-graph Dijkstra.

Why SciPy (`scipy.sparse.csgraph.dijkstra`): per-search edge costs arrive as a NumPy array
(length x (1 + s x exposure) for every edge at once), and csgraph takes such an array as the
matrix data with no per-edge Python call. The benchmark in `bench/` compares it with NetworkX
on the same graph.

Per mode (foot for walking and running, bike for cycling) the router keeps the directed arcs
it may use (foot arcs both ways; bike arcs as the one-way rules allow), with parallel arcs
between one pair of nodes grouped so that each search keeps the cheapest of them (a sparse
matrix holds one value per pair).

Snapping only considers edges of the mode's largest strongly connected piece of network, where
every node reaches every other: OpenStreetMap extracts hold small islands (a courtyard path, a
station's inner walkways cut off at the extract's border), and one-way streets cut off by the
extract's border lead in but not out (or out but not in); a start or end snapped onto either
would have no route.

Points snap to edges through a grid of cells over the edges' pieces, all in flat arrays: the
router's arcs and snapping index can be laid out in a file every process of a machine maps
(`router_arrays`, `cleanair_storage.network_files`), where a k-d tree could not; a router
over a network carrying them (`StreetNetwork.derived`) builds nothing.

SciPy is imported where a search first needs it, not with the module: it takes half a second,
and a server loads its networks (building the routers) while it starts.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import attrs
import numpy as np
import numpy.typing as npt

from cleanair_core.geo import EARTH_RADIUS_M, Point, distances_m
from cleanair_core.routes.network import (
    Access,
    Corridor,
    FloatArray,
    Path,
    PlanActivityType,
    Router,
    Snap,
    StreetNetwork,
)

if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

#: Points are laid along every usable edge at most this far apart for snapping.
SNAP_SPACING_M = 10.0
#: The snapping index holds the midpoint of each piece of at most this length of an edge, not
#: its every point: a tenth of the points (and a tenth of the memory, for a million-node
#: network), the nearest point then computed on the few edges near.
SNAP_PIECE_M = 100.0
#: The side of a snapping cell, metres: a few pieces in each.
SNAP_CELL_M = 200.0
#: The version of `router_arrays`' layout: a change to it must change this.
DERIVATION = "router-1"
# Indices are typed int64 below; a mapped router keeps most of them as int32 (half the
# memory), which indexes and computes alike.
Int64Array = npt.NDArray[np.int64]


@attrs.frozen
class _Arcs:
    """The directed arcs of one activity, sorted by (from, to) pair and grouped."""

    edge: Int64Array  # the network edge of each arc
    pairs_from: Int64Array  # per group: from node
    pairs_to: Int64Array  # per group: to node
    starts: Int64Array  # per group: first arc
    keys: Int64Array  # per group: from * n + to, sorted
    first_group: Int64Array  # per node and one more: its first group (groups go by from node)

    def arrays(self, prefix: str) -> dict[str, npt.NDArray[Any]]:
        """Its arrays, named for a file; the indices as int32 where they fit."""
        return {
            prefix + field.name: _narrow(getattr(self, field.name))
            if field.name != "keys"
            else getattr(self, field.name)
            for field in attrs.fields(_Arcs)
        }

    @classmethod
    def of(cls, derived: Mapping[str, npt.NDArray[Any]], prefix: str) -> _Arcs:
        return cls(*(derived[prefix + field.name] for field in attrs.fields(_Arcs)))


@attrs.frozen
class _Snapper:
    """Where points snap to: the usable edges, each standing for its points SNAP_SPACING_M
    or less apart (both ends included), found through a grid of cells of SNAP_CELL_M over
    the midpoints of the edges' pieces of at most SNAP_PIECE_M."""

    piece_edge: Int64Array  # per piece, by cell: its edge's row below
    edge: Int64Array  # per row: the network edge
    start: FloatArray  # per row: its ends' local coordinates
    end: FloatArray
    steps: Int64Array  # per row: the spaces between its points
    reach: float  # the farthest any point of a piece lies from its midpoint, metres
    grid: FloatArray  # x and y of the grid's corner, its cell side, columns and rows
    cell_keys: Int64Array  # the cells holding pieces (row x columns + column), increasing
    cell_first: Int64Array  # per cell of cell_keys and one more: its first piece

    @classmethod
    def build(
        cls,
        middles: FloatArray,
        piece_edge: Int64Array,
        rows: tuple[Int64Array, FloatArray, FloatArray, Int64Array],
        reach: float,
    ) -> _Snapper:
        """The index of pieces with midpoints `middles`, each of row `piece_edge`."""
        corner = middles.min(axis=0)
        span = middles.max(axis=0) - corner
        columns = int(span[0] // SNAP_CELL_M) + 1
        grid = np.array(
            [corner[0], corner[1], SNAP_CELL_M, columns, int(span[1] // SNAP_CELL_M) + 1]
        )
        cells = _cells(middles, grid)
        order = np.argsort(cells, kind="stable")
        cells = cells[order]
        firsts = np.flatnonzero(np.r_[True, cells[1:] != cells[:-1]])
        edge, start, end, steps = rows
        return cls(
            _narrow(piece_edge[order]),
            _narrow(edge),
            start,
            end,
            _narrow(steps),
            reach,
            grid,
            cells[firsts],
            np.r_[firsts, len(cells)].astype(np.int64),
        )

    def arrays(self, prefix: str) -> dict[str, npt.NDArray[Any]]:
        """Its arrays, named for a file."""
        arrays = {
            prefix + field.name: getattr(self, field.name)
            for field in attrs.fields(_Snapper)
            if field.name != "reach"
        }
        arrays[prefix + "reach"] = np.array([self.reach])
        return arrays

    @classmethod
    def of(cls, derived: Mapping[str, npt.NDArray[Any]], prefix: str) -> _Snapper | None:
        if prefix + "edge" not in derived:
            return None
        fields = {
            field.name: derived[prefix + field.name]
            for field in attrs.fields(_Snapper)
            if field.name != "reach"
        }
        return cls(reach=float(derived[prefix + "reach"][0]), **fields)

    def pieces_near(self, here: FloatArray, radius: float) -> Int64Array:
        """The pieces of every cell within `radius` (in x and in y) of `here`: at least
        every piece whose midpoint is that near."""
        x0, y0, side, columns, rows = self.grid.tolist()
        c0 = max(int((here[0] - radius - x0) // side), 0)
        c1 = min(int((here[0] + radius - x0) // side), int(columns) - 1)
        r0 = max(int((here[1] - radius - y0) // side), 0)
        r1 = min(int((here[1] + radius - y0) // side), int(rows) - 1)
        if c0 > c1 or r0 > r1:
            return np.zeros(0, dtype=np.int64)
        # Each row of cells is one run of keys: one pair of searches a row.
        base = np.arange(r0, r1 + 1, dtype=np.int64) * int(columns)
        lo = np.searchsorted(self.cell_keys, base + c0)
        hi = np.searchsorted(self.cell_keys, base + c1, side="right")
        return _ranges(self.cell_first[lo], self.cell_first[hi])

    def covers(self, here: FloatArray, radius: float) -> bool:
        """Whether the square of `radius` around `here` holds every cell."""
        x0, y0, side, columns, rows = self.grid.tolist()
        return bool(
            here[0] - radius <= x0
            and here[1] - radius <= y0
            and here[0] + radius >= x0 + columns * side
            and here[1] + radius >= y0 + rows * side
        )

    def nearest_points(self, rows: Int64Array, here: FloatArray) -> FloatArray:
        """Per row, the distance from `here` to the nearest of its points: the one nearest
        to `here`'s projection on the edge (the points are evenly spaced along it)."""
        a, b = self.start[rows], self.end[rows]
        along = b - a
        squared = np.einsum("ij,ij->i", along, along)
        t = np.einsum("ij,ij->i", here - a, along) / np.where(squared > 0, squared, 1.0)
        steps = self.steps[rows]
        k = np.rint(np.clip(t, 0.0, 1.0) * steps)
        points = a + (k / steps)[:, None] * along
        distances: FloatArray = np.sqrt(np.einsum("ij,ij->i", here - points, here - points))
        return distances


def _cells(points: FloatArray, grid: FloatArray) -> Int64Array:
    x0, y0, side, columns, rows = grid.tolist()
    column = np.clip((points[:, 0] - x0) // side, 0, columns - 1).astype(np.int64)
    row = np.clip((points[:, 1] - y0) // side, 0, rows - 1).astype(np.int64)
    cells: Int64Array = row * int(columns) + column
    return cells


def _narrow(indices: Int64Array) -> Int64Array:
    """`indices` as int32 when they fit (they index and compute as int64 do)."""
    if indices.size and (int(indices.max()) > 2**31 - 1 or int(indices.min()) < -(2**31)):
        return indices
    narrow: Int64Array = indices.astype(np.int32)  # typed as the int64 it stands for
    return narrow


def _xy(lat: FloatArray, lon: FloatArray, lat0: float) -> FloatArray:
    """Local metric coordinates (equirectangular about `lat0`): fine at city scale."""
    scale = math.cos(math.radians(lat0))
    xy: FloatArray = np.column_stack(
        (np.radians(lon) * scale * EARTH_RADIUS_M, np.radians(lat) * EARTH_RADIUS_M)
    )
    return xy


class ScipyRouter(Router):
    """A `Router` over one network."""

    def __init__(self, network: StreetNetwork) -> None:
        self.network = network
        south, _, north, _ = network.bounds
        self._lat0 = (south + north) / 2
        foot, bike = PlanActivityType.WALKING, PlanActivityType.CYCLING
        self._mode = {activity: bike if activity is bike else foot for activity in PlanActivityType}
        derived = network.derived
        if "router.chord_ratio" in derived:
            # Mapped from the machine's network file: nothing to build.
            self._arcs = {mode: _Arcs.of(derived, f"router.{mode}.") for mode in (foot, bike)}
            self._snappers = {
                mode: _Snapper.of(derived, f"router.{mode}.snap.") for mode in (foot, bike)
            }
            self.chord_ratio = float(derived["router.chord_ratio"][0])
            self._by_lat = derived["router.by_lat"]
            self._lat_sorted = derived["router.lat_sorted"]
            return
        self._arcs = {mode: self._build_arcs(mode) for mode in (foot, bike)}
        self._snappers = {}
        chords = distances_m(
            network.node_lat[network.edge_from],
            network.node_lon[network.edge_from],
            network.node_lat[network.edge_to],
            network.node_lon[network.edge_to],
        )
        self.chord_ratio = float(max(1.0, float(np.max(chords / network.edge_length, initial=1.0))))
        # Nodes by latitude: `nodes_within` reads a band of it, not every node.
        self._by_lat = np.argsort(network.node_lat, kind="stable")
        self._lat_sorted = network.node_lat[self._by_lat]

    def _build_arcs(self, activity: PlanActivityType) -> _Arcs:
        net = self.network
        access = net.edge_access
        edges = np.arange(net.edge_count, dtype=np.int64)
        if activity is PlanActivityType.CYCLING:
            forward = (access & np.uint8(Access.BIKE_FORWARD)) != 0
            backward = (access & np.uint8(Access.BIKE_BACKWARD)) != 0
        else:
            forward = backward = (access & np.uint8(Access.FOOT)) != 0
        src = np.concatenate((net.edge_from[forward], net.edge_to[backward])).astype(np.int64)
        dst = np.concatenate((net.edge_to[forward], net.edge_from[backward])).astype(np.int64)
        edge = np.concatenate((edges[forward], edges[backward]))
        keys = src * net.node_count + dst
        order = np.argsort(keys, kind="stable")
        keys, edge, src, dst = keys[order], edge[order], src[order], dst[order]
        starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]]) if len(keys) else edges[:0]
        first_group = np.searchsorted(src[starts], np.arange(net.node_count + 1))
        return _Arcs(edge, src[starts], dst[starts], starts, keys[starts], first_group)

    def snap(self, point: Point, activity: PlanActivityType) -> Snap | None:
        snapper = self._snapper(activity)
        if snapper is None:
            return None
        here = _xy(np.array([point.lat]), np.array([point.lon]), self._lat0)[0]
        # The edge of the nearest piece bounds the answer; any nearer point's piece has its
        # midpoint within that bound plus a piece's reach.
        # Any point within d of `here` has its piece's midpoint within d + reach: once the
        # cells searched reach that far past the nearest found, it is the nearest of all.
        radius = SNAP_CELL_M
        while True:
            pieces = snapper.pieces_near(here, radius)
            if pieces.size:
                rows = np.unique(snapper.piece_edge[pieces])
                distances = snapper.nearest_points(rows, here)
                needed = float(distances.min()) + snapper.reach + 1e-6
                if needed <= radius or snapper.covers(here, radius):
                    break
                radius = needed
            else:
                radius *= 2
        best = int(np.argmin(distances))
        edge, distance = int(snapper.edge[int(rows[best])]), float(distances[best])
        net = self.network
        ends = (int(net.edge_from[edge]), int(net.edge_to[edge]))
        coords = _xy(net.node_lat[list(ends)], net.node_lon[list(ends)], self._lat0)
        nearer = ends[int(np.argmin(np.linalg.norm(coords - here, axis=1)))]
        return Snap(nearer, float(distance))

    def _snapper(self, activity: PlanActivityType) -> _Snapper | None:
        mode = self._mode[activity]
        if mode not in self._snappers:
            self._snappers[mode] = self._build_snapper(mode)
        return self._snappers[mode]

    def _main_piece(self, activity: PlanActivityType) -> npt.NDArray[np.bool_]:
        """Per node: is it in the largest strongly connected piece of the mode's network."""
        arcs = self._arcs[activity]
        n = self.network.node_count
        from scipy.sparse import csr_matrix
        from scipy.sparse.csgraph import connected_components

        ones = np.ones(len(arcs.pairs_from))
        graph = csr_matrix((ones, (arcs.pairs_from, arcs.pairs_to)), shape=(n, n))
        _, labels = connected_components(graph, directed=True, connection="strong")
        touched = np.zeros(n, dtype=bool)
        touched[arcs.pairs_from] = True
        if not touched.any():
            return touched
        largest = np.bincount(labels[touched]).argmax()
        main: npt.NDArray[np.bool_] = labels == largest
        return main

    def _build_snapper(self, activity: PlanActivityType) -> _Snapper | None:
        net = self.network
        main = self._main_piece(activity)
        usable = np.flatnonzero(net.usable(activity) & main[net.edge_from] & main[net.edge_to])
        if len(usable) == 0:
            return None
        a = _xy(
            net.node_lat[net.edge_from[usable]], net.node_lon[net.edge_from[usable]], self._lat0
        )
        b = _xy(net.node_lat[net.edge_to[usable]], net.node_lon[net.edge_to[usable]], self._lat0)
        steps = np.maximum(1, np.ceil(net.edge_length[usable] / SNAP_SPACING_M)).astype(np.int64)
        span = np.linalg.norm(b - a, axis=1)
        pieces = np.maximum(1, np.ceil(span / SNAP_PIECE_M)).astype(np.int64)
        owner = np.repeat(np.arange(len(usable)), pieces)
        offsets = np.arange(len(owner)) - np.repeat(np.cumsum(pieces) - pieces, pieces)
        t = ((offsets + 0.5) / np.repeat(pieces, pieces))[:, None]
        middles = a[owner] + t * (b[owner] - a[owner])
        reach = float(np.max(span / pieces)) / 2 if len(usable) else 0.0
        rows = (usable.astype(np.int64), a, b, steps)
        return _Snapper.build(middles, owner.astype(np.int64), rows, reach)

    def arrays(self) -> dict[str, npt.NDArray[Any]]:
        """What this router derived from its network, named for a file: a router over a
        network carrying them (`StreetNetwork.derived`) builds nothing."""
        arrays: dict[str, npt.NDArray[Any]] = {
            "router.chord_ratio": np.array([self.chord_ratio]),
            "router.by_lat": _narrow(self._by_lat),
            "router.lat_sorted": self._lat_sorted,
        }
        for mode, arcs in self._arcs.items():
            arrays.update(arcs.arrays(f"router.{mode}."))
            snapper = self._snapper(mode)
            if snapper is not None:
                arrays.update(snapper.arrays(f"router.{mode}.snap."))
        return arrays

    def nodes_within(self, point: Point, radius_m: float) -> npt.NDArray[np.intp]:
        net = self.network
        if not radius_m >= 0:
            return np.empty(0, dtype=np.intp)
        # Bounds a little wider than the sphere's: the exact distance decides.
        reach = math.degrees(radius_m / EARTH_RADIUS_M) * (1 + 1e-9) + 1e-9
        lo, hi = np.searchsorted(self._lat_sorted, [point.lat - reach, point.lat + reach + 1e-12])
        band = self._by_lat[lo:hi]
        top = min(abs(point.lat) + reach, 90.0)
        if top < 89.0 and reach < 45.0:
            # Along a parallel, a point `radius_m` away is at most this many degrees of
            # longitude off (on the band's poleward edge, where the degrees are shortest).
            wide = math.degrees(
                math.asin(min(1.0, math.sin(math.radians(reach)) / math.cos(math.radians(top))))
            )
            off = np.abs((net.node_lon[band] - point.lon + 180.0) % 360.0 - 180.0)
            band = band[off <= wide * (1 + 1e-9) + 1e-9]
        near = distances_m(point.lat, point.lon, net.node_lat[band], net.node_lon[band])
        found: npt.NDArray[np.intp] = np.sort(band[near <= radius_m]).astype(np.intp)
        return found

    def corridor(self, activity: PlanActivityType, nodes: npt.NDArray[np.intp]) -> _Corridor:
        return _Corridor(self.network, self._arcs[self._mode[activity]], nodes)

    def path(
        self,
        origin: int,
        destination: int,
        activity: PlanActivityType,
        costs: FloatArray,
        limit: float | None = None,
    ) -> Path | None:
        if origin == destination:
            return Path([origin], [])
        searched = self._search(origin, activity, costs, limit)
        if searched is None:
            return None
        distances, predecessors, arcs, arc_costs = searched
        if predecessors[destination] < 0 or not np.isfinite(distances[destination]):
            return None
        nodes = [destination]
        while nodes[-1] != origin:
            nodes.append(int(predecessors[nodes[-1]]))
        nodes.reverse()
        return Path(nodes, self._edges_along(nodes, arcs, arc_costs))

    def lengths_from(self, origin: int, activity: PlanActivityType, limit: float) -> FloatArray:
        searched = self._search(origin, activity, self.network.edge_length, limit)
        if searched is None:
            lengths = np.full(self.network.node_count, np.inf)
            lengths[origin] = 0.0
            return lengths
        return searched[0]

    def _search(
        self, origin: int, activity: PlanActivityType, costs: FloatArray, limit: float | None
    ) -> tuple[FloatArray, Int64Array, _Arcs, FloatArray] | None:
        """Dijkstra from `origin`: each node's least cost (inf beyond `limit`), its
        predecessor (< 0 for none), and the arcs and their costs searched; None without arcs."""
        arcs = self._arcs[self._mode[activity]]
        if len(arcs.edge) == 0:
            return None
        arc_costs = np.asarray(costs, dtype=np.float64)[arcs.edge]
        cheapest = np.minimum.reduceat(arc_costs, arcs.starts)
        finite = np.isfinite(cheapest)
        n = self.network.node_count
        from scipy.sparse import csr_matrix
        from scipy.sparse.csgraph import dijkstra

        graph = csr_matrix(
            (cheapest[finite], (arcs.pairs_from[finite], arcs.pairs_to[finite])), shape=(n, n)
        )
        # `limit` stops the search once every node cheaper than it is settled: the cost of a
        # known path bounds the search to the part of the graph that could beat it.
        distances, predecessors = dijkstra(
            graph,
            directed=True,
            indices=origin,
            return_predecessors=True,
            limit=np.inf if limit is None else limit,
        )
        return distances, predecessors, arcs, arc_costs

    def _edges_along(self, nodes: Sequence[int], arcs: _Arcs, arc_costs: FloatArray) -> list[int]:
        n = self.network.node_count
        keys = np.array(nodes[:-1], dtype=np.int64) * n + np.array(nodes[1:], dtype=np.int64)
        groups = np.searchsorted(arcs.keys, keys)
        ends = np.r_[arcs.starts[1:], len(arcs.edge)]
        edges = []
        for group in groups:
            first, last = int(arcs.starts[group]), int(ends[group])
            best = first + int(np.argmin(arc_costs[first:last]))
            edges.append(int(arcs.edge[best]))
        return edges


def _ranges(first: Int64Array, last: Int64Array) -> Int64Array:
    """The integers of [first[i], last[i]) for every i, concatenated."""
    sizes = last - first
    total = int(sizes.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    offsets = np.cumsum(sizes) - sizes
    ranges: Int64Array = np.arange(total, dtype=np.int64) + np.repeat(first - offsets, sizes)
    return ranges


class _Corridor(Corridor):
    """The arcs of one activity between a set of nodes, as a compact sparse graph: nodes
    renumbered in their order (so each search sees them as the router would), its groups
    of parallel arcs kept. Each search fills in the costs of those arcs only."""

    def __init__(self, network: StreetNetwork, arcs: _Arcs, nodes: npt.NDArray[np.intp]) -> None:
        self._node_count = network.node_count
        self._lengths = network.edge_length
        given = np.asarray(nodes, dtype=np.int64)
        # Planners pass sorted sets already: sorting 100,000 nodes again costs 30 ms.
        increasing = given.size < 2 or bool(np.all(given[1:] > given[:-1]))
        self._nodes = given if increasing else np.unique(given)
        k = self._nodes.size
        # Each node's rank, in a table from the corridor's first node to its last: a table
        # over every node of the network was 8 MB a corridor on a million nodes, 40 MB on
        # five million, several corridors a plan; a corridor's nodes span a few per cent of
        # a city's numbering when nodes near each other are numbered near each other.
        self._first = int(self._nodes[0]) if k else 0
        span = int(self._nodes[-1]) - self._first + 1 if k else 0
        self._rank = np.full(span, -1, dtype=np.int32)
        self._rank[self._nodes - self._first] = np.arange(k, dtype=np.int32)
        # The groups leaving the nodes (consecutive per node, so each group's row is its
        # node's rank), then those ending inside too (their column: the end's rank).
        leaving = arcs.first_group[self._nodes], arcs.first_group[self._nodes + 1]
        groups = _ranges(*leaving)
        rows = np.repeat(np.arange(k, dtype=np.int64), leaving[1] - leaving[0])
        columns = self._local(arcs.pairs_to[groups])
        inside = columns >= 0
        groups, rows, self._columns = groups[inside], rows[inside], columns[inside]
        # Each group's arcs end where the next group's begin (the last group's, at the end):
        # read for these groups alone, not made for every group of the network.
        first = arcs.starts[groups]
        following = groups + 1
        last = np.full(groups.size, len(arcs.edge), dtype=np.int64)
        inner = following < len(arcs.starts)
        last[inner] = arcs.starts[following[inner]]
        self._edge = arcs.edge[_ranges(first, last)]
        # Each arc's edge among the corridor's own (`edges`), for costs given for those alone.
        unique, self._position = np.unique(self._edge, return_inverse=True)
        self._edges: npt.NDArray[np.intp] = unique.astype(np.intp, copy=False)
        sizes = last - first
        self._starts = np.cumsum(sizes) - sizes
        self._keys = rows * k + self._columns  # increasing, as the router's keys
        self._indptr = np.searchsorted(rows, np.arange(k + 1))

    def _local(self, nodes: npt.NDArray[Any]) -> Int64Array:
        """Each node's number in the corridor (its rank among the corridor's nodes), -1 for a
        node outside it."""
        at = nodes - self._first
        inside = (at >= 0) & (at < self._rank.size)
        local: Int64Array = np.full(nodes.shape, -1, dtype=np.int64)
        local[inside] = self._rank[at[inside]]
        return local

    def _local_of(self, node: int) -> int:
        return int(self._local(np.array([node], dtype=np.int64))[0])

    @property
    def edges(self) -> npt.NDArray[np.intp]:
        return self._edges

    def path(
        self, origin: int, destination: int, costs: FloatArray, limit: float | None = None
    ) -> Path | None:
        return self._path(origin, destination, costs, self._edge, limit)

    def path_on_edges(
        self, origin: int, destination: int, costs: FloatArray, limit: float | None = None
    ) -> Path | None:
        return self._path(origin, destination, costs, self._position, limit)

    def _path(
        self,
        origin: int,
        destination: int,
        costs: FloatArray,
        of_arcs: npt.NDArray[Any],
        limit: float | None,
    ) -> Path | None:
        """The cheapest path for `costs`, each arc's being `costs[of_arcs]`."""
        start, end = self._local_of(origin), self._local_of(destination)
        if start < 0 or end < 0:
            return None
        if origin == destination:
            return Path([origin], [])
        searched = self._search(start, costs, of_arcs, limit)
        if searched is None:
            return None
        distances, predecessors, arc_costs = searched
        if predecessors[end] < 0 or not np.isfinite(distances[end]):
            return None
        steps = [end]
        while steps[-1] != start:
            steps.append(int(predecessors[steps[-1]]))
        steps.reverse()
        along = np.asarray(steps, dtype=np.int64)
        groups = np.searchsorted(self._keys, along[:-1] * self._nodes.size + along[1:])
        ends = np.r_[self._starts[1:], len(self._edge)]
        edges = []
        for group in groups.tolist():
            first, last = int(self._starts[group]), int(ends[group])
            edges.append(int(self._edge[first + int(np.argmin(arc_costs[first:last]))]))
        return Path(self._nodes[along].tolist(), edges)

    def lengths_from(self, origin: int, limit: float) -> FloatArray:
        lengths = np.full(self._node_count, np.inf)
        start = self._local_of(origin)
        if start < 0:
            return lengths
        lengths[origin] = 0.0
        searched = self._search(start, self._lengths, self._edge, limit)
        if searched is not None:
            lengths[self._nodes] = searched[0]
        return lengths

    def _search(
        self, origin: int, costs: FloatArray, of_arcs: npt.NDArray[Any], limit: float | None
    ) -> tuple[FloatArray, npt.NDArray[np.int32], FloatArray] | None:
        if len(self._edge) == 0:
            return None
        arc_costs = np.asarray(costs, dtype=np.float64)[of_arcs]
        cheapest = np.minimum.reduceat(arc_costs, self._starts)
        k = self._nodes.size
        from scipy.sparse import csr_matrix
        from scipy.sparse.csgraph import dijkstra

        # Built from its parts, no sorting: an arc of infinite cost is never relaxed.
        graph = csr_matrix((cheapest, self._columns, self._indptr), shape=(k, k))
        distances, predecessors = dijkstra(
            graph,
            directed=True,
            indices=origin,
            return_predecessors=True,
            limit=np.inf if limit is None else limit,
        )
        return distances, predecessors, arc_costs


def router_arrays(network: StreetNetwork) -> dict[str, npt.NDArray[Any]]:
    """The arrays a router derives from `network` (`ScipyRouter.arrays`), built now."""
    return ScipyRouter(attrs.evolve(network, derived={})).arrays()


class LoadedNetworks:
    """The `StreetNetworks` port over routers built in this process."""

    def __init__(self, networks: Sequence[StreetNetwork] = ()) -> None:
        self._routers: list[ScipyRouter] = []
        self.replace(networks)

    def replace(self, networks: Sequence[StreetNetwork]) -> None:
        routers = [ScipyRouter(network) for network in networks if network.edge_count > 0]
        routers.sort(key=lambda r: _area(r.network))  # the most detailed fit first
        self._routers = routers

    @property
    def names(self) -> list[str]:
        return [router.network.name for router in self._routers]

    @property
    def loaded(self) -> list[StreetNetwork]:
        return [router.network for router in self._routers]

    def covering(self, points: Sequence[Point]) -> ScipyRouter | None:
        for router in self._routers:
            if all(router.network.covers(point) for point in points):
                return router
        return None


def _area(network: StreetNetwork) -> float:
    south, west, north, east = network.bounds
    return (north - south) * (east - west)

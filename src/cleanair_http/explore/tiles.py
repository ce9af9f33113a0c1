"""Street network tiles for the route explorer: the edges of one web-map tile, gzipped.

A network of a million nodes is tens of megabytes as one answer; a tile is the part a map
shows, at most `MAX_TILE_EDGES` edges. Tiles are the usual web-map (XYZ, Web Mercator)
squares: `z` from 0 to `MAX_ZOOM`, `x` and `y` from 0 to 2**z - 1, `y` counted from the north.

Coordinates are whole `UNIT` steps (1e-5 degrees, about 1 m) from the network's south-west
corner, and a tile's rectangle is its square widened to whole steps. A tile holds exactly the
edges whose segment between its rounded end points meets that rectangle (its border
included), an edge crossing the border whole in every tile it meets; all in integers, so
there is no rounding to disagree about. When more edges than `MAX_TILE_EDGES` meet a tile,
the lowest road classes are left out, as many as it takes, and named in `omitted`: a city at
low zoom shows its main roads, or only its outline. Water and green space come as whole
rings, those whose bounding box meets the rectangle.

All of it is NumPy over arrays made once per network (`TileIndex`), so building a tile in a
worker thread leaves the event loop's interpreter lock mostly free.
"""

from __future__ import annotations

import gzip
import hashlib
import math
from collections.abc import Sequence

import attrs
import msgspec
import numpy as np
import numpy.typing as npt

from cleanair_core.routes.network import AreaKind, RoadClass, StreetNetwork

#: Degrees per coordinate step: 1e-5 degrees is at most 1.1 m.
UNIT = 1e-5
#: Road class names, lowest traffic first (RoadClass order).
ROAD_CLASSES = tuple(road_class.name.lower() for road_class in RoadClass)
#: The finest tiles: about 60 m across at 60° N, finer than a person zooms a city map.
MAX_ZOOM = 19
#: The most edges one tile carries: about 200 kB of JSON, 60 kB gzipped, drawn at once.
MAX_TILE_EDGES = 20_000
#: Web Mercator's edge of the world, in degrees of latitude.
MAX_LATITUDE = math.degrees(math.atan(math.sinh(math.pi)))
#: The side, in steps (about 1 km), of the cells edges are filed under: a tile looks only at
#: the edges of the cells it meets, not at every edge of the network.
CELL = 1024
#: gzip's level for tiles: made once and cached, so a little more CPU for fewer bytes.
GZIP_LEVEL = 6

IntArray = npt.NDArray[np.int64]
#: Steps as stored: a degree of latitude is 100,000 steps, so the whole Earth fits in int32.
StepArray = npt.NDArray[np.int32]


def tile_bounds(z: int, x: int, y: int) -> tuple[float, float, float, float]:
    """The tile's south, west, north, east in degrees (Web Mercator XYZ)."""
    n = 2**z

    def latitude(row: int) -> float:
        return math.degrees(math.atan(math.sinh(math.pi * (1 - 2 * row / n))))

    return latitude(y + 1), x / n * 360 - 180, latitude(y), (x + 1) / n * 360 - 180


def is_tile(z: int, x: int, y: int) -> bool:
    """Whether (z, x, y) names a tile of the scheme at all."""
    return 0 <= z <= MAX_ZOOM and 0 <= x < 2**z and 0 <= y < 2**z


@attrs.frozen(eq=False)
class StepRect:
    """A closed rectangle in whole steps from a network's origin."""

    south: int
    west: int
    north: int
    east: int


@attrs.frozen(eq=False)
class TileIndex:
    """What a network's tiles are cut from, made once per loaded network (`index_network`)."""

    network: StreetNetwork
    #: A hash of everything a tile shows: tiles of another version are other tiles.
    version: str
    origin: tuple[float, float]
    node_lat: StepArray
    node_lon: StepArray
    #: Per edge, its end points' steps.
    a_lat: StepArray
    a_lon: StepArray
    b_lat: StepArray
    b_lon: StepArray
    #: Water and park rings in steps (each point distinct from the one before), their kinds
    #: and bounding boxes.
    rings: tuple[IntArray, ...]
    ring_kind: npt.NDArray[np.uint8]
    ring_box: IntArray  # per ring: south, west, north, east
    #: `cell` steps square cells: every edge no longer or wider than a cell is filed under
    #: the cell of its box's south-west corner (`cell_key`, increasing, with `cell_edges` in
    #: the same order); the longer ones are in `long_edges`, looked at by every tile.
    cell: int
    cell_columns: int
    cell_rows: int
    cell_key: IntArray
    cell_edges: IntArray
    long_edges: IntArray

    def rect(self, z: int, x: int, y: int) -> StepRect:
        """The tile's rectangle, widened to whole steps."""
        south, west, north, east = tile_bounds(z, x, y)
        lat0, lon0 = self.origin
        return StepRect(
            math.floor((south - lat0) / UNIT),
            math.floor((west - lon0) / UNIT),
            math.ceil((north - lat0) / UNIT),
            math.ceil((east - lon0) / UNIT),
        )

    def covers(self, z: int, x: int, y: int) -> bool:
        """Whether the tile meets the network's bounds (the tiles worth asking for)."""
        south, west, north, east = self.network.bounds
        t_south, t_west, t_north, t_east = tile_bounds(z, x, y)
        return t_south <= north and t_north >= south and t_west <= east and t_east >= west


def _version(network: StreetNetwork) -> str:
    digest = hashlib.sha256(network.name.encode())
    arrays = [network.node_lat, network.node_lon, network.edge_from, network.edge_to]
    arrays.append(network.edge_class)
    if network.edge_name is not None:
        arrays.append(network.edge_name)
    if network.areas is not None:
        areas = network.areas
        arrays += [areas.kind, areas.ring_end, areas.lat, areas.lon]
    for array in arrays:
        digest.update(np.ascontiguousarray(array).data)
    digest.update("\n".join(network.street_names).encode())
    return digest.hexdigest()[:24]


def index_network(network: StreetNetwork, cell: int = CELL) -> TileIndex:
    """The network's `TileIndex`: CPU work (half a second for a million nodes), for a
    thread. `cell`: see `TileIndex.cell`."""
    south, west, _, _ = network.bounds
    lat = np.rint((network.node_lat - south) / UNIT).astype(np.int32)
    lon = np.rint((network.node_lon - west) / UNIT).astype(np.int32)
    rings: list[IntArray] = []
    kinds: list[int] = []
    if network.areas is not None:
        for kind, ring_lat, ring_lon in network.areas.rings():
            steps = np.stack(
                [np.rint((ring_lat - south) / UNIT), np.rint((ring_lon - west) / UNIT)], axis=1
            ).astype(np.int64)
            # Rounding can put neighbours on one step: each point drawn once.
            distinct = np.any(steps != np.roll(steps, 1, axis=0), axis=1)
            if int(distinct.sum()) >= 3:
                rings.append(steps[distinct])
                kinds.append(int(kind))
    boxes = np.array(
        [[r[:, 0].min(), r[:, 1].min(), r[:, 0].max(), r[:, 1].max()] for r in rings],
        dtype=np.int64,
    ).reshape(-1, 4)
    a_lat, a_lon = lat[network.edge_from], lon[network.edge_from]
    b_lat, b_lon = lat[network.edge_to], lon[network.edge_to]
    low_lat, low_lon = np.minimum(a_lat, b_lat), np.minimum(a_lon, b_lon)
    long = (np.maximum(a_lat, b_lat) - low_lat > cell) | (np.maximum(a_lon, b_lon) - low_lon > cell)
    # Steps count from the network's south-west corner: none is negative.
    rows = int(lat.max(initial=0)) // cell + 1
    columns = int(lon.max(initial=0)) // cell + 1
    key = (low_lat // cell).astype(np.int64) * columns + low_lon // cell
    filed = np.flatnonzero(~long)
    order = filed[np.argsort(key[filed], kind="stable")]
    return TileIndex(
        network=network,
        version=_version(network),
        origin=(south, west),
        node_lat=lat,
        node_lon=lon,
        a_lat=a_lat,
        a_lon=a_lon,
        b_lat=b_lat,
        b_lon=b_lon,
        rings=tuple(rings),
        ring_kind=np.array(kinds, dtype=np.uint8),
        ring_box=boxes,
        cell=cell,
        cell_columns=columns,
        cell_rows=rows,
        cell_key=key[order],
        cell_edges=order.astype(np.int64),
        long_edges=np.flatnonzero(long).astype(np.int64),
    )


def _candidates(index: TileIndex, rect: StepRect) -> IntArray:
    """The edges that may meet `rect`, in edge order: those filed under the cells it meets,
    and the cells one south and one west (an edge filed there reaches at most a cell on),
    and the long ones."""
    cell = index.cell
    first_row = max(0, rect.south // cell - 1)
    last_row = min(index.cell_rows - 1, rect.north // cell)
    first_column = max(0, rect.west // cell - 1)
    last_column = min(index.cell_columns - 1, rect.east // cell)
    parts = [index.long_edges]
    if first_row <= last_row and first_column <= last_column:
        rows = np.arange(first_row, last_row + 1, dtype=np.int64) * index.cell_columns
        starts = np.searchsorted(index.cell_key, rows + first_column)
        stops = np.searchsorted(index.cell_key, rows + last_column, side="right")
        parts += [
            index.cell_edges[a:b] for a, b in zip(starts.tolist(), stops.tolist(), strict=True)
        ]
    found: IntArray = np.sort(np.concatenate(parts))
    return found


def edges_meeting(index: TileIndex, rect: StepRect) -> IntArray:
    """The edges whose segment meets `rect` (border included), in edge order."""
    candidates = _candidates(index, rect)
    a_lat, a_lon = index.a_lat[candidates], index.a_lon[candidates]
    b_lat, b_lon = index.b_lat[candidates], index.b_lon[candidates]
    # The bounding boxes first: cheap, and it leaves few to test exactly.
    near = (
        (np.minimum(a_lat, b_lat) <= rect.north)
        & (np.maximum(a_lat, b_lat) >= rect.south)
        & (np.minimum(a_lon, b_lon) <= rect.east)
        & (np.maximum(a_lon, b_lon) >= rect.west)
    )
    found = np.flatnonzero(near)
    # Then the segment's own line: it misses the rectangle when all four corners lie
    # strictly on one side of it (with the boxes overlapping, that is the only way to miss).
    # In int64: the cross products of int32 steps need it, and stay exact.
    start_lat = a_lat[found].astype(np.int64)
    start_lon = a_lon[found].astype(np.int64)
    d_lat = b_lat[found] - start_lat
    d_lon = b_lon[found] - start_lon
    above = np.zeros(found.size, dtype=bool)
    below = np.zeros(found.size, dtype=bool)
    for corner_lat, corner_lon in (
        (rect.south, rect.west),
        (rect.south, rect.east),
        (rect.north, rect.west),
        (rect.north, rect.east),
    ):
        side = d_lon * (corner_lat - start_lat) - d_lat * (corner_lon - start_lon)
        above |= side >= 0
        below |= side <= 0
    result: IntArray = candidates[found[above & below]]
    return result


def shown_classes(counts: Sequence[int]) -> list[int]:
    """The road classes a tile shows, given how many of its edges each class has: the
    highest classes, as many as fit together in `MAX_TILE_EDGES`."""
    shown: list[int] = []
    total = 0
    for road_class in reversed(range(len(counts))):
        total += counts[road_class]
        if total > MAX_TILE_EDGES:
            break
        shown.append(road_class)
    return sorted(shown)


class Tile(msgspec.Struct):
    #: south, west in degrees: the point every step counts from (the tile's south-west
    #: corner, widened to whole steps).
    origin: tuple[float, float]
    unit: float
    #: The end points of the tile's edges: flat [lat0, lon0, lat1, lon1, ...] in steps.
    nodes: list[int]
    #: Road class name -> the class's edges, flat [from0, to0, from1, to1, ...] indices of
    #: points in `nodes`.
    roads: dict[str, list[int]]
    #: The street names the edges carry.
    names: list[str]
    #: Road class name -> per edge of `roads`, its index in `names` (-1: unnamed); empty for
    #: a network stored without names.
    road_names: dict[str, list[int]]
    #: Water outlines meeting the tile, each a flat ring [lat0, lon0, ...] in steps, unclosed.
    water: list[list[int]]
    #: Parks and other green space, as `water`.
    parks: list[list[int]]
    #: Road classes that met the tile but were left out: more than `MAX_TILE_EDGES` edges.
    omitted: list[str]


def build_tile(index: TileIndex, z: int, x: int, y: int) -> Tile:
    """The tile (z, x, y) of the network."""
    network = index.network
    rect = index.rect(z, x, y)
    edges = edges_meeting(index, rect)
    classes = network.edge_class[edges]
    counts = np.bincount(classes, minlength=len(ROAD_CLASSES)).tolist()
    shown = shown_classes(counts)
    omitted = [ROAD_CLASSES[c] for c in range(len(counts)) if counts[c] and c not in shown]
    kept = edges[np.isin(classes, shown)]
    # Stable: each class's edges stay in edge order (a street's edges mostly follow).
    kept = kept[np.argsort(network.edge_class[kept], kind="stable")]
    ends = np.concatenate([network.edge_from[kept], network.edge_to[kept]])
    nodes, at = np.unique(ends, return_inverse=True)
    pairs = np.stack([at[: kept.size], at[kept.size :]], axis=1)
    corner = np.array([rect.south, rect.west], dtype=np.int64)
    points = np.stack([index.node_lat[nodes], index.node_lon[nodes]], axis=1) - corner
    kept_classes = network.edge_class[kept]
    starts = np.searchsorted(kept_classes, shown)
    stops = np.searchsorted(kept_classes, shown, side="right")
    roads: dict[str, list[int]] = {}
    road_names: dict[str, list[int]] = {}
    names: list[str] = []
    if network.edge_name is None:
        local_names = np.full(kept.size, -1, dtype=np.int64)
    else:
        named = network.edge_name[kept]
        used, renumbered = np.unique(named, return_inverse=True)
        # -1 (unnamed) sorts first when present; the names keep their order.
        unnamed = used.size > 0 and used[0] == -1
        local_names = renumbered - (1 if unnamed else 0)
        names = [network.street_names[i] for i in used.tolist() if i >= 0]
    for road_class, start, stop in zip(shown, starts.tolist(), stops.tolist(), strict=True):
        if start == stop:
            continue
        roads[ROAD_CLASSES[road_class]] = pairs[start:stop].reshape(-1).tolist()
        if network.edge_name is not None:
            road_names[ROAD_CLASSES[road_class]] = local_names[start:stop].tolist()
    rings: dict[AreaKind, list[list[int]]] = {AreaKind.WATER: [], AreaKind.PARK: []}
    if index.rings:
        box = index.ring_box
        meets = (
            (box[:, 0] <= rect.north)
            & (box[:, 2] >= rect.south)
            & (box[:, 1] <= rect.east)
            & (box[:, 3] >= rect.west)
        )
        for ring in np.flatnonzero(meets).tolist():
            steps = (index.rings[ring] - corner).reshape(-1).tolist()
            rings[AreaKind(int(index.ring_kind[ring]))].append(steps)
    lat0, lon0 = index.origin
    return Tile(
        origin=(lat0 + rect.south * UNIT, lon0 + rect.west * UNIT),
        unit=UNIT,
        nodes=points.reshape(-1).tolist(),
        roads=roads,
        names=names,
        road_names=road_names,
        water=rings[AreaKind.WATER],
        parks=rings[AreaKind.PARK],
        omitted=omitted,
    )


@attrs.frozen
class EncodedTile:
    gzipped: bytes
    #: Weak (`W/"..."`), as every explorer answer's: the gzipped and the unpacked body carry
    #: the same tag, and a strong one must differ between them (RFC 9110, 8.8.3).
    etag: str


def encode_tile(index: TileIndex, z: int, x: int, y: int) -> EncodedTile:
    """The tile's JSON, gzipped, and its ETag: CPU work for a thread."""
    body = msgspec.json.encode(build_tile(index, z, x, y))
    # mtime 0: the same tile is the same bytes, whenever it is made.
    gzipped = gzip.compress(body, compresslevel=GZIP_LEVEL, mtime=0)
    return EncodedTile(gzipped, f'W/"{index.version}-{z}-{x}-{y}"')

"""The street networks' geometry as the route explorer draws it: compact JSON, made once.

Edges are joined into polylines through nodes where exactly two edges of the same road class
and street name meet (most of a street's nodes only shape its curve), which roughly halves
the points sent; each polyline carries its street's name, when the network kept names. The
water and green space around the streets (`StreetNetwork.areas`) come as rings, drawn under
them.
Coordinates are whole multiples of `UNIT` degrees (about 1 m) counted from the network's
south-west corner: short integers instead of long decimals, so the shipped Helsinki network
is about a hundred kilobytes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import msgspec
import numpy as np

from cleanair_core.routes.network import AreaKind, RoadClass, StreetNetwork

#: Degrees per coordinate step: 1e-5 degrees is at most 1.1 m.
UNIT = 1e-5
#: Road class names, lowest traffic first: the keys of a network's `roads`.
ROAD_CLASSES = tuple(road_class.name.lower() for road_class in RoadClass)


class NetworkGeometry(msgspec.Struct):
    name: str
    #: south, west, north, east in degrees.
    bounds: tuple[float, float, float, float]
    #: south, west in degrees: the point every polyline's steps count from.
    origin: tuple[float, float]
    unit: float
    #: Road class name -> polylines, each flat: [lat0, lon0, lat1, lon1, ...] in `unit` steps.
    roads: dict[str, list[list[int]]]
    #: The street names the polylines carry.
    names: list[str]
    #: Road class name -> per polyline of `roads`, its index in `names` (-1: unnamed).
    road_names: dict[str, list[int]]
    #: Water outlines, each a flat ring [lat0, lon0, lat1, lon1, ...] in `unit` steps
    #: (unclosed: the last point joins the first); none for a network stored without areas.
    water: list[list[int]]
    #: Parks and other green space, as `water`.
    parks: list[list[int]]


class Geometry(msgspec.Struct):
    networks: list[NetworkGeometry]


def polylines(network: StreetNetwork) -> list[tuple[int, int, list[int]]]:
    """The network's edges joined into (road class, name index, node indices) polylines;
    every edge lies in exactly one polyline, as one step between consecutive nodes, and a
    polyline's edges share their class and name (-1: unnamed)."""
    edge_count = network.edge_count
    ends = np.stack([network.edge_from, network.edge_to], axis=1).tolist()
    # Class and name together: a polyline runs on only where both stay the same.
    kinds = network.edge_class.astype(np.int64).tolist()
    names = [-1] * edge_count if network.edge_name is None else network.edge_name.tolist()
    classes = list(zip(kinds, names, strict=True))
    incident: list[list[int]] = [[] for _ in range(network.node_count)]
    for edge, (start, end) in enumerate(ends):
        incident[start].append(edge)
        incident[end].append(edge)
    used = [False] * edge_count

    def onward(node: int, edge: int) -> int | None:
        """The edge a polyline arriving at `node` along `edge` continues on, if any."""
        here = incident[node]
        if len(here) != 2:
            return None
        following = here[1] if here[0] == edge else here[0]
        if used[following] or classes[following] != classes[edge]:
            return None
        return following

    def extend(node: int, edge: int) -> list[int]:
        """The nodes beyond `node`, walking away from it along `edge`'s neighbours."""
        nodes = []
        while (following := onward(node, edge)) is not None:
            used[following] = True
            start, end = ends[following]
            node = end if start == node else start
            nodes.append(node)
            edge = following
        return nodes

    lines = []
    for edge in range(edge_count):
        if used[edge]:
            continue
        used[edge] = True
        start, end = ends[edge]
        forward = extend(end, edge)
        backward = extend(start, edge)
        road_class, name = classes[edge]
        lines.append((road_class, name, [*reversed(backward), start, end, *forward]))
    return lines


def network_geometry(network: StreetNetwork) -> NetworkGeometry:
    south, west, north, east = network.bounds
    lat_steps = np.rint((network.node_lat - south) / UNIT).astype(np.int64).tolist()
    lon_steps = np.rint((network.node_lon - west) / UNIT).astype(np.int64).tolist()
    roads: dict[str, list[list[int]]] = {}
    road_names: dict[str, list[int]] = {}
    for road_class, name, nodes in polylines(network):
        flat: list[int] = []
        for node in nodes:
            flat += (lat_steps[node], lon_steps[node])
        roads.setdefault(ROAD_CLASSES[road_class], []).append(flat)
        road_names.setdefault(ROAD_CLASSES[road_class], []).append(name)
    rings: dict[AreaKind, list[list[int]]] = {AreaKind.WATER: [], AreaKind.PARK: []}
    if network.areas is not None:
        for kind, lat, lon in network.areas.rings():
            steps = np.stack(
                [np.rint((lat - south) / UNIT), np.rint((lon - west) / UNIT)], axis=1
            ).astype(np.int64)
            # Rounding can put neighbours on one step: each point drawn once.
            distinct = np.any(steps != np.roll(steps, 1, axis=0), axis=1)
            if int(distinct.sum()) >= 3:
                rings[kind].append(steps[distinct].reshape(-1).tolist())
    return NetworkGeometry(
        name=network.name,
        bounds=(south, west, north, east),
        origin=(south, west),
        unit=UNIT,
        roads={name: roads[name] for name in ROAD_CLASSES if name in roads},
        names=list(network.street_names),
        road_names={name: road_names[name] for name in ROAD_CLASSES if name in road_names},
        water=rings[AreaKind.WATER],
        parks=rings[AreaKind.PARK],
    )


class EncodedGeometry(msgspec.Struct, frozen=True):
    body: bytes
    #: A weak validator of `body` (`W/"..."`, as the header carries it): the app compresses
    #: the body on the way out, so the gzipped and plain answers carry the same tag, and a
    #: strong tag must differ between them (RFC 9110, 8.8.3).
    etag: str


def encode_geometry(networks: Sequence[StreetNetwork]) -> EncodedGeometry:
    """The JSON body of `GET /explore/networks` and its ETag: CPU work for a thread."""
    body = msgspec.json.encode(Geometry([network_geometry(n) for n in networks]))
    return EncodedGeometry(body, f'W/"{hashlib.sha256(body).hexdigest()[:32]}"')

"""Hand-made street networks for planner and router tests."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from cleanair_core.geo import Point, distance_m
from cleanair_core.routes.network import Access, RoadClass, StreetNetwork

ORIGIN = Point(60.17, 24.94)
#: Grid spacing: about 111 m north-south and 111 m east-west at this latitude.
DLAT = 0.001
DLON = 0.002


def grid(
    rows: int,
    cols: int,
    *,
    road_class: Callable[[tuple[int, int], tuple[int, int]], RoadClass] | None = None,
    access: Callable[[tuple[int, int], tuple[int, int]], int] | None = None,
    skip: Callable[[tuple[int, int], tuple[int, int]], bool] | None = None,
    name: str = "grid",
) -> StreetNetwork:
    """A rows x cols street grid; node (i, j) is index i * cols + j, at ORIGIN + (i, j) steps.

    Edges join horizontal and vertical neighbours, from the lower to the higher index.
    """
    lat = np.array([ORIGIN.lat + i * DLAT for i in range(rows) for _ in range(cols)])
    lon = np.array([ORIGIN.lon + j * DLON for _ in range(rows) for j in range(cols)])
    edges: list[tuple[tuple[int, int], tuple[int, int]]] = []
    for i in range(rows):
        for j in range(cols):
            if j + 1 < cols:
                edges.append(((i, j), (i, j + 1)))
            if i + 1 < rows:
                edges.append(((i, j), (i + 1, j)))
    if skip is not None:
        edges = [e for e in edges if not skip(*e)]
    frm = np.array([a[0] * cols + a[1] for a, _ in edges], dtype=np.int32)
    to = np.array([b[0] * cols + b[1] for _, b in edges], dtype=np.int32)
    length = np.array(
        [
            distance_m(Point(lat[f], lon[f]), Point(lat[t], lon[t]))
            for f, t in zip(frm, to, strict=True)
        ]
    )
    classes = np.array(
        [road_class(a, b) if road_class else RoadClass.LOCAL for a, b in edges], dtype=np.uint8
    )
    flags = np.array(
        [access(a, b) if access else Access.FOOT | Access.BIKE for a, b in edges], dtype=np.uint8
    )
    return StreetNetwork(name, lat, lon, frm, to, length, classes, flags)


def node_point(network: StreetNetwork, i: int, j: int, cols: int) -> Point:
    return network.node(i * cols + j)


def city_grid(size: int, name: str = "city") -> StreetNetwork:
    """A size x size street grid about 100 m apart, north-east of ORIGIN, built with NumPy (a
    million nodes take a second): for path searches that are long by construction. Node
    (i, j) is index i * size + j; every 10th street is an arterial."""
    n = size * size
    row, col = np.divmod(np.arange(n), size)
    lat = ORIGIN.lat + row * 0.0009
    lon = ORIGIN.lon + col * 0.0018
    index = np.arange(n).reshape(size, size)
    frm = np.concatenate((index[:, :-1].ravel(), index[:-1, :].ravel())).astype(np.int32)
    to = np.concatenate((index[:, 1:].ravel(), index[1:, :].ravel())).astype(np.int32)
    street = np.concatenate((row[index[:, :-1].ravel()], col[index[:-1, :].ravel()]))
    classes = np.where(street % 10 == 0, RoadClass.ARTERIAL, RoadClass.LOCAL).astype(np.uint8)
    # About 100 m each way at this latitude: the planner needs lengths, not their last metre.
    length = np.full(frm.size, 100.0)
    flags = np.full(frm.size, Access.FOOT | Access.BIKE, dtype=np.uint8)
    return StreetNetwork(name, lat, lon, frm, to, length, classes, flags)

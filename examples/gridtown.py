"""Writes Gridtown, a made-up town of 1.2 km by 1.2 km, as OpenStreetMap XML: a second city to
try offline beside the shipped Helsinki extract (`examples/gridtown.osm` is this script's
output; `tests/cleanair_sources/test_gridtown.py` checks the two agree).

    .venv/bin/python examples/gridtown.py examples/gridtown.osm

Its streets are a 100 m grid: a busy primary road (Main Street) across the middle, a
secondary road (Station Road) down it, a ring of tertiary roads, quiet residential streets
elsewhere, a park crossed by footpaths and a pond. It lies in fields near 61.0 N 25.0 E,
where no town is, so nothing real is mistaken for it; the air over it is the model's
(or CAMS's) for that place.
"""

from __future__ import annotations

import itertools
import math
import sys
from pathlib import Path
from xml.sax.saxutils import quoteattr

CENTRE = (61.0, 25.0)
SPACING_M = 100.0
SIZE = 13  # grid nodes per side: 12 blocks of 100 m
# Blocks (column, row) of the park and of the pond: no streets cross them.
PARK = range(8, 11), range(8, 11)
POND = range(1, 3), range(1, 3)


def _grid(i: int, j: int) -> tuple[float, float]:
    """The location of grid node (column i, row j), row 0 in the south."""
    lat0, lon0 = CENTRE
    dlat = SPACING_M / 111_320.0
    dlon = SPACING_M / (111_320.0 * math.cos(math.radians(lat0)))
    half = (SIZE - 1) / 2
    return round(lat0 + (j - half) * dlat, 7), round(lon0 + (i - half) * dlon, 7)


def _node_id(i: int, j: int) -> int:
    return 1 + j * SIZE + i


def _inside(block: tuple[range, range], i: float, j: float) -> bool:
    """Whether a point strictly inside the blocks' outline (grid units) is covered."""
    cols, rows = block
    return cols.start < i < cols.stop and rows.start < j < rows.stop


def _street(i: int, j: int) -> tuple[str, str]:
    """The highway class and name of the east-west street of row j (i < 0) or the
    north-south street of column i (j < 0)."""
    if j >= 0:
        if j == 6:
            return "primary", "Main Street"
        if j in (0, SIZE - 1):
            return "tertiary", "Ring Road"
        return "residential", f"{j if j < 6 else j - 1}. Row"
    if i == 6:
        return "secondary", "Station Road"
    if i in (0, SIZE - 1):
        return "tertiary", "Ring Road"
    return "residential", f"{'ABCDEFGHIJK'[i - 1 if i < 6 else i - 2]} Lane"


def _runs(cells: list[tuple[int, int]]) -> list[list[tuple[int, int]]]:
    """A street's nodes split where a segment would cross the park or the pond."""
    runs: list[list[tuple[int, int]]] = [[cells[0]]]
    for a, b in itertools.pairwise(cells):
        mid = ((a[0] + b[0]) / 2, (a[1] + b[1]) / 2)
        if _inside(PARK, *mid) or _inside(POND, *mid):
            runs.append([b])
        else:
            runs[-1].append(b)
    return [run for run in runs if len(run) > 1]


def gridtown() -> str:
    """The town as OpenStreetMap XML (nodes before ways, as osmium wants)."""
    nodes: dict[int, tuple[float, float]] = {
        _node_id(i, j): _grid(i, j) for j in range(SIZE) for i in range(SIZE)
    }
    ways: list[tuple[list[int], dict[str, str]]] = []
    for j in range(SIZE):
        highway, name = _street(-1, j)
        for run in _runs([(i, j) for i in range(SIZE)]):
            tags = {"highway": highway, "name": name}
            if highway == "primary":
                tags["lanes"] = "4"
            ways.append(([_node_id(*c) for c in run], tags))
    for i in range(SIZE):
        highway, name = _street(i, -1)
        for run in _runs([(i, j) for j in range(SIZE)]):
            ways.append(([_node_id(*c) for c in run], {"highway": highway, "name": name}))
    # The park's paths: its diagonals, meeting at its middle.
    (c0, c1), (r0, r1) = (PARK[0].start, PARK[0].stop), (PARK[1].start, PARK[1].stop)
    middle = 10_000
    lat_a, lon_a = _grid(c0, r0)
    lat_b, lon_b = _grid(c1, r1)
    nodes[middle] = (round((lat_a + lat_b) / 2, 7), round((lon_a + lon_b) / 2, 7))
    path = {"highway": "footway", "name": "Park Path"}
    for corner in ((c0, r0), (c1, r1), (c0, r1), (c1, r0)):
        ways.append(([_node_id(*corner), middle], path))
    areas = [
        (PARK, {"leisure": "park", "name": "Town Park"}),
        (POND, {"natural": "water", "name": "Mill Pond"}),
    ]
    for block, tags in areas:
        (a, b), (c, d) = (block[0].start, block[0].stop), (block[1].start, block[1].stop)
        ring = [(a, c), (b, c), (b, d), (a, d), (a, c)]
        ways.append(([_node_id(*corner) for corner in ring], tags))

    lines = [
        "<?xml version='1.0' encoding='UTF-8'?>",
        '<osm version="0.6" generator="cleanair examples/gridtown.py">',
    ]
    for node_id in sorted(nodes):
        lat, lon = nodes[node_id]
        lines.append(f'  <node id="{node_id}" version="1" lat="{lat}" lon="{lon}"/>')
    for way_id, (refs, tags) in enumerate(ways, start=1):
        lines.append(f'  <way id="{way_id}" version="1">')
        lines.extend(f'    <nd ref="{ref}"/>' for ref in refs)
        lines.extend(f"    <tag k={quoteattr(k)} v={quoteattr(v)}/>" for k, v in tags.items())
        lines.append("  </way>")
    lines.append("</osm>")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python examples/gridtown.py OUTPUT.osm")
    Path(sys.argv[1]).write_text(gridtown(), encoding="utf-8")

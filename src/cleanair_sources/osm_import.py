"""Street networks from OpenStreetMap files (.osm.pbf, .osm, .osm.xml), read with pyosmium.

`import_network` reads the file's relations once (to assemble multipolygons), then the whole
file once: osmium keeps the location of every node in memory (about 16 bytes per node of the
file) and hands each `highway`-tagged way over with the locations of its nodes, and each area
whose tags may be water or green space; only those reach Python. It returns a `StreetNetwork`
with one edge per pair of consecutive nodes of each kept way. The file must list nodes before
ways, as OpenStreetMap extracts do.

Which ways are kept
-------------------
Only ways whose `highway` value is in the table below; every other value is skipped
(construction, proposed, abandoned, platform, raceway, bus_guideway, busway, escape, elevator,
via_ferrata, the non-standard "trail", ...). Ways tagged `area=yes` (pedestrian squares drawn as
outlines) are skipped too. A kept way must also be open to walking or cycling (see below),
except collector, arterial and motorway roads, which are always kept for their air even when
nobody may walk or cycle on them (their edges then have `Access.NONE`).

Road class (how much traffic pollution an edge stands for)
----------------------------------------------------------
- PATH: footway, path, pedestrian, steps, cycleway, bridleway, track, corridor
- LOCAL: residential, living_street, service, unclassified, road
- COLLECTOR: tertiary, secondary and their _link roads
- ARTERIAL: primary, trunk and their _link roads
- MOTORWAY: motorway, motorway_link

Traffic (motor vehicles a day, for the street-level air)
--------------------------------------------------------
Each kept way gets an estimate (`traffic_of_way`), where no counts exist (docs/science.md,
"Street-level air", gives the source of every number):
1. By `highway`: the EU noise working group's defaults (WG-AEN, table "Tool 4.5") as GeoClimate
   tabulates them, day + evening + night vehicles: motorway 37,290, trunk 23,914, primary
   8,905, secondary 2,000, tertiary 1,000, residential and unclassified 500, living_street and
   service 250; a `_link` road takes its road's class, as in GeoClimate; our choices: road 500
   (as unclassified: the OpenStreetMap wiki defines `highway=road` as a road of unknown
   classification, to be retagged once surveyed), paths 0.
2. A one-way way carries half, as GeoClimate splits a one-way section's flow (a dual
   carriageway is drawn as two one-way ways, each with one direction's traffic):
   `oneway=yes|true|1|-1|reverse`, roundabouts and motorways.
3. `lanes` (a positive number; "2;3" takes the first), where tagged: times lanes over the
   class's usual lanes for the way's directions, since a road's capacity is its lanes times a
   lane's capacity; the usual lanes are MATSim's OpenStreetMap defaults (motorway 2 each way,
   every other class, motorway_link included, 1 each way: 4 and 2 both ways; a one-way way
   half of that, at least 1),
   bounded to 0.5..3 times (our choice, against mistagged ways).
4. `maxspeed` (km/h, or "N mph"), where tagged with a number: at most 20 km/h x 0.5, at most 30
   x 0.7, at least 70 x 1.3 (our choice, no source found: calmed streets carry less traffic,
   fast roads more). Other values ("none", "walk", "DE:urban") are ignored.

Walking (also used for running)
-------------------------------
1. `foot=yes|designated|permissive` allows walking, whatever else is tagged.
2. `foot=no|private|use_sidepath` forbids it.
3. `access=no|private` forbids it.
4. Otherwise walking is allowed everywhere except on motorway(_link) and trunk(_link) roads (in
   Finland trunk roads are often expressways with separate paths beside them).
Walking ignores one-way streets; `sidewalk=*` tags do not matter (a street is walkable whether
or not its sidewalk is drawn as a separate footway).

Cycling
-------
1. `bicycle=yes|designated|permissive` allows cycling, whatever else is tagged.
2. `bicycle=no|private|use_sidepath|dismount` forbids it (having to push the bike counts as no).
3. `vehicle=no|private` or `access=no|private` forbids it (a bicycle is a vehicle).
4. Otherwise cycling is allowed everywhere except on motorway(_link), trunk(_link), footway,
   pedestrian, steps and corridor ways.
Direction, for a way cyclists may use (forward is the way's own node order):
1. `oneway:bicycle=no` opens both directions; `oneway:bicycle=yes|true|1` only forward;
   `oneway:bicycle=-1|reverse` only backward.
2. A contraflow lane or track opens both directions: `cycleway`, `cycleway:left`,
   `cycleway:right` or `cycleway:both` = opposite, opposite_lane, opposite_track, ... or
   `cycleway:left|right|both:oneway=no|-1`.
3. `oneway=yes|true|1` only forward; `oneway=-1|reverse` only backward; `oneway=no` both.
4. Without a `oneway` tag, roundabouts (`junction=roundabout|circular`) and motorways are
   one-way forward; everything else is two-way.

Edges and nodes
---------------
- One edge per pair of consecutive nodes of a kept way, with the way's class and access. Its
  length is the haversine distance in metres on the core's sphere (radius 6,371,008.8 m);
  zero-length segments (repeated nodes, two nodes at one place) are dropped.
- Only nodes that end at least one edge become graph nodes, numbered 0..n-1 in the order of
  their OpenStreetMap ids; coordinates are float64 degrees.
- A way whose nodes are partly missing from the file (an extract clipped at its border) is
  split at the missing nodes: the segments between nodes that are present are kept.
- Each edge keeps its way's `name` tag (whitespace folded to single spaces; none when empty)
  as an index into the network's `street_names`, for the route explorer's map.

Water and green space (for the route explorer's map only)
----------------------------------------------------------
Areas (closed ways, and the outer rings of multipolygon relations, as osmium assembles them)
tagged as water (`natural=water`, `waterway=riverbank`, `landuse=reservoir|basin`) or green
space (`leisure=park|garden`, `landuse=grass|forest|recreation_ground`, `natural=wood`) become
the network's `areas`; the sea is not kept (OpenStreetMap draws it only as coastline, which an
extract leaves unclosed). Each outer ring is clipped to the network's bounds and simplified
(Douglas-Peucker, `SIMPLIFY_M` metres), and dropped when fewer than three points are left;
inner rings (holes) are not kept. Routing never reads them.

Progress
--------
`progress(stage, count)` is called with stage "ways" every 100,000 `highway`-tagged ways read
and once at the end of the file (the count read so far), then once with "nodes" (graph nodes)
and once with "edges" (edges built). Nodes are read by osmium itself and are not counted.

Errors
------
ValueError, with a message naming the file, for a missing or unreadable file (osmium's own
message is included) and for a file without a single edge someone may walk or cycle on.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path

import attrs
import numpy as np
import numpy.typing as npt
import osmium
import osmium.filter

from cleanair_core.geo import distances_m
from cleanair_core.routes.network import (
    Access,
    AreaKind,
    NetworkAreas,
    RoadClass,
    StreetNetwork,
)

Progress = Callable[[str, int], None]

#: The packaged default network: central Helsinki (about 1.0 x 1.7 km), © OpenStreetMap
#: contributors, ODbL 1.0; origin and licence in data/README.md.
HELSINKI_EXTRACT = Path(__file__).parent / "data" / "helsinki.osm.pbf"

#: How often (in elements of a stage) `progress` is called.
PROGRESS_EVERY = 100_000

# osmium's fixed-point coordinates: degrees x 1e7; a node missing from the file has an
# undefined location, outside these bounds.
_COORDINATE_PRECISION = 10_000_000.0
_MAX_X = 1_800_000_000
_MAX_Y = 900_000_000

#: The road class of each kept `highway` value; any other value is skipped.
ROAD_CLASSES: Mapping[str, RoadClass] = {
    **dict.fromkeys(
        (
            "footway",
            "path",
            "pedestrian",
            "steps",
            "cycleway",
            "bridleway",
            "track",
            "corridor",
        ),
        RoadClass.PATH,
    ),
    **dict.fromkeys(
        ("residential", "living_street", "service", "unclassified", "road"), RoadClass.LOCAL
    ),
    **dict.fromkeys(
        ("tertiary", "tertiary_link", "secondary", "secondary_link"), RoadClass.COLLECTOR
    ),
    **dict.fromkeys(("primary", "primary_link", "trunk", "trunk_link"), RoadClass.ARTERIAL),
    **dict.fromkeys(("motorway", "motorway_link"), RoadClass.MOTORWAY),
}

_ALLOWED = frozenset({"yes", "designated", "permissive"})
_ACCESS_DENIED = frozenset({"no", "private"})
_FOOT_DENIED = frozenset({"no", "private", "use_sidepath"})
_BICYCLE_DENIED = frozenset({"no", "private", "use_sidepath", "dismount"})
_NO_FOOT_BY_DEFAULT = frozenset({"motorway", "motorway_link", "trunk", "trunk_link"})
_NO_BIKE_BY_DEFAULT = _NO_FOOT_BY_DEFAULT | {"footway", "pedestrian", "steps", "corridor"}
_ONEWAY_YES = frozenset({"yes", "true", "1"})
_ONEWAY_REVERSE = frozenset({"-1", "reverse"})
_ONEWAY_NO = frozenset({"no", "false", "0"})
_IMPLIED_ONEWAY_HIGHWAYS = frozenset({"motorway", "motorway_link"})
_IMPLIED_ONEWAY_JUNCTIONS = frozenset({"roundabout", "circular"})
_CONTRAFLOW_KEYS = ("cycleway", "cycleway:left", "cycleway:right", "cycleway:both")
_CONTRAFLOW_ONEWAY_KEYS = ("cycleway:left:oneway", "cycleway:right:oneway", "cycleway:both:oneway")
#: Classes kept for their air even when nobody may walk or cycle on them.
_KEPT_FOR_AIR = frozenset({RoadClass.COLLECTOR, RoadClass.ARTERIAL, RoadClass.MOTORWAY})
#: Motor vehicles a day by `highway` value (module documentation); a `_link` road carries its
#: road's, every other kept value 0.
TRAFFIC_BY_HIGHWAY: Mapping[str, float] = {
    "motorway": 37_290.0,
    "trunk": 23_914.0,
    "primary": 8_905.0,
    "secondary": 2_000.0,
    "tertiary": 1_000.0,
    "residential": 500.0,
    "unclassified": 500.0,
    "road": 500.0,
    "living_street": 250.0,
    "service": 250.0,
}
#: Usual lanes, both directions together, of a class whose `lanes` tag refines its traffic
#: (MATSim's defaults: motorway 2 lanes each way, every other class 1).
_USUAL_LANES: Mapping[str, int] = {"motorway": 4}
_LANES_FACTOR_BOUNDS = (0.5, 3.0)
_MPH = 1.609344
#: (at most km/h, factor) for calmed streets, then (at least km/h, factor) for fast roads.
_SLOW_STREETS = ((20.0, 0.5), (30.0, 0.7))
_FAST_ROADS = (70.0, 1.3)
#: Every tag the rules read (besides `highway`).
_RULE_KEYS = (
    "lanes",
    "maxspeed",
    "area",
    "access",
    "foot",
    "vehicle",
    "bicycle",
    "oneway",
    "oneway:bicycle",
    "junction",
    *_CONTRAFLOW_KEYS,
    *_CONTRAFLOW_ONEWAY_KEYS,
)


#: The area kind of each kept (key, value) tag; any other area is skipped.
AREA_KINDS: Mapping[tuple[str, str], AreaKind] = {
    ("natural", "water"): AreaKind.WATER,
    ("waterway", "riverbank"): AreaKind.WATER,
    ("landuse", "reservoir"): AreaKind.WATER,
    ("landuse", "basin"): AreaKind.WATER,
    ("leisure", "park"): AreaKind.PARK,
    ("leisure", "garden"): AreaKind.PARK,
    ("landuse", "grass"): AreaKind.PARK,
    ("landuse", "forest"): AreaKind.PARK,
    ("landuse", "recreation_ground"): AreaKind.PARK,
    ("natural", "wood"): AreaKind.PARK,
}
_AREA_KEYS = tuple(sorted({key for key, _ in AREA_KINDS}))
#: How far (metres) a simplified outline may stray from the mapped one: invisible on the map,
#: and it keeps the stored and served outlines small.
SIMPLIFY_M = 2.0
_METRES_PER_DEGREE = 6_371_008.8 * math.pi / 180.0


def area_kind(tags: Mapping[str, str]) -> AreaKind | None:
    """Whether an area with `tags` is water or green space (water first), or None."""
    kinds = [
        kind for key in _AREA_KEYS if (kind := AREA_KINDS.get((key, tags.get(key, "")))) is not None
    ]
    return min(kinds, default=None)


def classify_way(tags: Mapping[str, str]) -> tuple[RoadClass, Access] | None:
    """The road class and access of a way with `tags`, or None when it is not kept.

    The rules are those of the module documentation.
    """
    highway = tags.get("highway")
    if highway is None:
        return None
    road_class = ROAD_CLASSES.get(highway)
    if road_class is None or tags.get("area") == "yes":
        return None
    access = Access.NONE
    if _may_walk(highway, tags):
        access |= Access.FOOT
    if _may_cycle(highway, tags):
        access |= _bike_directions(highway, tags)
    if access == Access.NONE and road_class not in _KEPT_FOR_AIR:
        return None
    return road_class, access


def traffic_of_way(tags: Mapping[str, str]) -> float:
    """Estimated motor vehicles a day on a way with `tags` (module documentation); 0 for a
    way with no motor traffic or an unknown `highway` value."""
    highway = tags.get("highway", "")
    road = highway.removesuffix("_link")
    vehicles = TRAFFIC_BY_HIGHWAY.get(road, 0.0)
    if vehicles == 0.0:
        return 0.0
    one_way = _is_one_way(highway, tags)
    if one_way:
        vehicles /= 2.0
    lanes = _leading_number(tags.get("lanes"))
    if lanes is not None and lanes >= 1:
        usual = _USUAL_LANES.get(highway, 2)  # motorway_link: 1 lane each way
        usual = max(usual // 2, 1) if one_way else usual
        low, high = _LANES_FACTOR_BOUNDS
        vehicles *= min(max(lanes / usual, low), high)
    speed = _speed_kmh(tags.get("maxspeed"))
    if speed is not None:
        for limit, factor in _SLOW_STREETS:
            if speed <= limit:
                vehicles *= factor
                break
        else:
            if speed >= _FAST_ROADS[0]:
                vehicles *= _FAST_ROADS[1]
    return vehicles


def _is_one_way(highway: str, tags: Mapping[str, str]) -> bool:
    oneway = tags.get("oneway")
    if oneway is not None:
        return oneway in _ONEWAY_YES or oneway in _ONEWAY_REVERSE
    return highway in _IMPLIED_ONEWAY_HIGHWAYS or tags.get("junction") in _IMPLIED_ONEWAY_JUNCTIONS


def _leading_number(value: str | None) -> float | None:
    """The first number of a tag value ("2", "2;3", "50 mph" give 2, 2, 50), if any."""
    if value is None:
        return None
    head = value.split(";")[0].strip().split(" ")[0]
    try:
        number = float(head)
    except ValueError:
        return None
    return number if math.isfinite(number) and number > 0 else None


def _speed_kmh(value: str | None) -> float | None:
    number = _leading_number(value)
    if number is None or value is None:
        return None
    return number * _MPH if value.strip().endswith("mph") else number


def _may_walk(highway: str, tags: Mapping[str, str]) -> bool:
    foot = tags.get("foot")
    if foot in _ALLOWED:
        return True
    if foot in _FOOT_DENIED or tags.get("access") in _ACCESS_DENIED:
        return False
    return highway not in _NO_FOOT_BY_DEFAULT


def _may_cycle(highway: str, tags: Mapping[str, str]) -> bool:
    bicycle = tags.get("bicycle")
    if bicycle in _ALLOWED:
        return True
    if (
        bicycle in _BICYCLE_DENIED
        or tags.get("vehicle") in _ACCESS_DENIED
        or tags.get("access") in _ACCESS_DENIED
    ):
        return False
    return highway not in _NO_BIKE_BY_DEFAULT


def _bike_directions(highway: str, tags: Mapping[str, str]) -> Access:
    oneway_bicycle = tags.get("oneway:bicycle")
    if oneway_bicycle in _ONEWAY_NO:
        return Access.BIKE
    if oneway_bicycle in _ONEWAY_YES:
        return Access.BIKE_FORWARD
    if oneway_bicycle in _ONEWAY_REVERSE:
        return Access.BIKE_BACKWARD
    if any(tags.get(key, "").startswith("opposite") for key in _CONTRAFLOW_KEYS) or any(
        tags.get(key) in ("no", "-1") for key in _CONTRAFLOW_ONEWAY_KEYS
    ):
        return Access.BIKE
    oneway = tags.get("oneway")
    if oneway in _ONEWAY_YES:
        return Access.BIKE_FORWARD
    if oneway in _ONEWAY_REVERSE:
        return Access.BIKE_BACKWARD
    if oneway is None and (
        highway in _IMPLIED_ONEWAY_HIGHWAYS or tags.get("junction") in _IMPLIED_ONEWAY_JUNCTIONS
    ):
        return Access.BIKE_FORWARD
    return Access.BIKE


def import_network(
    path: str | Path,
    name: str,
    progress: Progress | None = None,
    clock_now: datetime | None = None,
) -> StreetNetwork:
    """The walkable and cyclable street network in the OpenStreetMap file at `path`.

    `name` names the network, `clock_now` becomes its `imported_at` and the file's name its
    `source`. Raises ValueError when the file cannot be read or holds no usable streets.
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"no OpenStreetMap file at {path}")
    report: Progress = progress if progress is not None else _no_progress
    try:
        ways, outlines = _read_ways(path, report)
    except RuntimeError as exc:  # how osmium reports unreadable files and parse errors
        raise ValueError(f"cannot read the OpenStreetMap file {path}: {exc}") from exc
    network = _build(name, path, ways, clock_now)
    network = attrs.evolve(network, areas=_areas_within(outlines, network.bounds))
    report("nodes", network.node_count)
    report("edges", network.edge_count)
    if not np.any(network.edge_access != Access.NONE):
        raise ValueError(f"no walkable or cyclable streets in {path}")
    return network


def _no_progress(stage: str, count: int) -> None:
    """The default progress callback: ignores everything."""


@attrs.frozen
class _Ways:
    """The kept ways: their node references and fixed-point locations, concatenated."""

    refs: npt.NDArray[np.int64]
    x: npt.NDArray[np.int32]  # longitude x 1e7; _UNDEFINED when the file lacks the node
    y: npt.NDArray[np.int32]  # latitude x 1e7
    ends: npt.NDArray[np.int64]  # where each way's references end
    road_class: npt.NDArray[np.uint8]  # per way
    access: npt.NDArray[np.uint8]  # per way
    traffic: npt.NDArray[np.float64]  # per way, vehicles a day
    name: npt.NDArray[np.int32]  # per way, an index into `names`; -1 when it has none
    names: tuple[str, ...]


def street_name(tags_name: str | None) -> str | None:
    """A way's `name` tag as the map shows it: whitespace (line breaks too) folded to single
    spaces, None when there is nothing left."""
    if tags_name is None:
        return None
    folded = " ".join(tags_name.split())
    return folded or None


@attrs.frozen
class _Outline:
    """One outer ring of a kept area, in degrees (unclosed)."""

    kind: AreaKind
    lat: npt.NDArray[np.float64]
    lon: npt.NDArray[np.float64]


def _read_ways(path: Path, report: Progress) -> tuple[_Ways, list[_Outline]]:
    """Read the file once (and its relations once before): osmium keeps every node's location,
    assembles areas, and hands each highway-tagged way over with its nodes' locations, and
    each area with a kept tag; only those reach Python."""
    refs = array("q")
    xs = array("i")
    ys = array("i")
    ends = array("q")
    classes = array("B")
    accesses = array("B")
    traffic = array("d")
    way_names = array("i")
    names: dict[str, int] = {}
    outlines: list[_Outline] = []
    seen = 0
    processor = (
        osmium.FileProcessor(str(path), osmium.osm.NODE | osmium.osm.WAY | osmium.osm.RELATION)
        .with_locations()
        # Only multipolygons that may be kept are assembled from relations.
        .with_areas(osmium.filter.KeyFilter(*_AREA_KEYS))
        .with_filter(osmium.filter.EntityFilter(osmium.osm.WAY | osmium.osm.AREA))
        .with_filter(osmium.filter.KeyFilter("highway", *_AREA_KEYS))
    )
    for way in processor:
        if isinstance(way, osmium.osm.Area):
            outlines += _outlines(way)
            continue
        if not isinstance(way, osmium.osm.Way):
            continue
        way_tags = way.tags
        highway = way_tags.get("highway")
        if highway is None:
            continue
        seen += 1
        if seen % PROGRESS_EVERY == 0:
            report("ways", seen)
        if highway not in ROAD_CLASSES:
            continue
        tags = {"highway": highway}
        for key in _RULE_KEYS:
            value = way_tags.get(key)
            if value is not None:
                tags[key] = value
        kept = classify_way(tags)
        if kept is None:
            continue
        for node in way.nodes:
            location = node.location
            refs.append(node.ref)
            xs.append(location.x)
            ys.append(location.y)
        ends.append(len(refs))
        classes.append(kept[0])
        accesses.append(kept[1])
        traffic.append(traffic_of_way(tags))
        named = street_name(way_tags.get("name"))
        way_names.append(-1 if named is None else names.setdefault(named, len(names)))
    report("ways", seen)
    ways = _Ways(
        refs=np.array(refs, dtype=np.int64),
        x=np.array(xs, dtype=np.int32),
        y=np.array(ys, dtype=np.int32),
        ends=np.array(ends, dtype=np.int64),
        road_class=np.array(classes, dtype=np.uint8),
        access=np.array(accesses, dtype=np.uint8),
        traffic=np.array(traffic, dtype=np.float64),
        name=np.array(way_names, dtype=np.int32),
        names=tuple(names),
    )
    return ways, outlines


def _outlines(area: osmium.osm.Area) -> list[_Outline]:
    """The outer rings of `area` when its tags keep it (a ring with a node missing from the
    file is skipped: osmium assembles such areas only partly)."""
    kind = area_kind({key: area.tags.get(key) or "" for key in _AREA_KEYS})
    if kind is None:
        return []
    kept = []
    for ring in area.outer_rings():
        locations = [node.location for node in ring]
        if not all(location.valid() for location in locations):
            continue
        kept.append(
            _Outline(
                kind,
                np.array([location.lat for location in locations], dtype=np.float64),
                np.array([location.lon for location in locations], dtype=np.float64),
            )
        )
    return kept


def _areas_within(
    outlines: list[_Outline], bounds: tuple[float, float, float, float]
) -> NetworkAreas:
    """Each outline clipped to `bounds` and simplified; outlines with nothing left dropped."""
    south, west, north, east = bounds
    rings: list[tuple[AreaKind, list[float], list[float]]] = []
    for outline in outlines:
        if (
            outline.lat.max() < south
            or outline.lat.min() > north
            or outline.lon.max() < west
            or outline.lon.min() > east
        ):
            continue
        lat, lon = clip_ring(outline.lat.tolist(), outline.lon.tolist(), bounds)
        if len(lat) < 3:
            continue
        lat, lon = simplify_ring(lat, lon, SIMPLIFY_M)
        if len(lat) >= 3:
            rings.append((outline.kind, lat, lon))
    return NetworkAreas.of(rings)


def clip_ring(
    lat: list[float], lon: list[float], bounds: tuple[float, float, float, float]
) -> tuple[list[float], list[float]]:
    """The part of the ring (closed or not) inside `bounds` (Sutherland-Hodgman, one side of
    the box at a time), unclosed; a ring reaching out and back in keeps a seam along the
    border, which a filled shape does not show."""
    south, west, north, east = bounds
    points = list(zip(lat, lon, strict=True))
    if len(points) > 1 and points[0] == points[-1]:
        points.pop()
    # Each side: which coordinate (0 latitude, 1 longitude), its limit, and whether inside is
    # below it.
    for axis, limit, below in (
        (0, south, False),
        (0, north, True),
        (1, west, False),
        (1, east, True),
    ):
        if not points:
            break
        kept: list[tuple[float, float]] = []
        previous = points[-1]
        for point in points:
            inside = (point[axis] <= limit) if below else (point[axis] >= limit)
            was_inside = (previous[axis] <= limit) if below else (previous[axis] >= limit)
            if inside != was_inside:
                share = (limit - previous[axis]) / (point[axis] - previous[axis])
                crossing = (
                    previous[0] + share * (point[0] - previous[0]),
                    previous[1] + share * (point[1] - previous[1]),
                )
                kept.append((limit, crossing[1]) if axis == 0 else (crossing[0], limit))
            if inside:
                kept.append(point)
            previous = point
        points = kept
    return [point[0] for point in points], [point[1] for point in points]


def simplify_ring(
    lat: list[float], lon: list[float], tolerance_m: float
) -> tuple[list[float], list[float]]:
    """The unclosed ring with every point dropped that lies within `tolerance_m` of the
    simplified outline (Douglas-Peucker, on a local flat projection: fine at a city's size)."""
    count = len(lat)
    if count < 4:
        return lat, lon
    y = np.array(lat, dtype=np.float64) * _METRES_PER_DEGREE
    x = np.array(lon, dtype=np.float64) * _METRES_PER_DEGREE * math.cos(math.radians(lat[0]))
    # The ring closed by its first point, so the last side is simplified too.
    y = np.append(y, y[0])
    x = np.append(x, x[0])
    keep = np.zeros(count + 1, dtype=bool)
    keep[0] = keep[-1] = True
    stack = [(0, count)]
    while stack:
        first, last = stack.pop()
        if last - first < 2:
            continue
        dx, dy = x[last] - x[first], y[last] - y[first]
        px, py = x[first + 1 : last] - x[first], y[first + 1 : last] - y[first]
        span = dx * dx + dy * dy
        if span == 0.0:  # the closing side: from the first point back to itself
            distance = np.hypot(px, py)
        else:
            share = np.clip((px * dx + py * dy) / span, 0.0, 1.0)
            distance = np.hypot(px - share * dx, py - share * dy)
        farthest = int(np.argmax(distance))
        if distance[farthest] > tolerance_m:
            middle = first + 1 + farthest
            keep[middle] = True
            stack += [(first, middle), (middle, last)]
    kept = np.flatnonzero(keep[:-1]).tolist()
    return [lat[i] for i in kept], [lon[i] for i in kept]


def _build(name: str, path: Path, ways: _Ways, clock_now: datetime | None) -> StreetNetwork:
    """The network of the segments between consecutive located nodes of each way."""
    present = (np.abs(ways.x) <= _MAX_X) & (np.abs(ways.y) <= _MAX_Y)
    lat = ways.y / _COORDINATE_PRECISION
    lon = ways.x / _COORDINATE_PRECISION
    # Segment k joins references k and k + 1 when both are in the same way and located.
    way_of = np.repeat(np.arange(ways.ends.size), np.diff(ways.ends, prepend=0))
    start = np.flatnonzero((way_of[:-1] == way_of[1:]) & present[:-1] & present[1:])
    end = start + 1
    length = distances_m(lat[start], lon[start], lat[end], lon[end])
    keep = length > 0.0
    start, end, length = start[keep], end[keep], length[keep]
    # The nodes that end an edge, numbered 0..n-1 in the order of their OSM ids.
    both = np.concatenate((start, end))
    _, first, number = np.unique(ways.refs[both], return_index=True, return_inverse=True)
    number = number.reshape(-1)
    return StreetNetwork(
        name=name,
        node_lat=lat[both[first]],
        node_lon=lon[both[first]],
        edge_from=number[: start.size].astype(np.int32),
        edge_to=number[start.size :].astype(np.int32),
        edge_length=length,
        edge_class=ways.road_class[way_of[start]],
        edge_access=ways.access[way_of[start]],
        edge_traffic=ways.traffic[way_of[start]],
        edge_name=ways.name[way_of[start]],
        street_names=ways.names,
        source=path.name,
        imported_at=clock_now,
    )

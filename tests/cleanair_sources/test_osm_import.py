"""Importing OpenStreetMap files: which ways are kept, their classes, access and geometry."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import osmium
import pytest
from hypothesis import given
from hypothesis import strategies as st
from osmium.osm.mutable import Node, Relation, Way

from cleanair_core.geo import Point, distance_m
from cleanair_core.routes.network import (
    Access,
    AreaKind,
    PlanActivityType,
    RoadClass,
    StreetNetwork,
)
from cleanair_sources import osm_import
from cleanair_sources.osm_import import (
    HELSINKI_EXTRACT,
    TRAFFIC_BY_HIGHWAY,
    area_kind,
    classify_way,
    clip_ring,
    import_network,
    simplify_ring,
    traffic_of_way,
)

FOOT = Access.FOOT
BIKE = Access.BIKE
FWD = Access.BIKE_FORWARD
BACK = Access.BIKE_BACKWARD
NONE = Access.NONE

#: A 3 x 3 grid of nodes about 100 m apart; node id = 1 + 3 * row + column.
GRID: dict[int, tuple[float, float]] = {
    1 + 3 * row + col: (60.17 + row * 0.0009, 24.94 + col * 0.0018)
    for row in range(3)
    for col in range(3)
}

WayRow = tuple[int, Sequence[int], Mapping[str, str]]

#: Kept ways of the grid, one per rule, with the (class, access) each edge must get.
KEPT: dict[tuple[int, int], tuple[RoadClass, Access]] = {
    (1, 2): (RoadClass.LOCAL, FOOT | BIKE),  # residential
    (2, 3): (RoadClass.LOCAL, FOOT | BIKE),
    (4, 5): (RoadClass.ARTERIAL, FOOT | BIKE),  # primary
    (5, 6): (RoadClass.ARTERIAL, FOOT | BIKE),
    (7, 8): (RoadClass.PATH, FOOT),  # footway
    (8, 9): (RoadClass.PATH, FOOT | BIKE),  # cycleway
    (1, 4): (RoadClass.MOTORWAY, NONE),  # motorway: kept for its air only
    (2, 5): (RoadClass.LOCAL, FOOT | FWD),  # oneway residential
    (5, 8): (RoadClass.LOCAL, FOOT | BIKE),  # oneway, oneway:bicycle=no
    (3, 6): (RoadClass.PATH, FOOT),  # steps
    (6, 9): (RoadClass.COLLECTOR, FOOT | BACK),  # secondary, oneway=-1
}
GRID_WAYS: list[WayRow] = [
    (101, [1, 2, 3], {"highway": "residential", "name": "Katu"}),
    (102, [4, 5, 6], {"highway": "primary"}),
    (103, [7, 8], {"highway": "footway"}),
    (104, [8, 9], {"highway": "cycleway"}),
    (105, [1, 4], {"highway": "motorway"}),
    (106, [4, 7], {"highway": "service", "access": "private"}),  # nobody may use it: dropped
    (107, [2, 5], {"highway": "residential", "oneway": "yes"}),
    (108, [5, 8], {"highway": "residential", "oneway": "yes", "oneway:bicycle": "no"}),
    (109, [3, 6], {"highway": "steps"}),
    (110, [6, 9], {"highway": "secondary", "oneway": "-1"}),
    # Never kept: not a street, not built, a platform, an area, not a highway at all.
    (120, [1, 5], {"highway": "construction"}),
    (121, [7, 9], {"highway": "platform"}),
    (122, [1, 2, 5, 4, 1], {"highway": "pedestrian", "area": "yes"}),
    (123, [2, 6], {"building": "yes"}),
    (124, [3, 5], {"highway": "proposed"}),
]


def write_osm(path: Path, nodes: Mapping[int, tuple[float, float]], ways: Sequence[WayRow]) -> Path:
    """An OpenStreetMap file (format from the suffix) with `nodes` (id -> lat, lon) and `ways`."""
    with osmium.SimpleWriter(str(path)) as writer:
        for node_id in sorted(nodes):
            lat, lon = nodes[node_id]
            writer.add_node(Node(id=node_id, location=(lon, lat)))
        for way_id, refs, tags in ways:
            writer.add_way(Way(id=way_id, nodes=list(refs), tags=dict(tags)))
    return path


def osm_edges(
    network: StreetNetwork, nodes: Mapping[int, tuple[float, float]]
) -> dict[tuple[int, int], tuple[RoadClass, Access, float]]:
    """The network's edges keyed by the OSM ids of their ends (found by location)."""
    by_location = {(round(lat, 7), round(lon, 7)): node_id for node_id, (lat, lon) in nodes.items()}
    ids = [
        by_location[(round(float(lat), 7), round(float(lon), 7))]
        for lat, lon in zip(network.node_lat, network.node_lon, strict=True)
    ]
    edges: dict[tuple[int, int], tuple[RoadClass, Access, float]] = {}
    for k in range(network.edge_count):
        key = (ids[network.edge_from[k]], ids[network.edge_to[k]])
        assert key not in edges, f"duplicate edge {key}"
        edges[key] = (
            RoadClass(int(network.edge_class[k])),
            Access(int(network.edge_access[k])),
            float(network.edge_length[k]),
        )
    return edges


@pytest.fixture
def grid_file(tmp_path: Path) -> Path:
    return write_osm(tmp_path / "grid.osm.pbf", GRID, GRID_WAYS)


def test_a_grid_keeps_one_edge_per_segment_of_each_usable_way(grid_file: Path) -> None:
    network = import_network(grid_file, "grid")
    edges = osm_edges(network, GRID)
    assert {key: value[:2] for key, value in edges.items()} == KEPT
    assert network.edge_count == 11
    assert network.node_count == 9  # every grid node ends some kept edge


def test_edge_lengths_are_haversine_metres(grid_file: Path) -> None:
    network = import_network(grid_file, "grid")
    for (a, b), (_, _, length) in osm_edges(network, GRID).items():
        assert length == pytest.approx(distance_m(Point(*GRID[a]), Point(*GRID[b])), abs=1e-6)
        assert 95.0 < length < 105.0


def test_the_arrays_have_the_core_types(grid_file: Path) -> None:
    network = import_network(grid_file, "grid")
    assert network.node_lat.dtype == np.float64
    assert network.node_lon.dtype == np.float64
    assert network.edge_from.dtype == np.int32
    assert network.edge_to.dtype == np.int32
    assert network.edge_length.dtype == np.float64
    assert network.edge_class.dtype == np.uint8
    assert network.edge_access.dtype == np.uint8
    assert network.node_lat.shape == network.node_lon.shape == (network.node_count,)
    for column in ("edge_to", "edge_length", "edge_class", "edge_access"):
        assert getattr(network, column).shape == (network.edge_count,)
    assert np.all(network.edge_length > 0)


def test_name_source_and_import_time_are_recorded(grid_file: Path) -> None:
    now = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    network = import_network(str(grid_file), "Kallio", clock_now=now)
    assert network.name == "Kallio"
    assert network.source == "grid.osm.pbf"
    assert network.imported_at == now
    assert import_network(grid_file, "x").imported_at is None


def test_only_nodes_of_kept_ways_are_numbered_0_to_n_minus_1(tmp_path: Path) -> None:
    nodes = {**GRID, 50: (60.2, 25.0), 51: (60.201, 25.0)}  # 50, 51: only a building uses them
    ways = [*GRID_WAYS, (130, [50, 51], {"building": "yes"})]
    network = import_network(write_osm(tmp_path / "g.osm.pbf", nodes, ways), "g")
    assert network.node_count == 9
    used = np.union1d(network.edge_from, network.edge_to)
    assert used.tolist() == list(range(network.node_count))
    # Numbered in the order of OSM ids: the grid's ids run south-west to north-east.
    assert np.all(np.diff(network.node_lat) >= 0)


def test_usable_follows_access(grid_file: Path) -> None:
    network = import_network(grid_file, "grid")
    edges = list(osm_edges(network, GRID))
    walk = {edges[k] for k in np.flatnonzero(network.usable(PlanActivityType.WALKING))}
    ride = {edges[k] for k in np.flatnonzero(network.usable(PlanActivityType.CYCLING))}
    assert walk == {key for key, (_, access) in KEPT.items() if access & FOOT}
    assert ride == {(1, 2), (2, 3), (4, 5), (5, 6), (8, 9), (2, 5), (5, 8), (6, 9)}


def test_ways_clipped_at_the_extract_border_are_split_at_the_missing_nodes(
    tmp_path: Path,
) -> None:
    nodes = {10: (60.17, 24.94), 11: (60.1705, 24.94), 13: (60.1715, 24.94), 14: (60.172, 24.94)}
    ways: list[WayRow] = [
        (1, [10, 11, 12, 13, 14], {"highway": "footway"}),  # node 12 is outside the extract
        (2, [98, 99], {"highway": "footway"}),  # wholly outside
        (3, [99, 10], {"highway": "footway"}),  # one end outside
    ]
    network = import_network(write_osm(tmp_path / "clip.osm.pbf", nodes, ways), "clip")
    assert set(osm_edges(network, nodes)) == {(10, 11), (13, 14)}
    assert network.node_count == 4


def test_zero_length_segments_are_dropped(tmp_path: Path) -> None:
    nodes = {1: (60.17, 24.94), 2: (60.17, 24.94), 3: (60.171, 24.94)}  # 1 and 2 coincide
    ways: list[WayRow] = [(1, [1, 1, 2, 3], {"highway": "path"})]
    network = import_network(write_osm(tmp_path / "zero.osm.pbf", nodes, ways), "zero")
    assert network.edge_count == 1
    assert network.node_count == 2
    assert network.edge_length[0] == pytest.approx(111.2, abs=0.1)


@pytest.mark.parametrize("suffix", [".osm", ".osm.xml"])
def test_xml_files_import_like_pbf(tmp_path: Path, grid_file: Path, suffix: str) -> None:
    xml = write_osm(tmp_path / f"grid{suffix}", GRID, GRID_WAYS)
    from_xml, from_pbf = import_network(xml, "x"), import_network(grid_file, "p")
    for column in ("node_lat", "node_lon", "edge_from", "edge_to", "edge_length"):
        assert np.array_equal(getattr(from_xml, column), getattr(from_pbf, column))
    assert np.array_equal(from_xml.edge_access, from_pbf.edge_access)


def test_progress_reports_each_stage_and_its_count(grid_file: Path) -> None:
    calls: list[tuple[str, int]] = []
    network = import_network(grid_file, "grid", progress=lambda s, n: calls.append((s, n)))
    highway_ways = sum(1 for _, _, tags in GRID_WAYS if "highway" in tags)
    assert calls == [("ways", highway_ways), ("nodes", 9), ("edges", network.edge_count)]


def test_progress_is_reported_every_so_many_ways(
    grid_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(osm_import, "PROGRESS_EVERY", 4)
    calls: list[tuple[str, int]] = []
    import_network(grid_file, "grid", progress=lambda s, n: calls.append((s, n)))
    assert [n for stage, n in calls if stage == "ways"] == [4, 8, 12, 14]


def test_a_file_without_usable_streets_is_a_clear_error(tmp_path: Path) -> None:
    ways: list[WayRow] = [
        (1, [1, 2], {"building": "yes"}),
        (2, [2, 3], {"highway": "motorway"}),  # air only: not a street anyone may use
        (3, [4, 5], {"highway": "footway", "access": "no"}),
        (4, [5, 6], {"highway": "proposed"}),
    ]
    path = write_osm(tmp_path / "empty.osm.pbf", GRID, ways)
    with pytest.raises(ValueError, match=r"no walkable or cyclable streets in .*empty\.osm\.pbf"):
        import_network(path, "empty")


def test_a_file_with_nodes_only_is_a_clear_error(tmp_path: Path) -> None:
    path = write_osm(tmp_path / "nodes.osm.pbf", GRID, [])
    with pytest.raises(ValueError, match="no walkable or cyclable streets"):
        import_network(path, "nodes")


def test_a_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"no OpenStreetMap file at .*missing\.osm\.pbf"):
        import_network(tmp_path / "missing.osm.pbf", "missing")


@pytest.mark.parametrize(
    ("file_name", "content"),
    [
        ("garbage.osm.pbf", b"this is not a protocol buffer"),
        ("broken.osm", b"<osm version='0.6'><node id='1' lat='60' lon='24'><tag k="),
        ("notes.txt", b"highway=footway"),
    ],
)
def test_an_unreadable_file_is_a_value_error_naming_it(
    tmp_path: Path, file_name: str, content: bytes
) -> None:
    path = tmp_path / file_name
    path.write_bytes(content)
    with pytest.raises(ValueError, match=f"cannot read the OpenStreetMap file .*{file_name}"):
        import_network(path, "bad")


# --- the rules, way by way -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tags", "expected"),
    [
        # Road classes.
        ({"highway": "footway"}, (RoadClass.PATH, FOOT)),
        ({"highway": "path"}, (RoadClass.PATH, FOOT | BIKE)),
        ({"highway": "pedestrian"}, (RoadClass.PATH, FOOT)),
        ({"highway": "steps"}, (RoadClass.PATH, FOOT)),
        ({"highway": "cycleway"}, (RoadClass.PATH, FOOT | BIKE)),
        ({"highway": "bridleway"}, (RoadClass.PATH, FOOT | BIKE)),
        ({"highway": "track"}, (RoadClass.PATH, FOOT | BIKE)),
        ({"highway": "corridor"}, (RoadClass.PATH, FOOT)),
        ({"highway": "residential"}, (RoadClass.LOCAL, FOOT | BIKE)),
        ({"highway": "living_street"}, (RoadClass.LOCAL, FOOT | BIKE)),
        ({"highway": "service"}, (RoadClass.LOCAL, FOOT | BIKE)),
        ({"highway": "unclassified"}, (RoadClass.LOCAL, FOOT | BIKE)),
        ({"highway": "road"}, (RoadClass.LOCAL, FOOT | BIKE)),
        ({"highway": "tertiary"}, (RoadClass.COLLECTOR, FOOT | BIKE)),
        ({"highway": "tertiary_link"}, (RoadClass.COLLECTOR, FOOT | BIKE)),
        ({"highway": "secondary"}, (RoadClass.COLLECTOR, FOOT | BIKE)),
        ({"highway": "secondary_link"}, (RoadClass.COLLECTOR, FOOT | BIKE)),
        ({"highway": "primary"}, (RoadClass.ARTERIAL, FOOT | BIKE)),
        ({"highway": "primary_link"}, (RoadClass.ARTERIAL, FOOT | BIKE)),
        ({"highway": "trunk"}, (RoadClass.ARTERIAL, NONE)),
        ({"highway": "trunk_link"}, (RoadClass.ARTERIAL, NONE)),
        ({"highway": "motorway"}, (RoadClass.MOTORWAY, NONE)),
        ({"highway": "motorway_link"}, (RoadClass.MOTORWAY, NONE)),
        # Walking.
        ({"highway": "trunk", "foot": "yes"}, (RoadClass.ARTERIAL, FOOT)),
        ({"highway": "trunk", "foot": "designated"}, (RoadClass.ARTERIAL, FOOT)),
        ({"highway": "cycleway", "foot": "no"}, (RoadClass.PATH, BIKE)),
        ({"highway": "primary", "foot": "use_sidepath"}, (RoadClass.ARTERIAL, BIKE)),
        ({"highway": "residential", "foot": "private"}, (RoadClass.LOCAL, BIKE)),
        ({"highway": "footway", "access": "no", "foot": "yes"}, (RoadClass.PATH, FOOT)),
        ({"highway": "footway", "access": "private", "foot": "permissive"}, (RoadClass.PATH, FOOT)),
        ({"highway": "residential", "sidewalk": "no"}, (RoadClass.LOCAL, FOOT | BIKE)),
        ({"highway": "residential", "access": "destination"}, (RoadClass.LOCAL, FOOT | BIKE)),
        ({"highway": "residential", "oneway": "yes"}, (RoadClass.LOCAL, FOOT | FWD)),
        # Cycling.
        ({"highway": "footway", "bicycle": "yes"}, (RoadClass.PATH, FOOT | BIKE)),
        ({"highway": "pedestrian", "bicycle": "designated"}, (RoadClass.PATH, FOOT | BIKE)),
        ({"highway": "steps", "bicycle": "permissive"}, (RoadClass.PATH, FOOT | BIKE)),
        ({"highway": "path", "bicycle": "no"}, (RoadClass.PATH, FOOT)),
        ({"highway": "track", "bicycle": "private"}, (RoadClass.PATH, FOOT)),
        ({"highway": "primary", "bicycle": "use_sidepath"}, (RoadClass.ARTERIAL, FOOT)),
        ({"highway": "cycleway", "bicycle": "dismount"}, (RoadClass.PATH, FOOT)),
        ({"highway": "service", "vehicle": "no"}, (RoadClass.LOCAL, FOOT)),
        ({"highway": "service", "vehicle": "no", "bicycle": "yes"}, (RoadClass.LOCAL, FOOT | BIKE)),
        ({"highway": "service", "access": "no", "bicycle": "yes"}, (RoadClass.LOCAL, BIKE)),
        ({"highway": "motorway", "bicycle": "yes"}, (RoadClass.MOTORWAY, FWD)),
        ({"highway": "trunk", "bicycle": "yes", "foot": "yes"}, (RoadClass.ARTERIAL, FOOT | BIKE)),
        # Directions for bicycles.
        ({"highway": "residential", "oneway": "true"}, (RoadClass.LOCAL, FOOT | FWD)),
        ({"highway": "residential", "oneway": "1"}, (RoadClass.LOCAL, FOOT | FWD)),
        ({"highway": "residential", "oneway": "-1"}, (RoadClass.LOCAL, FOOT | BACK)),
        ({"highway": "residential", "oneway": "no"}, (RoadClass.LOCAL, FOOT | BIKE)),
        ({"highway": "cycleway", "oneway": "yes"}, (RoadClass.PATH, FOOT | FWD)),
        ({"highway": "tertiary", "junction": "roundabout"}, (RoadClass.COLLECTOR, FOOT | FWD)),
        ({"highway": "tertiary", "junction": "circular"}, (RoadClass.COLLECTOR, FOOT | FWD)),
        (
            {"highway": "tertiary", "junction": "roundabout", "oneway": "no"},
            (RoadClass.COLLECTOR, FOOT | BIKE),
        ),
        (
            {"highway": "residential", "oneway": "yes", "oneway:bicycle": "no"},
            (RoadClass.LOCAL, FOOT | BIKE),
        ),
        ({"highway": "residential", "oneway:bicycle": "yes"}, (RoadClass.LOCAL, FOOT | FWD)),
        ({"highway": "residential", "oneway:bicycle": "-1"}, (RoadClass.LOCAL, FOOT | BACK)),
        (
            {"highway": "residential", "oneway": "yes", "cycleway": "opposite"},
            (RoadClass.LOCAL, FOOT | BIKE),
        ),
        (
            {"highway": "residential", "oneway": "yes", "cycleway:left": "opposite_lane"},
            (RoadClass.LOCAL, FOOT | BIKE),
        ),
        (
            {"highway": "secondary", "oneway": "yes", "cycleway:right": "opposite_track"},
            (RoadClass.COLLECTOR, FOOT | BIKE),
        ),
        (
            {"highway": "residential", "oneway": "-1", "cycleway:both": "opposite_share_busway"},
            (RoadClass.LOCAL, FOOT | BIKE),
        ),
        (
            {"highway": "residential", "oneway": "yes", "cycleway:left:oneway": "-1"},
            (RoadClass.LOCAL, FOOT | BIKE),
        ),
        (
            {"highway": "residential", "oneway": "yes", "cycleway:right": "lane"},
            (RoadClass.LOCAL, FOOT | FWD),
        ),
        # Kept for air though nobody may use them.
        (
            {"highway": "primary", "foot": "use_sidepath", "bicycle": "use_sidepath"},
            (RoadClass.ARTERIAL, NONE),
        ),
        ({"highway": "secondary", "access": "no"}, (RoadClass.COLLECTOR, NONE)),
        # Not kept.
        ({"highway": "service", "access": "private"}, None),
        ({"highway": "footway", "access": "no"}, None),
        ({"highway": "steps", "foot": "no"}, None),
        ({"highway": "pedestrian", "area": "yes"}, None),
        ({"highway": "construction"}, None),
        ({"highway": "proposed"}, None),
        ({"highway": "abandoned"}, None),
        ({"highway": "platform"}, None),
        ({"highway": "raceway"}, None),
        ({"highway": "bus_guideway"}, None),
        ({"highway": "busway"}, None),
        ({"highway": "escape"}, None),
        ({"highway": "elevator"}, None),
        ({"highway": "trail"}, None),
        ({"building": "yes"}, None),
        ({}, None),
    ],
)
def test_way_rules(tags: dict[str, str], expected: tuple[RoadClass, Access] | None) -> None:
    assert classify_way(tags) == expected


# --- the shipped Helsinki extract ----------------------------------------------------------------


def test_the_shipped_helsinki_extract_imports() -> None:
    started = time.perf_counter()
    network = import_network(HELSINKI_EXTRACT, "helsinki")
    took = time.perf_counter() - started
    nbytes = sum(
        getattr(network, column).nbytes
        for column in (
            "node_lat",
            "node_lon",
            "edge_from",
            "edge_to",
            "edge_length",
            "edge_class",
            "edge_access",
        )
    )
    classes = np.bincount(network.edge_class, minlength=len(RoadClass))
    print(
        f"Helsinki: {network.node_count} nodes, {network.edge_count} edges, "
        f"{network.edge_length.sum() / 1000:.1f} km, classes {classes.tolist()}, "
        f"{nbytes} bytes of arrays, imported in {took:.3f} s"
    )
    south, west, north, east = network.bounds
    assert 60.1 <= south < north <= 60.3
    assert 24.8 <= west < east <= 25.1
    assert 5_000 < network.edge_count < 50_000
    assert network.node_count < network.edge_count * 2
    for road_class in (RoadClass.PATH, RoadClass.LOCAL, RoadClass.COLLECTOR, RoadClass.ARTERIAL):
        assert classes[road_class] > 0, road_class
    assert network.usable(PlanActivityType.WALKING).sum() > 5_000
    assert network.usable(PlanActivityType.CYCLING).sum() > 1_000
    # No edge is empty, and none is longer than the extract.
    assert network.edge_length.min() > 0.0
    assert network.edge_length.max() < 2_000.0
    assert network.source == "helsinki.osm.pbf"


@pytest.mark.parametrize(
    ("tags", "vehicles"),
    [
        ({"highway": "motorway", "oneway": "no"}, 37_290.0),
        ({"highway": "primary"}, 8_905.0),
        ({"highway": "trunk"}, 23_914.0),
        ({"highway": "secondary"}, 2_000.0),
        ({"highway": "tertiary"}, 1_000.0),
        ({"highway": "residential"}, 500.0),
        ({"highway": "service"}, 250.0),
        ({"highway": "living_street"}, 250.0),
        ({"highway": "footway"}, 0.0),
        ({"highway": "cycleway", "lanes": "3", "maxspeed": "80"}, 0.0),
        ({"highway": "construction"}, 0.0),
        ({}, 0.0),
        # Links carry their road's (GeoClimate); one-way ways (dual carriageways) half.
        ({"highway": "primary_link"}, 8_905.0),
        ({"highway": "motorway_link"}, 37_290.0 / 2),  # implied one-way
        ({"highway": "primary", "oneway": "yes"}, 8_905.0 / 2),
        ({"highway": "primary", "oneway": "-1"}, 8_905.0 / 2),
        ({"highway": "primary", "junction": "roundabout"}, 8_905.0 / 2),
        ({"highway": "motorway"}, 37_290.0 / 2),  # implied one-way
        # Lanes over the class's usual lanes for the way's directions, bounded to 0.5..3.
        ({"highway": "primary", "lanes": "4"}, 8_905.0 * 2),
        ({"highway": "primary", "lanes": "1"}, 8_905.0 / 2),
        ({"highway": "primary", "lanes": "12"}, 8_905.0 * 3),
        ({"highway": "primary", "oneway": "yes", "lanes": "2"}, 8_905.0),
        ({"highway": "motorway", "lanes": "3"}, 37_290.0 / 2 * 1.5),
        ({"highway": "trunk", "lanes": "4"}, 23_914.0 * 2),  # MATSim: 1 lane each way
        ({"highway": "motorway_link", "lanes": "2"}, 37_290.0 / 2 * 2),
        ({"highway": "secondary", "lanes": "4;2"}, 4_000.0),
        ({"highway": "secondary", "lanes": "two"}, 2_000.0),
        ({"highway": "secondary", "lanes": "0"}, 2_000.0),
        # maxspeed: calmed streets less, fast roads more; words ignored.
        ({"highway": "residential", "maxspeed": "30"}, 500.0 * 0.7),
        ({"highway": "residential", "maxspeed": "20"}, 500.0 * 0.5),
        ({"highway": "residential", "maxspeed": "10 mph"}, 500.0 * 0.5),
        ({"highway": "primary", "maxspeed": "50"}, 8_905.0),
        ({"highway": "primary", "maxspeed": "80"}, 8_905.0 * 1.3),
        ({"highway": "primary", "maxspeed": "45 mph"}, 8_905.0 * 1.3),
        ({"highway": "primary", "maxspeed": "none"}, 8_905.0),
        ({"highway": "primary", "maxspeed": "FI:urban"}, 8_905.0),
        ({"highway": "primary", "maxspeed": "walk"}, 8_905.0),
    ],
)
def test_traffic_of_a_way(tags: dict[str, str], vehicles: float) -> None:
    assert traffic_of_way(tags) == pytest.approx(vehicles)


@given(
    st.sampled_from([*TRAFFIC_BY_HIGHWAY, "primary_link", "footway", "nonsense"]),
    st.dictionaries(st.sampled_from(["lanes", "maxspeed", "oneway", "junction"]), st.text()),
)
def test_traffic_is_never_negative_or_infinite(highway: str, tags: dict[str, str]) -> None:
    vehicles = traffic_of_way({"highway": highway, **tags})
    assert 0.0 <= vehicles < 37_290.0 * 3 * 1.3 + 1


def test_imported_edges_carry_their_ways_traffic(tmp_path: Path) -> None:
    ways: list[WayRow] = [
        (201, [1, 2, 3], {"highway": "primary", "lanes": "4"}),
        (202, [4, 5], {"highway": "residential", "maxspeed": "30"}),
        (203, [7, 8], {"highway": "footway"}),
    ]
    network = import_network(write_osm(tmp_path / "t.osm.pbf", GRID, ways), "t")
    by_edge = {
        key: float(network.edge_traffic[k])
        for k, key in enumerate(osm_edges(network, GRID))  # keyed in edge order
    }
    assert by_edge == {(1, 2): 17_810.0, (2, 3): 17_810.0, (4, 5): 350.0, (7, 8): 0.0}


def test_the_helsinki_extract_has_tagged_refinements() -> None:
    network = import_network(HELSINKI_EXTRACT, "helsinki")
    traffic = network.edge_traffic
    assert traffic.shape == network.edge_class.shape
    assert np.all(traffic[network.edge_class == RoadClass.PATH] == 0.0)
    assert np.all(traffic[network.edge_class != RoadClass.PATH] > 0.0)
    # Lanes, maxspeed and one-way tags make values that no class default has.
    defaults = {*TRAFFIC_BY_HIGHWAY.values(), *(v / 2 for v in TRAFFIC_BY_HIGHWAY.values())}
    refined = ~np.isin(traffic, [0.0, *defaults])
    assert refined.sum() > 0


def test_imported_edges_carry_their_ways_street_names(tmp_path: Path) -> None:
    ways: list[WayRow] = [
        (201, [1, 2, 3], {"highway": "primary", "name": "Mannerheimintie"}),
        (202, [4, 5], {"highway": "residential", "name": "  Kalevan\n katu "}),
        (203, [7, 8], {"highway": "footway", "name": "   "}),
        (204, [8, 9], {"highway": "cycleway"}),
        (205, [5, 6], {"highway": "residential", "name": "Mannerheimintie"}),
    ]
    network = import_network(write_osm(tmp_path / "t.osm.pbf", GRID, ways), "t")
    by_edge = {key: network.street_name(k) for k, key in enumerate(osm_edges(network, GRID))}
    assert by_edge == {
        (1, 2): "Mannerheimintie",
        (2, 3): "Mannerheimintie",
        (4, 5): "Kalevan katu",
        (5, 6): "Mannerheimintie",
        (7, 8): None,
        (8, 9): None,
    }
    # Each name once.
    assert sorted(network.street_names) == ["Kalevan katu", "Mannerheimintie"]


def inside(lat: float, lon: float, ring_lat: Sequence[float], ring_lon: Sequence[float]) -> bool:
    """Whether the point lies inside the ring (even-odd crossings)."""
    found = False
    for i in range(len(ring_lat)):
        j = i - 1
        if (ring_lat[i] > lat) != (ring_lat[j] > lat):
            crossing = ring_lon[i] + (lat - ring_lat[i]) * (ring_lon[j] - ring_lon[i]) / (
                ring_lat[j] - ring_lat[i]
            )
            found ^= lon < crossing
    return found


def kinds_at(network: StreetNetwork, lat: float, lon: float) -> list[AreaKind]:
    assert network.areas is not None
    return [
        kind
        for kind, ring_lat, ring_lon in network.areas.rings()
        if inside(lat, lon, ring_lat.tolist(), ring_lon.tolist())
    ]


@pytest.mark.parametrize(
    ("tags", "kind"),
    [
        ({"natural": "water"}, AreaKind.WATER),
        ({"waterway": "riverbank"}, AreaKind.WATER),
        ({"landuse": "reservoir"}, AreaKind.WATER),
        ({"landuse": "basin"}, AreaKind.WATER),
        ({"leisure": "park"}, AreaKind.PARK),
        ({"leisure": "garden"}, AreaKind.PARK),
        ({"landuse": "grass"}, AreaKind.PARK),
        ({"landuse": "forest"}, AreaKind.PARK),
        ({"landuse": "recreation_ground"}, AreaKind.PARK),
        ({"natural": "wood"}, AreaKind.PARK),
        ({"leisure": "park", "natural": "water"}, AreaKind.WATER),  # a pond mapped on a park
        ({"natural": "coastline"}, None),
        ({"natural": "scrub"}, None),
        ({"landuse": "residential"}, None),
        ({"building": "yes"}, None),
    ],
)
def test_area_rules(tags: dict[str, str], kind: AreaKind | None) -> None:
    assert area_kind(tags) == kind


#: Nodes of areas around the grid (ids from 1000): a pond and a park inside the grid's
#: bounds, a park reaching out of them, a wood wholly outside and a building.
AREA_NODES: dict[int, tuple[float, float]] = {
    # pond: a square with a point on its side (dropped by simplifying)
    1001: (60.1702, 24.9410),
    1002: (60.1702, 24.9420),
    1003: (60.1708, 24.9420),
    1004: (60.1708, 24.9415),
    1005: (60.1708, 24.9410),
    # park multipolygon: an outer ring and a hole
    1011: (60.1710, 24.9410),
    1012: (60.1710, 24.9430),
    1013: (60.1716, 24.9430),
    1014: (60.1716, 24.9410),
    1021: (60.1712, 24.9415),
    1022: (60.1712, 24.9420),
    1023: (60.1714, 24.9420),
    # grass reaching west of the grid (24.94): clipped at its edge
    1031: (60.1702, 24.9390),
    1032: (60.1702, 24.9405),
    1033: (60.1706, 24.9405),
    1034: (60.1706, 24.9390),
    # wood wholly north of the grid
    1041: (60.1800, 24.9410),
    1042: (60.1800, 24.9420),
    1043: (60.1810, 24.9420),
    # building
    1051: (60.1703, 24.9430),
    1052: (60.1703, 24.9432),
    1053: (60.1705, 24.9432),
}


def test_water_and_green_space_are_kept_clipped_to_the_network(tmp_path: Path) -> None:
    path = tmp_path / "areas.osm.pbf"
    with osmium.SimpleWriter(str(path)) as writer:
        for node_id, (lat, lon) in sorted({**GRID, **AREA_NODES}.items()):
            writer.add_node(Node(id=node_id, location=(lon, lat)))
        for way_id, refs, tags in [
            *GRID_WAYS,
            (301, [1001, 1002, 1003, 1004, 1005, 1001], {"natural": "water"}),
            (302, [1011, 1012, 1013, 1014, 1011], {}),
            (303, [1021, 1022, 1023, 1021], {}),
            (304, [1031, 1032, 1033, 1034, 1031], {"landuse": "grass"}),
            (305, [1041, 1042, 1043, 1041], {"natural": "wood"}),
            (306, [1051, 1052, 1053, 1051], {"building": "yes"}),
        ]:
            writer.add_way(Way(id=way_id, nodes=list(refs), tags=dict(tags)))
        writer.add_relation(
            Relation(
                id=401,
                members=[("w", 302, "outer"), ("w", 303, "inner")],
                tags={"type": "multipolygon", "leisure": "park"},
            )
        )
    network = import_network(path, "areas")
    # The streets are as without the areas.
    assert osm_edges(network, GRID) == osm_edges(import_network(grid_file_of(tmp_path), "g"), GRID)
    assert network.areas is not None
    rings = {
        (kind, tuple(zip(lat.round(7).tolist(), lon.round(7).tolist(), strict=True)))
        for kind, lat, lon in network.areas.rings()
    }
    south, west, north, east = network.bounds
    assert {kind for kind, _ in rings} == {AreaKind.WATER, AreaKind.PARK}
    by_kind = {kind: {frozenset(points) for k, points in rings if k == kind} for kind in AreaKind}
    # The pond, its point on a straight side simplified away.
    assert by_kind[AreaKind.WATER] == {frozenset(AREA_NODES[n] for n in (1001, 1002, 1003, 1005))}
    # The park's outer ring only (its hole is not kept), and the grass cut at the west edge.
    assert by_kind[AreaKind.PARK] == {
        frozenset(AREA_NODES[n] for n in (1011, 1012, 1013, 1014)),
        frozenset({(60.1702, west), AREA_NODES[1032], AREA_NODES[1033], (60.1706, west)}),
    }
    assert kinds_at(network, 60.1713, 24.9417) == [AreaKind.PARK]  # in the hole: still drawn
    assert all(
        south <= lat <= north and west <= lon <= east for _, ring in rings for lat, lon in ring
    )


def grid_file_of(tmp_path: Path) -> Path:
    return write_osm(tmp_path / "grid-only.osm.pbf", GRID, GRID_WAYS)


def test_a_file_without_areas_imports_with_none_kept(grid_file: Path) -> None:
    network = import_network(grid_file, "grid")
    assert network.areas is not None
    assert network.areas.ring_count == 0


def test_clipping_cuts_a_ring_at_the_box_and_drops_one_outside() -> None:
    bounds = (0.0, 0.0, 1.0, 1.0)
    lat, lon = clip_ring([0.5, 0.5, 2.0, 2.0, 0.5], [0.5, 2.0, 2.0, 0.5, 0.5], bounds)
    assert sorted(zip(lat, lon, strict=True)) == [(0.5, 0.5), (0.5, 1.0), (1.0, 0.5), (1.0, 1.0)]
    assert clip_ring([2.0, 2.0, 3.0], [2.0, 3.0, 3.0], bounds) == ([], [])


def test_simplifying_drops_points_within_the_tolerance_only() -> None:
    # A square about 111 m across with a point 1 m off its south side and one 10 m off.
    lat = [60.0, 60.0, 60.0 - 1 / 111_195, 60.0, 60.001, 60.001, 60.0 + 0.0005]
    lon = [24.0, 24.0005, 24.001, 24.002, 24.002, 24.0, 24.0 - 10 / 55_600]
    kept_lat, kept_lon = simplify_ring(lat, lon, 2.0)
    assert list(zip(kept_lat, kept_lon, strict=True)) == [(lat[i], lon[i]) for i in (0, 3, 4, 5, 6)]
    assert simplify_ring(lat[:3], lon[:3], 2.0) == (lat[:3], lon[:3])


#: Points of the shipped extract (checked on an OpenStreetMap map of 2019): the Esplanadi's
#: park (Esplanadinpuisto), Kaisaniemi park, and the ponds in Kaisaniemi park and beside
#: Kamppi's Lasipalatsi (the extract has no harbour water: the sea is only coastline there).
ESPLANADI = (60.16765, 24.9480)
KAISANIEMI_PARK = (60.1760, 24.9465)


def test_the_helsinki_extract_keeps_its_water_and_parks() -> None:
    network = import_network(HELSINKI_EXTRACT, "helsinki")
    assert network.areas is not None
    assert AreaKind.PARK in kinds_at(network, *ESPLANADI)
    assert AreaKind.PARK in kinds_at(network, *KAISANIEMI_PARK)
    water = [
        (float(lat.mean()), float(lon.mean()))
        for kind, lat, lon in network.areas.rings()
        if kind is AreaKind.WATER
    ]
    # The Kaisaniemi ponds.
    assert any(60.174 < lat < 60.176 and 24.944 < lon < 24.948 for lat, lon in water), water
    south, west, north, east = network.bounds
    assert bool(np.all((network.areas.lat >= south) & (network.areas.lat <= north)))
    assert bool(np.all((network.areas.lon >= west) & (network.areas.lon <= east)))
    # Small enough to store and serve with the streets: a few hundred points.
    assert network.areas.ring_count > 50
    assert network.areas.lat.size < 1_000

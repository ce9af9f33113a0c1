"""Contract of `StreetNetworkStore` (the `store` fixture runs it on every adapter)."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import attrs
import numpy as np
import pytest

from cleanair_core.geo import Point
from cleanair_core.ports import Store
from cleanair_core.routes.network import (
    TRAFFIC_BY_CLASS,
    Access,
    AreaKind,
    NetworkAreas,
    NetworkSummary,
    PlanActivityType,
    RoadClass,
    StreetNetwork,
)
from cleanair_storage.sqlite import SqliteStore

BERLIN = Point(52.52, 13.405)
IMPORTED = datetime(2026, 3, 1, 4, 5, 6, 789_012, tzinfo=UTC)
ARRAYS = (
    "node_lat",
    "node_lon",
    "edge_from",
    "edge_to",
    "edge_length",
    "edge_class",
    "edge_access",
    "edge_traffic",
    "edge_name",
)
DTYPES = {
    "node_lat": np.float64,
    "node_lon": np.float64,
    "edge_from": np.int32,
    "edge_to": np.int32,
    "edge_length": np.float64,
    "edge_class": np.uint8,
    "edge_access": np.uint8,
    "edge_traffic": np.float64,
    "edge_name": np.int32,
}
#: Names as OpenStreetMap has them: any script, punctuation, long ones.
STREET_NAMES = ("Unter den Linden", "Straße des 17. Juni", "Karl-Marx-Allee", "Ülkü Sokak 🚲")


def make_network(
    name: str = "berlin",
    *,
    nodes: int = 50,
    edges: int = 120,
    seed: int = 0,
    center: Point = BERLIN,
    source: str = "berlin-latest.osm.pbf",
    imported_at: datetime | None = IMPORTED,
) -> StreetNetwork:
    rng = np.random.default_rng(seed)
    return StreetNetwork(
        name=name,
        node_lat=center.lat + rng.uniform(-0.05, 0.05, nodes),
        node_lon=center.lon + rng.uniform(-0.05, 0.05, nodes),
        edge_from=rng.integers(0, max(nodes, 1), edges, dtype=np.int32),
        edge_to=rng.integers(0, max(nodes, 1), edges, dtype=np.int32),
        edge_length=rng.uniform(0.5, 800.0, edges),
        edge_class=rng.integers(0, len(RoadClass), edges, dtype=np.uint8),
        edge_access=rng.integers(0, int(Access.FOOT | Access.BIKE) + 1, edges, dtype=np.uint8),
        edge_traffic=rng.uniform(0.0, 40_000.0, edges),
        edge_name=rng.integers(-1, len(STREET_NAMES), edges, dtype=np.int32),
        street_names=STREET_NAMES,
        areas=make_areas(rng, center),
        source=source,
        imported_at=imported_at,
    )


def make_areas(rng: np.random.Generator, center: Point) -> NetworkAreas:
    """A few water and park rings of 3 to 12 points around `center`."""
    rings = []
    for kind in (AreaKind.WATER, AreaKind.PARK, AreaKind.PARK):
        points = int(rng.integers(3, 13))
        rings.append(
            (
                kind,
                (center.lat + rng.uniform(-0.05, 0.05, points)).tolist(),
                (center.lon + rng.uniform(-0.05, 0.05, points)).tolist(),
            )
        )
    return NetworkAreas.of(rings)


AREA_DTYPES = {"kind": np.uint8, "ring_end": np.int32, "lat": np.float64, "lon": np.float64}


def assert_same_areas(got: NetworkAreas | None, wanted: NetworkAreas | None) -> None:
    if wanted is None:
        assert got is None
        return
    assert got is not None
    for name, dtype in AREA_DTYPES.items():
        array = getattr(got, name)
        assert array.dtype == np.dtype(dtype), name
        np.testing.assert_array_equal(array, getattr(wanted, name), err_msg=name, strict=True)


def assert_same_network(got: StreetNetwork, wanted: StreetNetwork) -> None:
    assert (got.name, got.source, got.imported_at, got.street_names) == (
        wanted.name,
        wanted.source,
        wanted.imported_at,
        wanted.street_names,
    )
    for name in ARRAYS:
        array = getattr(got, name)
        if getattr(wanted, name) is None:  # an optional array: stored as absent
            assert array is None, name
            continue
        assert array.dtype == np.dtype(DTYPES[name]), name
        assert array.shape == getattr(wanted, name).shape, name
        np.testing.assert_array_equal(array, getattr(wanted, name), err_msg=name, strict=True)
    assert_same_areas(got.areas, wanted.areas)


def summary_of(network: StreetNetwork) -> NetworkSummary:
    return NetworkSummary(
        network.name,
        network.node_count,
        network.edge_count,
        network.bounds,
        network.source,
        network.imported_at,
    )


def test_nothing_stored(store: Store) -> None:
    assert store.load_networks() == []
    assert store.network_summaries() == []
    assert store.delete_network("berlin") is False


def test_a_network_round_trips(store: Store) -> None:
    network = make_network()
    store.save_network(network)
    [loaded] = store.load_networks()
    assert_same_network(loaded, network)

    # The arrays work with numpy and with the network's own methods.
    assert loaded.bounds == network.bounds
    np.testing.assert_array_equal(
        loaded.usable(PlanActivityType.CYCLING), network.usable(PlanActivityType.CYCLING)
    )
    lengths = loaded.node_lat[loaded.edge_from] - loaded.node_lat[loaded.edge_to]
    np.testing.assert_array_equal(
        lengths, network.node_lat[network.edge_from] - network.node_lat[network.edge_to]
    )
    assert loaded.edge_length.sum() == pytest.approx(network.edge_length.sum())
    assert loaded.covers(network.node(3))


def test_extreme_values_round_trip(store: Store) -> None:
    network = StreetNetwork(
        name="edge cases: ünïcode / 🚲",
        node_lat=np.array([-90.0, 90.0, 0.1 + 0.2, -0.0, 5e-324]),
        node_lon=np.array([-180.0, 180.0, np.nextafter(13.4, 14.0), 1e-300, -7.25]),
        edge_from=np.array([0, 4, np.iinfo(np.int32).max, np.iinfo(np.int32).min], np.int32),
        edge_to=np.array([4, 0, 1, -1], np.int32),
        edge_length=np.array([1e-9, 1e9, np.pi, np.inf]),
        edge_class=np.array([0, 4, 255, 1], np.uint8),
        edge_access=np.array([0, 7, 128, 3], np.uint8),
        source="",
        imported_at=None,
    )
    store.save_network(network)
    [loaded] = store.load_networks()
    assert_same_network(loaded, network)
    assert np.signbit(loaded.node_lat[3])


def test_an_empty_network_round_trips(store: Store) -> None:
    empty = make_network("empty", nodes=0, edges=0, imported_at=None, source="")
    store.save_network(empty)
    [loaded] = store.load_networks()
    assert_same_network(loaded, empty)
    assert store.network_summaries() == [
        NetworkSummary("empty", 0, 0, (0.0, 0.0, 0.0, 0.0), "", None)
    ]


def test_saving_replaces_a_network_of_the_same_name(store: Store) -> None:
    other = make_network("paris", center=Point(48.8566, 2.3522), seed=9)
    first = make_network(nodes=50, edges=120, seed=1)
    second = make_network(
        nodes=30, edges=70, seed=2, source="berlin-2.osm.pbf", imported_at=IMPORTED + timedelta(1)
    )
    store.save_network(first)
    store.save_network(other)
    store.save_network(second)

    loaded = store.load_networks()
    assert [n.name for n in loaded] == ["berlin", "paris"]
    assert_same_network(loaded[0], second)
    assert_same_network(loaded[1], other)
    assert store.network_summaries() == [summary_of(second), summary_of(other)]


def test_networks_are_listed_by_name(store: Store) -> None:
    names = ["wien", "Zürich", "amsterdam", "berlin"]
    for seed, name in enumerate(names):
        store.save_network(make_network(name, seed=seed, nodes=5 + seed, edges=3 + seed))
    assert [n.name for n in store.load_networks()] == sorted(names)
    assert [s.name for s in store.network_summaries()] == sorted(names)


def test_summaries(store: Store) -> None:
    berlin = make_network(nodes=40, edges=90)
    sydney = make_network(
        "sydney",
        nodes=7,
        edges=11,
        center=Point(-33.8688, 151.2093),
        source="australia.osm.pbf",
        imported_at=datetime(2025, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC),
    )
    store.save_network(sydney)
    store.save_network(berlin)
    summaries = store.network_summaries()
    assert summaries == [summary_of(berlin), summary_of(sydney)]
    south, west, north, east = summaries[1].bounds
    assert (south, west, north, east) == (
        sydney.node_lat.min(),
        sydney.node_lon.min(),
        sydney.node_lat.max(),
        sydney.node_lon.max(),
    )
    assert (summaries[1].nodes, summaries[1].edges) == (7, 11)


def test_delete(store: Store) -> None:
    store.save_network(make_network("berlin"))
    store.save_network(make_network("paris", seed=3))
    assert store.delete_network("berlin") is True
    assert store.delete_network("berlin") is False
    assert store.delete_network("nowhere") is False
    assert [n.name for n in store.load_networks()] == ["paris"]
    assert [s.name for s in store.network_summaries()] == ["paris"]
    store.save_network(make_network("berlin", seed=4))  # a deleted name can be used again
    assert [s.name for s in store.network_summaries()] == ["berlin", "paris"]


# -- SQLite only ------------------------------------------------------------------------------


def test_networks_survive_reopening_the_file(tmp_path: Path) -> None:
    path = tmp_path / "networks.db"
    berlin = make_network(nodes=2000, edges=5000)
    paris = make_network("paris", seed=5, imported_at=None)
    store = SqliteStore(path)
    try:
        store.save_network(berlin)
        store.save_network(paris)
    finally:
        store.close()

    reopened = SqliteStore(path)
    try:
        loaded = reopened.load_networks()
        assert [n.name for n in loaded] == ["berlin", "paris"]
        assert_same_network(loaded[0], berlin)
        assert_same_network(loaded[1], paris)
        assert reopened.network_summaries() == [summary_of(berlin), summary_of(paris)]
        # Loaded arrays are the process's own: numpy may change them in place.
        loaded[0].edge_length[:] *= 2
        np.testing.assert_array_equal(loaded[0].edge_length, berlin.edge_length * 2)
    finally:
        reopened.close()


def test_a_wrong_dtype_is_refused_and_keeps_the_stored_network(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "dtypes.db")
    try:
        kept = make_network()
        store.save_network(kept)
        wrong = make_network(seed=3)
        assert wrong.edge_name is not None
        for name, bad in [
            ("edge_from", wrong.edge_from.astype(np.int64)),
            ("node_lat", wrong.node_lat.astype(np.float32)),
            ("edge_class", wrong.edge_class.astype(np.int8)),
            ("edge_access", wrong.edge_access.reshape(-1, 1)),
            ("edge_name", wrong.edge_name.astype(np.int64)),
        ]:
            arrays = {a: getattr(wrong, a) for a in ARRAYS} | {name: bad}
            with pytest.raises(ValueError, match=name):
                store.save_network(
                    StreetNetwork("berlin", street_names=wrong.street_names, **arrays)
                )
        [loaded] = store.load_networks()
        assert_same_network(loaded, kept)
    finally:
        store.close()


def test_big_endian_and_strided_arrays_are_stored_by_value(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "layout.db")
    try:
        native = make_network()
        swapped = StreetNetwork(
            "berlin",
            node_lat=native.node_lat.astype(">f8"),
            node_lon=np.repeat(native.node_lon, 2)[::2],  # not contiguous
            edge_from=native.edge_from.astype(">i4"),
            edge_to=native.edge_to,
            edge_length=native.edge_length.astype(">f8"),
            edge_class=native.edge_class,
            edge_access=native.edge_access,
            edge_traffic=native.edge_traffic.astype(">f8"),
            edge_name=native.edge_name.astype(">i4") if native.edge_name is not None else None,
            street_names=native.street_names,
            areas=None
            if native.areas is None
            else NetworkAreas(
                kind=native.areas.kind,
                ring_end=native.areas.ring_end.astype(">i4"),
                lat=native.areas.lat.astype(">f8"),
                lon=np.repeat(native.areas.lon, 2)[::2],
            ),
            source=native.source,
            imported_at=native.imported_at,
        )
        store.save_network(swapped)
        [loaded] = store.load_networks()
        assert_same_network(loaded, native)
    finally:
        store.close()


def test_a_network_stored_before_traffic_was_recorded_loads_with_class_defaults(
    tmp_path: Path,
) -> None:
    store = SqliteStore(tmp_path / "older.db")
    try:
        network = make_network()
        store.save_network(network)
    finally:
        store.close()
    with sqlite3.connect(tmp_path / "older.db") as older:  # as a database before m006 left it
        older.execute("UPDATE street_networks SET edge_traffic = NULL")
    older.close()
    store = SqliteStore(tmp_path / "older.db")
    try:
        [loaded] = store.load_networks()
    finally:
        store.close()
    expected = [TRAFFIC_BY_CLASS[RoadClass(c)] for c in network.edge_class]
    np.testing.assert_array_equal(loaded.edge_traffic, expected)
    np.testing.assert_array_equal(loaded.edge_class, network.edge_class)


def test_traffic_must_have_one_value_per_edge() -> None:
    network = make_network()
    arrays = {name: getattr(network, name) for name in ARRAYS if name != "edge_name"}
    with pytest.raises(ValueError, match="edge_traffic"):
        StreetNetwork("berlin", **arrays | {"edge_traffic": network.edge_traffic[1:]})
    without = {name: array for name, array in arrays.items() if name != "edge_traffic"}
    assert StreetNetwork("berlin", **without).edge_traffic.tolist() == [
        TRAFFIC_BY_CLASS[RoadClass(c)] for c in network.edge_class
    ]


def test_a_network_without_street_names_round_trips_without_them(store: Store) -> None:
    network = attrs.evolve(make_network(), edge_name=None, street_names=())
    store.save_network(network)
    [loaded] = store.load_networks()
    assert loaded.edge_name is None
    assert loaded.street_names == ()
    assert loaded.street_name(0) is None


def test_a_network_stored_before_names_were_kept_loads_without_them(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "older.db")
    try:
        store.save_network(make_network())
    finally:
        store.close()
    with sqlite3.connect(tmp_path / "older.db") as older:  # as a database before m009 left it
        older.execute("UPDATE street_networks SET edge_name = NULL, street_names = NULL")
    older.close()
    store = SqliteStore(tmp_path / "older.db")
    try:
        [loaded] = store.load_networks()
    finally:
        store.close()
    assert loaded.edge_name is None
    assert loaded.street_names == ()


def test_street_names_are_looked_up_per_edge_and_must_be_indexable() -> None:
    network = make_network()
    assert network.edge_name is not None
    for edge in range(network.edge_count):
        index = int(network.edge_name[edge])
        assert network.street_name(edge) == (None if index < 0 else STREET_NAMES[index])
    with pytest.raises(ValueError, match="edge_name"):
        attrs.evolve(network, street_names=STREET_NAMES[:2])
    with pytest.raises(ValueError, match="edge_name"):
        attrs.evolve(network, edge_name=network.edge_name[1:])


def test_a_street_name_is_one_non_empty_line() -> None:
    network = make_network()
    for bad in ("a\nb", "a\rb", ""):
        with pytest.raises(ValueError, match="one non-empty line"):
            attrs.evolve(network, street_names=(bad, *STREET_NAMES[1:]))


def test_a_network_without_areas_round_trips_without_them(store: Store) -> None:
    network = attrs.evolve(make_network(), areas=None)
    store.save_network(network)
    [loaded] = store.load_networks()
    assert loaded.areas is None
    # And one whose area had nothing inside the network keeps its empty areas.
    store.save_network(attrs.evolve(network, areas=NetworkAreas.of([])))
    [loaded] = store.load_networks()
    assert loaded.areas is not None
    assert loaded.areas.ring_count == 0


def test_a_network_stored_before_areas_were_kept_loads_without_them(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "older.db")
    try:
        store.save_network(make_network())
    finally:
        store.close()
    with sqlite3.connect(tmp_path / "older.db") as older:  # as a database before m011 left it
        older.execute(
            "UPDATE street_networks SET area_kind = NULL, area_ring_end = NULL, "
            "area_lat = NULL, area_lon = NULL"
        )
    older.close()
    store = SqliteStore(tmp_path / "older.db")
    try:
        [loaded] = store.load_networks()
    finally:
        store.close()
    assert loaded.areas is None
    assert loaded.street_names == STREET_NAMES


def test_areas_are_rings_of_at_least_three_points_of_a_known_kind() -> None:
    areas = make_areas(np.random.default_rng(1), BERLIN)
    rings = list(areas.rings())
    assert [kind for kind, _, _ in rings] == [AreaKind.WATER, AreaKind.PARK, AreaKind.PARK]
    np.testing.assert_array_equal(np.concatenate([lat for _, lat, _ in rings]), areas.lat)
    np.testing.assert_array_equal(np.concatenate([lon for _, _, lon in rings]), areas.lon)
    with pytest.raises(ValueError, match="ring_end"):
        NetworkAreas.of([(AreaKind.WATER, [52.5, 52.6], [13.4, 13.5])])
    with pytest.raises(ValueError, match="kind"):
        attrs.evolve(areas, kind=np.array([0, 1, 7], dtype=np.uint8))
    with pytest.raises(ValueError, match="one lon per lat"):
        attrs.evolve(areas, lon=areas.lon[1:])
    with pytest.raises(ValueError, match="ring_end"):
        attrs.evolve(areas, ring_end=areas.ring_end - 1)

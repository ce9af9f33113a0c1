"""`GET /explore/networks/{name}/tiles/{version}/{z}/{x}/{y}`: the streets of one map tile,
gzipped, cached by the browser for good, made once per tile and limited per client address."""

from __future__ import annotations

import gzip
import math
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import anyio
import attrs
import msgspec
import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from litestar.testing import TestClient

import cleanair_http.controllers.explore as explore
import cleanair_http.explore.tiles as tiles
from cleanair_core import CleanAir, ManualClock, Policy
from cleanair_core.errors import RateLimited
from cleanair_core.ports import Sources
from cleanair_core.routes.network import AreaKind, NetworkAreas, RoadClass, StreetNetwork
from cleanair_http.app import create_app
from cleanair_http.explore.tiles import (
    MAX_ZOOM,
    UNIT,
    StepRect,
    edges_meeting,
    encode_tile,
    index_network,
    shown_classes,
    tile_bounds,
)
from cleanair_runtime.composition.bootstrap import DEFAULT_NETWORK_FILE, DEFAULT_NETWORK_NAME
from cleanair_sources.osm_import import import_network
from cleanair_sources.street_router import LoadedNetworks
from support.fakes import FakeSource
from support.http import Client
from support.networks import grid


def arterial_row(a: tuple[int, int], b: tuple[int, int]) -> RoadClass:
    return RoadClass.ARTERIAL if a[0] == b[0] == 1 else RoadClass.LOCAL


#: 3 x 4 nodes about 110 m apart, the middle row arterial: inside one tile at zoom 14.
NETWORK = grid(3, 4, road_class=arterial_row, name="testgrid")
#: A tile holding the whole of NETWORK.
WHOLE = 14


def tile_of(lat: float, lon: float, z: int) -> tuple[int, int]:
    """The (x, y) of the tile at zoom `z` holding the point (the usual web-map formula)."""
    n = 2**z
    y = (1 - math.asinh(math.tan(math.radians(lat))) / math.pi) / 2 * n
    return int((lon + 180) / 360 * n), int(y)


def tiles_over(network: StreetNetwork, z: int) -> Iterator[tuple[int, int]]:
    south, west, north, east = network.bounds
    x0, y0 = tile_of(north, west, z)
    x1, y1 = tile_of(south, east, z)
    for x in range(x0, x1 + 1):
        for y in range(y0, y1 + 1):
            yield x, y


@pytest.fixture
def networks() -> LoadedNetworks:
    return LoadedNetworks([NETWORK])


@pytest.fixture
def sources(networks: LoadedNetworks) -> Sources:
    return Sources(FakeSource(), networks=networks)


def template(client: Client, name: str = "testgrid") -> str:
    listed = client.get("/explore/networks").json()["networks"]
    found: str = next(n["tiles"] for n in listed if n["name"] == name)
    return found


def tile_path(client: Client, z: int, x: int, y: int, name: str = "testgrid") -> str:
    return template(client, name).format(z=z, x=x, y=y)


def whole_tile(client: Client) -> str:
    x, y = tile_of(*NETWORK.bounds[:2], WHOLE)
    return tile_path(client, WHOLE, x, y)


def edges_drawn(tile: dict[str, Any]) -> set[tuple[str, frozenset[tuple[float, float]]]]:
    """The tile's edges as (road class, end points in degrees rounded to UNIT)."""
    lat0, lon0 = tile["origin"]
    nodes = tile["nodes"]

    def point(i: int) -> tuple[float, float]:
        return (round(lat0 + nodes[2 * i] * UNIT, 5), round(lon0 + nodes[2 * i + 1] * UNIT, 5))

    return {
        (name, frozenset({point(pairs[i]), point(pairs[i + 1])}))
        for name, pairs in tile["roads"].items()
        for i in range(0, len(pairs), 2)
    }


def network_edges(network: StreetNetwork) -> set[tuple[str, frozenset[tuple[float, float]]]]:
    lat, lon = network.node_lat.tolist(), network.node_lon.tolist()
    return {
        (
            tiles.ROAD_CLASSES[c],
            frozenset({(round(lat[a], 5), round(lon[a], 5)), (round(lat[b], 5), round(lon[b], 5))}),
        )
        for a, b, c in zip(
            network.edge_from.tolist(),
            network.edge_to.tolist(),
            network.edge_class.tolist(),
            strict=True,
        )
    }


def test_a_tile_holds_the_streets_of_its_area_gzipped_and_for_good(client: Client) -> None:
    path = whole_tile(client)
    raw = client.get(path, headers={"Accept-Encoding": "gzip"})
    assert raw.status_code == 200
    assert raw.headers["content-type"] == "application/json"
    assert raw.headers["content-encoding"] == "gzip"
    assert raw.headers["cache-control"] == "public, max-age=31536000, immutable"
    assert "Accept-Encoding" in raw.headers["vary"]
    tile = raw.json()
    assert edges_drawn(tile) == network_edges(NETWORK)
    assert set(tile["roads"]) == {"local", "arterial"}
    assert (tile["names"], tile["road_names"], tile["omitted"]) == ([], {}, [])
    assert (tile["water"], tile["parks"]) == ([], [])


def test_a_client_without_gzip_gets_the_same_json_unpacked(client: Client) -> None:
    path = whole_tile(client)
    with client.stream("GET", path, headers={"Accept-Encoding": "gzip"}) as zipped:
        packed = b"".join(zipped.iter_raw())
    for refusing in ("identity", "gzip;q=0, identity", "br"):
        plain = client.get(path, headers={"Accept-Encoding": refusing})
        assert plain.status_code == 200
        assert "content-encoding" not in plain.headers
        assert plain.content == gzip.decompress(packed)
    assert explore.accepts_gzip("deflate, GZIP;q=0.5")
    assert explore.accepts_gzip("*")
    assert not explore.accepts_gzip("gzip;q=0")
    assert not explore.accepts_gzip("")


def test_a_tile_revalidates_with_its_weak_etag(client: Client) -> None:
    path = whole_tile(client)
    first = client.get(path)
    etag = first.headers["etag"]
    assert etag.startswith('W/"')
    for sent in (etag, etag.removeprefix("W/"), f'"other", {etag}', "*"):
        again = client.get(path, headers={"If-None-Match": sent})
        assert (again.status_code, again.content) == (304, b""), sent
        assert again.headers["etag"] == etag
    assert client.get(path, headers={"If-None-Match": 'W/"other"'}).status_code == 200


def test_each_tile_is_made_once(client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[tuple[int, int, int]] = []

    def counting(index: Any, z: int, x: int, y: int) -> Any:
        made.append((z, x, y))
        return encode_tile(index, z, x, y)

    monkeypatch.setattr(explore, "encode_tile", counting)
    path = whole_tile(client)
    for _ in range(3):
        assert client.get(path).status_code == 200
    x, y = tile_of(*NETWORK.bounds[:2], WHOLE + 1)
    assert client.get(tile_path(client, WHOLE + 1, x, y)).status_code == 200
    assert made == [(WHOLE, *tile_of(*NETWORK.bounds[:2], WHOLE)), (WHOLE + 1, x, y)]


@pytest.mark.parametrize(
    "address",
    [
        "/explore/networks/nowhere/tiles/{version}/14/0/0",  # no such network
        "/explore/networks/testgrid/tiles/0123456789abcdef01234567/{z}/{x}/{y}",  # old version
        "/explore/networks/testgrid/tiles/{version}/14/0/0",  # far from the network
    ],
)
def test_a_tile_of_no_loaded_network_is_not_found(client: Client, address: str) -> None:
    version = template(client).split("/")[5]
    x, y = tile_of(*NETWORK.bounds[:2], WHOLE)
    answer = client.get(address.format(version=version, z=WHOLE, x=x, y=y))
    assert answer.status_code == 404
    assert answer.json() == {"detail": "Not found"}


def test_a_network_changed_since_the_index_was_read_has_new_tiles(
    client: Client, networks: LoadedNetworks
) -> None:
    old = whole_tile(client)
    networks.replace([grid(3, 4, name="testgrid")])  # reimported: no arterial any more
    assert client.get(old).status_code == 404
    assert set(client.get(whole_tile(client)).json()["roads"]) == {"local"}


@pytest.mark.parametrize(
    ("z", "x", "y"),
    [
        (MAX_ZOOM + 1, 0, 0),
        (3, 8, 0),
        (3, 0, 8),
        (3, -1, 0),
        (-1, 0, 0),
        ("a", 0, 0),
        (3, 0, "1.5"),
    ],
)
def test_an_address_that_is_no_tile_is_unprocessable(
    client: Client, z: Any, x: Any, y: Any
) -> None:
    version = template(client).split("/")[5]
    answer = client.get(f"/explore/networks/testgrid/tiles/{version}/{z}/{x}/{y}")
    assert answer.status_code == 422
    assert answer.json() == {"detail": "Request validation failed"}


@pytest.fixture
def strict(core: CleanAir, clock: ManualClock, sources: Sources) -> CleanAir:
    """The test core's store under a policy of 3 explorer requests a minute per address."""
    policy = Policy(explore_requests_per_minute=3)
    return CleanAir(
        core.store, core.keys, policy, clock, sources=sources, store_calls=core.store_calls
    )


@pytest.fixture
def limited(strict: CleanAir) -> Iterator[Client]:
    with TestClient(create_app(strict)) as client:
        yield client


def test_over_the_per_address_limit_the_answer_is_429_until_the_minute_ends(
    limited: Client, clock: ManualClock
) -> None:
    clock.advance(0)
    at = clock.now()
    path = whole_tile(limited)  # the index counts too: 1
    assert limited.get(path).status_code == 200  # 2
    assert limited.get("/explore/networks").status_code == 200  # 3
    refused = limited.get(path)
    assert refused.status_code == 429
    assert refused.json() == {"detail": "Rate limit exceeded"}
    assert int(refused.headers["retry-after"]) == 60 - at.second
    assert limited.get("/explore/networks").status_code == 429
    # The page and its scripts are not counted: a person can always see why.
    assert limited.get("/explore").status_code == 200
    clock.advance(60)
    assert limited.get(path).status_code == 200


def test_the_limit_counts_each_address_on_its_own(limited: Client, strict: CleanAir) -> None:
    for _ in range(3):
        assert limited.get("/explore/networks").status_code == 200
    assert limited.get("/explore/networks").status_code == 429
    # Another address's allowance is untouched; the test client's is spent in the store that
    # every process shares, not in the app.
    strict.count_explore_request("192.0.2.7")
    with pytest.raises(RateLimited):
        strict.count_explore_request("testclient")


def test_the_shipped_network_is_whole_in_its_street_level_tiles() -> None:
    helsinki = import_network(DEFAULT_NETWORK_FILE, DEFAULT_NETWORK_NAME)
    index = index_network(helsinki)
    seen: set[int] = set()
    total = 0
    for x, y in tiles_over(helsinki, 15):
        rect = index.rect(15, x, y)
        seen.update(edges_meeting(index, rect).tolist())
        total += len(encode_tile(index, 15, x, y).gzipped)
    assert seen == set(range(helsinki.edge_count))
    # About 50 kB gzipped for the whole city in nine tiles; the old single answer was 37 kB.
    assert total < 80_000
    names: set[str] = set()
    rings: dict[str, set[tuple[int, ...]]] = {"water": set(), "parks": set()}
    for x, y in tiles_over(helsinki, 13):
        tile = msgspec.json.decode(gzip.decompress(encode_tile(index, 13, x, y).gzipped))
        names |= {tile["names"][i] for i in tile["road_names"].get("arterial", []) if i >= 0}
        lat0, lon0 = tile["origin"]
        for kind, found in rings.items():
            # The same ring in two tiles counts from two origins: in degrees it is one.
            found |= {
                tuple(round((lat0 if i % 2 == 0 else lon0) / UNIT) + v for i, v in enumerate(r))
                for r in tile[kind]
            }
    assert {"Mannerheimintie", "Bulevardi"} <= names
    assert len(rings["water"]) >= 3
    assert len(rings["parks"]) >= 50


def test_names_are_those_of_the_tiles_edges() -> None:
    cols = 4
    edges = list(zip(NETWORK.edge_from.tolist(), NETWORK.edge_to.tolist(), strict=True))

    def name(a: int, b: int) -> int:
        # The arterial row named 1 (Kaivokatu), the first column's edges 0, the rest unnamed.
        if a // cols == b // cols == 1:
            return 1
        return 0 if a % cols == b % cols == 0 else -1

    named = attrs.evolve(
        NETWORK,
        edge_name=np.array([name(a, b) for a, b in edges], dtype=np.int32),
        street_names=("Mannerheimintie", "Kaivokatu", "Unused"),
    )
    index = index_network(named)
    x, y = tile_of(*NETWORK.bounds[:2], WHOLE)
    tile = tiles.build_tile(index, WHOLE, x, y)
    assert tile.names == ["Mannerheimintie", "Kaivokatu"]
    assert tile.road_names["arterial"] == [1, 1, 1]
    assert sorted(tile.road_names["local"]) == [-1] * 12 + [0, 0]


def test_too_many_edges_leave_the_lowest_classes_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tiles, "MAX_TILE_EDGES", 5)  # the 3 arterial edges fit, 14 local do not
    x, y = tile_of(*NETWORK.bounds[:2], WHOLE)
    tile = tiles.build_tile(index_network(NETWORK), WHOLE, x, y)
    assert (set(tile.roads), tile.omitted) == ({"arterial"}, ["local"])
    assert len(tile.roads["arterial"]) == 2 * 3
    # Only nodes of the edges shown are sent.
    assert len(tile.nodes) == 2 * 4


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 30), min_size=5, max_size=5), st.integers(0, 40))
def test_a_tile_shows_the_highest_classes_that_fit(counts: list[int], budget: int) -> None:
    import cleanair_http.explore.tiles as module

    original = module.MAX_TILE_EDGES
    module.MAX_TILE_EDGES = budget
    try:
        shown = shown_classes(counts)
    finally:
        module.MAX_TILE_EDGES = original
    # The top classes, contiguous from the highest, fitting, and one more would not.
    assert shown == list(range(len(counts) - len(shown), len(counts)))
    assert sum(counts[c] for c in shown) <= budget
    if len(shown) < len(counts):
        assert sum(counts[len(counts) - len(shown) - 1 :]) > budget


def meets(a: tuple[int, int], b: tuple[int, int], rect: StepRect) -> bool:
    """Whether the segment a-b meets the closed rectangle: Liang-Barsky clipping, exactly."""
    low, high = Fraction(0), Fraction(1)
    d_lat, d_lon = b[0] - a[0], b[1] - a[1]
    for p, q in (
        (-d_lat, a[0] - rect.south),
        (d_lat, rect.north - a[0]),
        (-d_lon, a[1] - rect.west),
        (d_lon, rect.east - a[1]),
    ):
        if p == 0:
            if q < 0:
                return False
            continue
        t = Fraction(q, p)
        if p < 0:
            low = max(low, t)
        else:
            high = min(high, t)
        if low > high:
            return False
    return True


steps = st.integers(-40, 40)
nudges = st.integers(-10, 10)


@settings(max_examples=300, deadline=None)
@given(
    # Mostly short edges, as streets are, some longer than a cell.
    st.lists(st.tuples(steps, steps, nudges, nudges), min_size=1, max_size=30),
    st.tuples(steps, steps, st.integers(0, 30), st.integers(0, 30)),
    st.sampled_from([3, 8, 1024]),
)
# Short edges filed in the cell south (west) of the rectangle's first, reaching into it.
@example([(0, 0, 0, 0), (2, 0, 2, 1), (5, 5, 0, 0)], (3, 0, 2, 2), 3)
@example([(0, 0, 0, 0), (0, 2, 1, 2), (5, 5, 0, 0)], (0, 3, 2, 2), 3)
def test_a_tile_holds_exactly_the_edges_meeting_its_rectangle(
    segments: list[tuple[int, int, int, int]], box: tuple[int, int, int, int], cell: int
) -> None:
    """Whatever the cells the edges are filed under (some edges longer than a cell, some
    rectangles reaching past the network), exactly the edges meeting the rectangle."""
    lat = [v for s in segments for v in (s[0], s[0] + s[2])]
    lon = [v for s in segments for v in (s[1], s[1] + s[3])]
    count = len(segments)
    network = StreetNetwork(
        "random",
        60.0 + np.array(lat, dtype=float) * UNIT,
        24.0 + np.array(lon, dtype=float) * UNIT,
        np.arange(0, 2 * count, 2, dtype=np.int32),
        np.arange(1, 2 * count, 2, dtype=np.int32),
        np.ones(count),
        np.full(count, RoadClass.LOCAL, dtype=np.uint8),
        np.ones(count, dtype=np.uint8),
    )
    index = index_network(network, cell)
    south, west, height, width = box
    rect = StepRect(south, west, south + height, west + width)
    expected = [
        edge
        for edge in range(count)
        if meets(
            (int(index.a_lat[edge]), int(index.a_lon[edge])),
            (int(index.b_lat[edge]), int(index.b_lon[edge])),
            rect,
        )
    ]
    assert edges_meeting(index, rect).tolist() == expected


def test_a_tiles_rectangle_is_its_square_widened_to_whole_steps() -> None:
    index = index_network(NETWORK)
    for z, x, y in [(WHOLE, *tile_of(*NETWORK.bounds[:2], WHOLE)), (0, 0, 0), (MAX_ZOOM, 5, 7)]:
        rect = index.rect(z, x, y)
        south, west, north, east = tile_bounds(z, x, y)
        lat0, lon0 = index.origin
        assert lat0 + rect.south * UNIT <= south < lat0 + (rect.south + 1) * UNIT
        assert lat0 + (rect.north - 1) * UNIT < north <= lat0 + rect.north * UNIT
        assert lon0 + rect.west * UNIT <= west < lon0 + (rect.west + 1) * UNIT
        assert lon0 + (rect.east - 1) * UNIT < east <= lon0 + rect.east * UNIT
    assert tile_bounds(0, 0, 0) == pytest.approx(
        (-tiles.MAX_LATITUDE, -180, tiles.MAX_LATITUDE, 180)
    )


def test_water_and_parks_come_whole_where_their_box_meets_the_tile() -> None:
    south, west, north, east = NETWORK.bounds
    mid_lat, mid_lon = (south + north) / 2, (west + east) / 2
    with_areas = attrs.evolve(
        NETWORK,
        areas=NetworkAreas.of(
            [
                (
                    AreaKind.WATER,
                    [mid_lat, mid_lat, mid_lat + 0.0002],
                    [mid_lon, mid_lon + 0.0003, mid_lon + 0.0003],
                ),
                (
                    AreaKind.PARK,
                    [south, south, north, north, north + 0.4 * UNIT],
                    [west, mid_lon, mid_lon, west, west],
                ),
                # Far to the east: in no tile of the network's own.
                (AreaKind.PARK, [south, south, north], [east + 1, east + 1.001, east + 1.001]),
                # Rounds to fewer than three distinct steps: never sent.
                (AreaKind.WATER, [south, south, south], [west, west, west + UNIT / 4]),
            ]
        ),
    )
    index = index_network(with_areas)
    x, y = tile_of(south, west, WHOLE)
    tile = tiles.build_tile(index, WHOLE, x, y)
    lat0, lon0 = tile.origin

    def degrees(ring: list[int]) -> list[tuple[float, float]]:
        return [
            (round(lat0 + ring[i] * UNIT, 5), round(lon0 + ring[i + 1] * UNIT, 5))
            for i in range(0, len(ring), 2)
        ]

    (water,) = tile.water
    assert degrees(water) == [
        (round(mid_lat, 5), round(mid_lon, 5)),
        (round(mid_lat, 5), round(mid_lon + 0.0003, 5)),
        (round(mid_lat + 0.0002, 5), round(mid_lon + 0.0003, 5)),
    ]
    (park,) = tile.parks  # the far one is not in it; the point a step from its neighbour is once
    assert len(park) == 2 * 4


def test_the_cache_keeps_the_tiles_last_asked_for_within_its_budget(tmp_path: Path) -> None:
    index = index_network(NETWORK)
    x, y = tile_of(*NETWORK.bounds[:2], WHOLE)
    one = len(encode_tile(index, WHOLE, x, y).gzipped)
    cache = explore.TileCache(budget=2 * one + one // 2)  # two tiles of about this size
    made: list[int] = []

    async def ask(z: int) -> None:
        before = len(cache._tiles)
        await cache.tile(index, z, *tile_of(*NETWORK.bounds[:2], z))
        made.append(len(cache._tiles) - before)

    async def scenario() -> list[tuple[str, int, int, int]]:
        for z in (WHOLE, WHOLE - 1, WHOLE, WHOLE - 2):
            await ask(z)
        return list(cache._tiles)

    kept = anyio.run(scenario)
    # WHOLE asked again stays; WHOLE - 1, least recently used, went for WHOLE - 2.
    assert [key[1] for key in kept] == [WHOLE, WHOLE - 2]
    assert made == [1, 1, 0, 0]


def test_each_network_is_indexed_once_while_it_stays_loaded(
    client: Client, networks: LoadedNetworks, monkeypatch: pytest.MonkeyPatch
) -> None:
    indexed: list[str] = []

    def counting(network: StreetNetwork) -> Any:
        indexed.append(network.name)
        return index_network(network)

    monkeypatch.setattr(explore, "index_network", counting)
    other = grid(2, 2, name="other")
    networks.replace([NETWORK, other])
    x, y = tile_of(*NETWORK.bounds[:2], WHOLE)
    for name in ("testgrid", "other", "testgrid", "other"):
        assert client.get(tile_path(client, WHOLE, x, y, name)).status_code == 200
    assert sorted(indexed) == ["other", "testgrid"]

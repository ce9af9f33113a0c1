"""`GET /explore` and its assets and geometry: public, outside `/v1` and the OpenAPI document,
served from package data, referencing no other host, and the geometry true to the loaded
networks. The page's behaviour in a browser is tested in tests/browser."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

import attrs
import msgspec
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from litestar.testing import TestClient

import cleanair_http.controllers.explore as explore
from cleanair_core import CleanAir
from cleanair_core.ports import Sources
from cleanair_core.routes.network import AreaKind, NetworkAreas, RoadClass, StreetNetwork
from cleanair_http.app import create_app
from cleanair_http.bootstrap import DEFAULT_NETWORK_FILE, DEFAULT_NETWORK_NAME
from cleanair_http.explore.geometry import (
    ROAD_CLASSES,
    UNIT,
    encode_geometry,
    network_geometry,
    polylines,
)
from cleanair_sources.osm_import import import_network
from cleanair_sources.street_router import LoadedNetworks
from cleanair_storage.sqlite import SqliteStore
from support.fakes import FakeGeolocator, FakeIp, FakeNamer, FakeSource
from support.http import Client, bearer, pair
from support.networks import grid

ASSETS = Path(explore.__file__).parent.parent / "explore" / "assets"
#: The SVG namespace name: an identifier in the markup, never fetched.
SVG_NAMESPACE = "http://www.w3.org/2000/svg"


def arterial_row(a: tuple[int, int], b: tuple[int, int]) -> RoadClass:
    return RoadClass.ARTERIAL if a[0] == b[0] == 1 else RoadClass.LOCAL


def inner_crossing(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[1] == b[1] in (1, 2)


#: Three east-west streets (the middle one arterial) joined at both ends only: the inner
#: nodes of each street are where its polyline runs on.
NETWORK = grid(3, 4, road_class=arterial_row, skip=inner_crossing, name="testgrid")


@pytest.fixture
def networks() -> LoadedNetworks:
    return LoadedNetworks([NETWORK])


@pytest.fixture
def sources(networks: LoadedNetworks) -> Sources:
    return Sources(FakeSource(), FakeGeolocator(None), FakeIp(), FakeNamer(), networks=networks)


def referenced_assets(page: str) -> set[str]:
    return set(re.findall(r'(?:src|href)="(/explore/assets/[^"]+)"', page))


def test_the_page_is_served_without_a_token_with_a_strict_policy(client: Client) -> None:
    page = client.get("/explore")
    assert page.status_code == 200
    assert page.headers["content-type"] == "text/html; charset=utf-8"
    policy = page.headers["content-security-policy"]
    assert "default-src 'none'" in policy
    assert "connect-src 'self'" in policy
    assert "script-src 'self'" in policy
    assert referenced_assets(page.text) == {
        "/explore/assets/explore.js",
        "/explore/assets/explore.css",
        "/explore/assets/conditions.js",
        "/explore/assets/conditions.css",
        "/explore/assets/departures.js",
        "/explore/assets/departures.css",
        "/explore/assets/icon.svg",
    }


@pytest.mark.parametrize(
    ("name", "media_type"),
    [
        ("explore.js", "text/javascript; charset=utf-8"),
        ("explore.css", "text/css; charset=utf-8"),
        ("conditions.js", "text/javascript; charset=utf-8"),
        ("conditions.css", "text/css; charset=utf-8"),
        ("departures.js", "text/javascript; charset=utf-8"),
        ("departures.css", "text/css; charset=utf-8"),
        ("icon.svg", "image/svg+xml"),
    ],
)
def test_each_asset_is_served_from_package_data(client: Client, name: str, media_type: str) -> None:
    served = client.get(f"/explore/assets/{name}")
    assert served.status_code == 200
    assert served.headers["content-type"] == media_type
    assert served.headers["x-content-type-options"] == "nosniff"
    assert served.content == (ASSETS / name).read_bytes()


@pytest.mark.parametrize(
    "name", ["index.html", "home.html", "missing.js", "..%2Fcontrollers%2Fexplore.py"]
)
def test_only_the_public_assets_are_served(client: Client, name: str) -> None:
    assert client.get(f"/explore/assets/{name}").status_code == 404


def test_no_served_asset_references_another_host(client: Client) -> None:
    pages = [client.get("/explore").text, client.get("/").text]
    loaded = {path for page in pages for path in referenced_assets(page)}
    served = [*pages, *(client.get(path).text for path in loaded)]
    served.append(client.get("/explore/networks").text)
    for text in served:
        urls = set(re.findall(r"""(?:https?:)?//[\w.-]+\.[a-z]{2,}[^\s"'<>)]*""", text))
        assert urls <= {SVG_NAMESPACE}, urls
        assert "@import" not in text
    # Every file of the package's assets is one the pages load (nothing unreviewed ships).
    assert {path.name for path in ASSETS.iterdir()} == {"index.html", "home.html"} | {
        path.rsplit("/", 1)[1] for path in loaded
    }


def test_the_page_revalidates_with_its_etag(client: Client) -> None:
    first = client.get("/explore/assets/explore.js")
    assert first.headers["cache-control"] == "no-cache"
    again = client.get(
        "/explore/assets/explore.js", headers={"If-None-Match": first.headers["etag"]}
    )
    assert again.status_code == 304
    assert again.content == b""
    other = client.get("/explore/assets/explore.js", headers={"If-None-Match": '"other"'})
    assert other.status_code == 200


@pytest.mark.parametrize("path", ["/explore/networks", "/explore/assets/explore.js", "/explore"])
def test_the_etag_is_weak_and_the_same_gzipped_or_plain(
    client: Client, networks: LoadedNetworks, path: str
) -> None:
    """The app gzips answers of 1 KiB or more: one tag for both bodies must be weak, or a
    cache keeping both encodings could answer a range or a revalidation with the wrong one."""
    networks.replace([grid(12, 12, name="big")])  # over 1 KiB, so gzipped
    plain = client.get(path, headers={"Accept-Encoding": "identity"})
    gzipped = client.get(path, headers={"Accept-Encoding": "gzip"})
    assert "content-encoding" not in plain.headers
    assert gzipped.headers["content-encoding"] == "gzip"
    assert plain.content == gzipped.content  # the client undid the gzip
    etag = plain.headers["etag"]
    assert re.fullmatch(r'W/"[0-9a-f]{32}"', etag), etag
    assert gzipped.headers["etag"] == etag
    # If-None-Match compares weakly: the tag with or without W/, alone or in a list.
    strong_form = etag.removeprefix("W/")
    for sent in (etag, strong_form, f'"other", {etag}', "*"):
        again = client.get(path, headers={"If-None-Match": sent, "Accept-Encoding": "gzip"})
        assert (again.status_code, again.content) == (304, b""), sent
        assert again.headers["etag"] == etag
    assert client.get(path, headers={"If-None-Match": 'W/"other"'}).status_code == 200


def test_the_explorer_is_not_in_the_openapi_document(client: Client) -> None:
    paths = client.get("/schema/openapi.json").json()["paths"]
    assert paths
    assert not [path for path in paths if path.startswith("/explore")]


def test_a_token_is_neither_needed_nor_looked_at(client: Client) -> None:
    stale = bearer("ca_tst_" + "A" * 43)
    for path in ("/explore", "/explore/networks", "/explore/assets/explore.js"):
        assert client.get(path).status_code == 200
        assert client.get(path, headers=stale).status_code == 200


def test_reading_the_explorer_costs_no_credits(client: Client, core: CleanAir) -> None:
    token = pair(core, client)
    before = client.get("/v1/quota", headers=bearer(token)).json()
    for path in ("/explore", "/explore/networks"):
        assert client.get(path, headers=bearer(token)).status_code == 200
    assert client.get("/v1/quota", headers=bearer(token)).json() == before


def decoded(network: dict[str, Any]) -> dict[str, list[list[tuple[float, float]]]]:
    """The payload's polylines as (lat, lon) lists by road class."""
    origin_lat, origin_lon = network["origin"]
    unit = network["unit"]
    return {
        name: [
            [
                (origin_lat + line[i] * unit, origin_lon + line[i + 1] * unit)
                for i in range(0, len(line), 2)
            ]
            for line in lines
        ]
        for name, lines in network["roads"].items()
    }


def steps_by_class(network: StreetNetwork) -> Counter[tuple[str, frozenset[tuple[int, int]]]]:
    """The network's edges as (road class, unordered end points in UNIT steps)."""

    def steps(node: int) -> tuple[int, int]:
        south, west, _, _ = network.bounds
        return (
            round((network.node_lat[node] - south) / UNIT),
            round((network.node_lon[node] - west) / UNIT),
        )

    return Counter(
        (ROAD_CLASSES[c], frozenset({steps(int(a)), steps(int(b))}))
        for a, b, c in zip(network.edge_from, network.edge_to, network.edge_class, strict=True)
    )


def payload_steps(network: dict[str, Any]) -> Counter[tuple[str, frozenset[tuple[int, int]]]]:
    return Counter(
        (name, frozenset({(line[i], line[i + 1]), (line[i + 2], line[i + 3])}))
        for name, lines in network["roads"].items()
        for line in lines
        for i in range(0, len(line) - 2, 2)
    )


def test_the_geometry_is_the_loaded_network(client: Client) -> None:
    answer = client.get("/explore/networks")
    assert answer.status_code == 200
    assert answer.headers["content-type"] == "application/json"
    (network,) = answer.json()["networks"]
    assert network["name"] == "testgrid"
    assert network["bounds"] == pytest.approx(list(NETWORK.bounds))
    assert network["unit"] == UNIT
    assert set(network["roads"]) == {"local", "arterial"}
    # Every edge once, in its class; a polyline runs on through the nodes where two edges of
    # its class meet: the arterial street is one, and each outer street with its two end
    # links (as far as the arterial) another.
    assert payload_steps(network) == steps_by_class(NETWORK)
    assert [len(line) // 2 for line in network["roads"]["arterial"]] == [4]
    assert [len(line) // 2 for line in network["roads"]["local"]] == [6, 6]
    points = decoded(network)
    nodes = set(zip(NETWORK.node_lat.tolist(), NETWORK.node_lon.tolist(), strict=True))
    for lines in points.values():
        for line in lines:
            for lat, lon in line:
                assert min(abs(lat - a) + abs(lon - b) for a, b in nodes) <= UNIT


def test_the_geometry_is_encoded_once_and_again_when_the_networks_change(
    client: Client, networks: LoadedNetworks, monkeypatch: pytest.MonkeyPatch
) -> None:
    encoded: list[int] = []

    def counting(loaded: Any) -> Any:
        encoded.append(len(loaded))
        return encode_geometry(loaded)

    monkeypatch.setattr(explore, "encode_geometry", counting)
    first = client.get("/explore/networks")
    second = client.get("/explore/networks", headers={"If-None-Match": first.headers["etag"]})
    assert (second.status_code, second.content) == (304, b"")
    assert second.headers["cache-control"] == "no-cache"
    assert encoded == [1]
    networks.replace([NETWORK, grid(2, 2, name="other")])
    third = client.get("/explore/networks", headers={"If-None-Match": first.headers["etag"]})
    assert third.status_code == 200
    assert [n["name"] for n in third.json()["networks"]] == ["other", "testgrid"]
    assert encoded == [1, 2]


def test_without_networks_the_geometry_is_empty(
    client: Client, networks: LoadedNetworks, core: CleanAir, tmp_path: Path
) -> None:
    networks.replace([])
    answer = client.get("/explore/networks")
    assert (answer.status_code, answer.json()) == (200, {"networks": []})
    # A core without any sources (an embedder's, say) has none either.
    store = SqliteStore(tmp_path / "bare.db")
    try:
        bare = TestClient(create_app(CleanAir(store, core.keys)))
        with bare:
            assert bare.get("/explore/networks").json() == {"networks": []}
    finally:
        store.close()


def test_the_shipped_network_fits_in_a_reasonable_payload() -> None:
    helsinki = import_network(DEFAULT_NETWORK_FILE, DEFAULT_NETWORK_NAME)
    encoded = encode_geometry([helsinki])
    assert len(encoded.body) < 150_000  # about 93 kB for its 6,622 edges

    (network,) = msgspec.json.decode(encoded.body)["networks"]
    assert payload_steps(network) == steps_by_class(helsinki)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 7), st.integers(0, 7), st.sampled_from([0, 1]), st.integers(-1, 1)
        ),
        min_size=1,
        max_size=20,
    )
)
def test_every_edge_lies_in_exactly_one_polyline_of_its_class_and_name(
    edges: list[tuple[int, int, int, int]],
) -> None:
    network = StreetNetwork(
        "random",
        np.linspace(60.0, 60.01, 8),
        np.linspace(24.0, 24.02, 8),
        np.array([a for a, _, _, _ in edges], dtype=np.int32),
        np.array([b for _, b, _, _ in edges], dtype=np.int32),
        np.ones(len(edges)),
        np.array([c for _, _, c, _ in edges], dtype=np.uint8),
        np.ones(len(edges), dtype=np.uint8),
        edge_name=np.array([n for _, _, _, n in edges], dtype=np.int32),
        street_names=("Aleksanterinkatu", "Esplanadi"),
    )
    lines = polylines(network)
    walked = Counter(
        (road_class, name, frozenset({nodes[i], nodes[i + 1]}))
        for road_class, name, nodes in lines
        for i in range(len(nodes) - 1)
    )
    assert walked == Counter((c, n, frozenset({a, b})) for a, b, c, n in edges)


def test_each_polyline_carries_its_street_name() -> None:
    """The arterial row of the test grid is named; a named street breaks a polyline where
    the name changes, as a class change does."""

    def name(a: tuple[int, int], b: tuple[int, int]) -> int:
        if a[0] == b[0] == 1:
            return 0 if b[1] <= 2 else 1  # the arterial: two names along it
        return -1

    edges = list(zip(NETWORK.edge_from.tolist(), NETWORK.edge_to.tolist(), strict=True))
    cols = 4
    named = attrs.evolve(
        NETWORK,
        edge_name=np.array(
            [name(divmod(a, cols), divmod(b, cols)) for a, b in edges], dtype=np.int32
        ),
        street_names=("Mannerheimintie", "Kaivokatu"),
    )
    (network,) = msgspec.json.decode(encode_geometry([named]).body)["networks"]
    assert network["names"] == ["Mannerheimintie", "Kaivokatu"]
    arterial = dict(
        zip(network["road_names"]["arterial"], network["roads"]["arterial"], strict=True)
    )
    assert [len(arterial[0]) // 2, len(arterial[1]) // 2] == [3, 2]
    assert network["road_names"]["local"] == [-1, -1]


def test_a_network_without_names_has_none() -> None:
    (network,) = msgspec.json.decode(encode_geometry([NETWORK]).body)["networks"]
    assert network["names"] == []
    assert all(name == -1 for names in network["road_names"].values() for name in names)


def test_the_shipped_network_names_its_streets() -> None:
    helsinki = import_network(DEFAULT_NETWORK_FILE, DEFAULT_NETWORK_NAME)
    (network,) = msgspec.json.decode(encode_geometry([helsinki]).body)["networks"]
    names = {network["names"][i] for i in network["road_names"]["arterial"] if i >= 0}
    assert {"Mannerheimintie", "Bulevardi"} <= names


def test_the_page_opens_on_the_shipped_networks_name() -> None:
    """The page shows the shipped city first by name (tests/browser checks it does)."""
    script = (ASSETS / "explore.js").read_text()
    assert f'const SHIPPED_NETWORK = "{DEFAULT_NETWORK_NAME}";' in script


def test_the_page_says_the_planners_detour_limit() -> None:
    """The page's "no route up to 25 % longer" is the planner's limit."""
    from cleanair_core.routes.planner import MAX_DETOUR

    script = (ASSETS / "explore.js").read_text()
    assert f"const MAX_DETOUR_PCT = {round(MAX_DETOUR * 100)};" in script


#: A pond and a park around the test grid, the park's ring reaching one step past the grid's
#: south-west corner.
def grid_with_areas() -> StreetNetwork:
    south, west, north, east = NETWORK.bounds
    mid_lat, mid_lon = (south + north) / 2, (west + east) / 2
    return attrs.evolve(
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
            ]
        ),
    )


def test_the_geometry_carries_water_and_parks_as_rings(
    client: Client, networks: LoadedNetworks
) -> None:
    networks.replace([grid_with_areas()])
    (network,) = client.get("/explore/networks").json()["networks"]
    south, west, north, east = NETWORK.bounds
    lat = round((north - south) / UNIT)
    mid = round(((west + east) / 2 - west) / UNIT)
    half = round(((north - south) / 2) / UNIT)
    # Flat [lat, lon, ...] rings of whole steps from the origin, unclosed; a point that rounds
    # onto its neighbour's step is sent once.
    assert network["water"] == [[half, mid, half, mid + 30, half + 20, mid + 30]]
    assert network["parks"] == [[0, 0, 0, mid, lat, mid, lat, 0]]
    # Keys in a fixed order, the areas last: what the page reads.
    assert list(network) == [
        "name",
        "bounds",
        "origin",
        "unit",
        "roads",
        "names",
        "road_names",
        "water",
        "parks",
    ]


def test_a_network_stored_without_areas_has_no_water_or_parks(client: Client) -> None:
    assert NETWORK.areas is None
    (network,) = client.get("/explore/networks").json()["networks"]
    assert (network["water"], network["parks"]) == ([], [])


def test_a_ring_rounded_to_fewer_than_three_steps_is_not_sent() -> None:
    south, west, _, _ = NETWORK.bounds
    tiny = NetworkAreas.of([(AreaKind.WATER, [south, south, south], [west, west, west + UNIT])])
    geometry = network_geometry(attrs.evolve(NETWORK, areas=tiny))
    assert (geometry.water, geometry.parks) == ([], [])


def test_the_shipped_networks_water_and_parks_stay_small() -> None:
    helsinki = import_network(DEFAULT_NETWORK_FILE, DEFAULT_NETWORK_NAME)
    streets_only = encode_geometry([attrs.evolve(helsinki, areas=None)]).body
    body = encode_geometry([helsinki]).body
    (network,) = msgspec.json.decode(body)["networks"]
    assert len(network["water"]) >= 3
    assert len(network["parks"]) >= 50
    # About 5 kB more, of 105 kB.
    assert len(body) - len(streets_only) < 10_000

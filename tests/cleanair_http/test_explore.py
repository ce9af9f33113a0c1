"""`GET /explore`, its assets and its network index: public, outside `/v1` and the OpenAPI
document, served from package data, referencing no other host, and the index true to the
loaded networks (the tiles: test_explore_tiles.py). The page's behaviour in a browser is
tested in tests/browser."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from litestar.testing import TestClient

import cleanair_http.controllers.explore as explore
from cleanair_core import CleanAir
from cleanair_core.ports import Sources
from cleanair_core.routes.network import RoadClass
from cleanair_http.app import create_app
from cleanair_http.explore.tiles import MAX_TILE_EDGES, MAX_ZOOM
from cleanair_runtime.composition.bootstrap import DEFAULT_NETWORK_NAME
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
        "/explore/assets/alerts.js",
        "/explore/assets/alerts.css",
        "/explore/assets/air.js",
        "/explore/assets/air.css",
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
        ("alerts.js", "text/javascript; charset=utf-8"),
        ("alerts.css", "text/css; charset=utf-8"),
        ("air.js", "text/javascript; charset=utf-8"),
        ("air.css", "text/css; charset=utf-8"),
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


@pytest.mark.parametrize("path", ["/explore/assets/explore.js", "/explore"])
def test_the_etag_is_weak_and_the_same_gzipped_or_plain(client: Client, path: str) -> None:
    """The app gzips answers of 1 KiB or more: one tag for both bodies must be weak, or a
    cache keeping both encodings could answer a range or a revalidation with the wrong one."""
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


def test_the_index_lists_the_loaded_networks_and_their_tiles(client: Client) -> None:
    answer = client.get("/explore/networks")
    assert answer.status_code == 200
    assert answer.headers["content-type"] == "application/json"
    (network,) = answer.json()["networks"]
    template = network.pop("tiles")
    assert network == {
        "name": "testgrid",
        "bounds": pytest.approx(list(NETWORK.bounds)),
        "nodes": NETWORK.node_count,
        "edges": NETWORK.edge_count,
        "max_zoom": MAX_ZOOM,
        "max_tile_edges": MAX_TILE_EDGES,
    }
    assert re.fullmatch(
        r"/explore/networks/testgrid/tiles/[0-9a-f]{24}/\{z\}/\{x\}/\{y\}", template
    )


def test_the_index_changes_with_the_networks_and_revalidates(
    client: Client, networks: LoadedNetworks
) -> None:
    first = client.get("/explore/networks")
    again = client.get("/explore/networks", headers={"If-None-Match": first.headers["etag"]})
    assert (again.status_code, again.content) == (304, b"")
    assert again.headers["cache-control"] == "no-cache"
    # The same network imported again (a new object, new content): new tile addresses.
    networks.replace([grid(3, 4, name="testgrid"), grid(2, 2, name="other")])
    third = client.get("/explore/networks", headers={"If-None-Match": first.headers["etag"]})
    assert third.status_code == 200
    listed = third.json()["networks"]
    assert [n["name"] for n in listed] == ["other", "testgrid"]
    assert listed[1]["tiles"] != first.json()["networks"][0]["tiles"]


def test_without_networks_the_index_is_empty(
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


def test_the_page_opens_on_the_shipped_networks_name() -> None:
    """The page shows the shipped city first by name (tests/browser checks it does)."""
    script = (ASSETS / "explore.js").read_text()
    assert f'const SHIPPED_NETWORK = "{DEFAULT_NETWORK_NAME}";' in script


def test_the_page_says_the_planners_detour_limit() -> None:
    """The page's "no route up to 25 % longer" is the planner's limit."""
    from cleanair_core.routes.planner import MAX_DETOUR

    script = (ASSETS / "explore.js").read_text()
    assert f"const MAX_DETOUR_PCT = {round(MAX_DETOUR * 100)};" in script

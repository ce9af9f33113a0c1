"""`GET /explore`: the route explorer, a page for app developers and operators.

Outside `/v1` and outside the OpenAPI document, like the health probes: the page and the
networks' geometry are public (OpenStreetMap data the page needs before a token is pasted),
so the bearer middleware skips them and they cost nothing. The page itself calls the `/v1`
API with the token a person pastes; the token stays in the browser (docs/explore.md).

Every asset is package data served from here, and the page's Content-Security-Policy lets it
load nothing from any other host: the explorer works offline and leaks nothing.
"""

from __future__ import annotations

import gzip
import hashlib
import re
from collections import OrderedDict
from collections.abc import Sequence
from functools import partial
from importlib.resources import files
from typing import Annotated, Any

import anyio
import attrs
import msgspec
from litestar import Request, Response, get
from litestar.exceptions import NotFoundException
from litestar.params import FromPath, Parameter

from cleanair_core.errors import NotFound, Unprocessable
from cleanair_core.geo import Point
from cleanair_core.routes.network import StreetNetwork
from cleanair_http.client_address import client_address
from cleanair_http.encoded import SKIP_COMPRESSION
from cleanair_http.explore.air_layers import AIR_LAYERS_JSON
from cleanair_http.explore.air_source import AirSource, air_source
from cleanair_http.explore.tiles import (
    MAX_TILE_EDGES,
    MAX_ZOOM,
    EncodedTile,
    TileIndex,
    encode_tile,
    index_network,
    is_tile,
)
from cleanair_http.offloading import in_thread

EXPLORE_PATH = "/explore"
NETWORKS_PATH = "/explore/networks"
AIR_SOURCE_PATH = "/explore/air-source"
AIR_LAYERS_PATH = "/explore/air-layers"
ASSETS_PATH = "/explore/assets"

#: The page may load and call only its own origin (images also from the `blob:` URLs it makes
#: itself: the air tiles it fetched with its token); nothing may frame it.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
#: Revalidate every time: a restart after `cleanair network import` or an upgrade changes
#: what is served, and a 304 costs next to nothing.
REVALIDATE = "no-cache"

_MEDIA_TYPES = {
    "index.html": "text/html",
    "home.html": "text/html",
    "explore.js": "text/javascript",
    "explore.css": "text/css",
    "conditions.js": "text/javascript",
    "conditions.css": "text/css",
    "departures.js": "text/javascript",
    "departures.css": "text/css",
    "alerts.js": "text/javascript",
    "alerts.css": "text/css",
    "air.js": "text/javascript",
    "air.css": "text/css",
    "home.css": "text/css",
    "icon.svg": "image/svg+xml",
}
#: The files under `assets/` a browser may fetch by name (the pages are served at /explore
#: and /).
PUBLIC_ASSETS = frozenset(_MEDIA_TYPES) - {"index.html", "home.html"}


@attrs.frozen
class Asset:
    body: bytes
    media_type: str
    etag: str


def _read(name: str) -> Asset:
    body = files("cleanair_http.explore").joinpath("assets", name).read_bytes()
    # Weak, as the tiles' (`EncodedTile.etag` says why): the app gzips files too.
    return Asset(body, _MEDIA_TYPES[name], f'W/"{hashlib.sha256(body).hexdigest()[:32]}"')


#: Read once at import (a few kilobytes), never on the event loop while serving.
_ASSETS = {name: _read(name) for name in _MEDIA_TYPES}


def asset(name: str) -> Asset:
    """One file of the package's `explore/assets`."""
    return _ASSETS[name]


def cached_response(
    request: Request[Any, Any, Any], body: bytes, media_type: str, etag: str
) -> Response[bytes]:
    headers = {"ETag": etag, "Cache-Control": REVALIDATE, "X-Content-Type-Options": "nosniff"}
    if media_type.startswith("text/html"):
        headers["Content-Security-Policy"] = CONTENT_SECURITY_POLICY
    # If-None-Match compares weakly (RFC 9110, 13.1.2): W/"x" and "x" are the same tag.
    matches = {
        tag.strip().removeprefix("W/")
        for tag in request.headers.get("if-none-match", "").split(",")
    }
    if etag.removeprefix("W/") in matches or "*" in matches:
        return Response(b"", status_code=304, headers=headers)
    return Response(body, media_type=media_type, headers=headers)


@get(EXPLORE_PATH, include_in_schema=False, exclude_from_auth=True)
async def explore_page(request: Request[Any, Any, Any]) -> Response[bytes]:
    page = asset("index.html")
    return cached_response(request, page.body, page.media_type, page.etag)


@get(f"{ASSETS_PATH}/{{name:str}}", include_in_schema=False, exclude_from_auth=True)
async def explore_asset(request: Request[Any, Any, Any], name: FromPath[str]) -> Response[bytes]:
    if name not in PUBLIC_ASSETS:
        raise NotFoundException()
    found = asset(name)
    return cached_response(request, found.body, found.media_type, found.etag)


#: The tiles kept, gzipped: about 500 of a city's street-level tiles, or 30 of the largest.
TILE_CACHE_BYTES = 32 * 2**20
#: Tiles carry their network's version in the address, so what a browser (or a proxy) has
#: is never stale: it asks again for nothing, and a network changed on the server has new
#: addresses (the old ones answer 404).
IMMUTABLE = "public, max-age=31536000, immutable"
#: A tile coordinate as written: ASCII digits (int() takes "+1", " 1" and other scripts' too).
_WHOLE_NUMBER = re.compile(r"-?[0-9]{1,10}")


class TileCache:
    """Per loaded network, its `TileIndex` (made in a thread when the loaded networks
    change), and the tiles last made, up to `budget` bytes, least recently used first out.

    One tile is made at a time, in a worker thread: a crowd asking for tiles waits in line
    instead of taking the interpreter from the event loop, and a tile asked for by several
    requests at once is made once."""

    def __init__(self, budget: int = TILE_CACHE_BYTES) -> None:
        self._budget = budget
        self._index_lock = anyio.Lock()
        self._build_lock = anyio.Lock()
        self._indexes: dict[str, TileIndex] = {}
        self._tiles: OrderedDict[tuple[str, int, int, int], EncodedTile] = OrderedDict()
        self._bytes = 0

    async def indexes(self, networks: Sequence[StreetNetwork]) -> list[TileIndex]:
        async with self._index_lock:
            for network in networks:
                known = self._indexes.get(network.name)
                # Networks compare by identity: a reloaded network is a new object.
                if known is None or known.network is not network:
                    self._indexes[network.name] = await in_thread(partial(index_network, network))
            names = {network.name for network in networks}
            for name in set(self._indexes) - names:
                del self._indexes[name]
            return [self._indexes[network.name] for network in networks]

    def _cached(self, key: tuple[str, int, int, int]) -> EncodedTile | None:
        found = self._tiles.get(key)
        if found is not None:
            self._tiles.move_to_end(key)
        return found

    async def tile(self, index: TileIndex, z: int, x: int, y: int) -> EncodedTile:
        key = (index.version, z, x, y)
        found = self._cached(key)
        if found is not None:
            return found
        async with self._build_lock:
            found = self._cached(key)  # made while this request waited its turn
            if found is not None:
                return found
            made = await in_thread(lambda: encode_tile(index, z, x, y))
            self._tiles[key] = made
            self._bytes += len(made.gzipped)
            while self._bytes > self._budget and len(self._tiles) > 1:
                _, dropped = self._tiles.popitem(last=False)
                self._bytes -= len(dropped.gzipped)
            return made


def _tile_cache(request: Request[Any, Any, Any]) -> TileCache:
    state = request.app.state
    found = state.get("explore_tiles")
    if not isinstance(found, TileCache):
        # No await since the lookup: one cache per app, even with requests racing.
        found = TileCache()
        state["explore_tiles"] = found
    return found


def _loaded(request: Request[Any, Any, Any]) -> tuple[StreetNetwork, ...]:
    sources = request.app.state.core.sources
    streets = None if sources is None else sources.networks
    return () if streets is None else tuple(streets.loaded)


async def _count(request: Request[Any, Any, Any]) -> None:
    """Count the request against its address's allowance (429 over it)."""
    core = request.app.state.core
    address = client_address(request, request.app.state.settings.trusted_proxies)
    await core.store_calls(lambda: core.count_explore_request(address))


class NetworkEntry(msgspec.Struct):
    name: str
    #: south, west, north, east in degrees.
    bounds: tuple[float, float, float, float]
    nodes: int
    edges: int
    #: The tiles' address, `{z}`, `{x}` and `{y}` to fill in; it changes with the network.
    tiles: str
    max_zoom: int
    max_tile_edges: int


class NetworkIndex(msgspec.Struct):
    networks: list[NetworkEntry]


def tiles_path(index: TileIndex) -> str:
    return f"{NETWORKS_PATH}/{index.network.name}/tiles/{index.version}/{{z}}/{{x}}/{{y}}"


@get(NETWORKS_PATH, include_in_schema=False, exclude_from_auth=True)
async def explore_networks(request: Request[Any, Any, Any]) -> Response[bytes]:
    """The loaded street networks and where their tiles are (`cleanair_http.explore.tiles`)."""
    await _count(request)
    indexes = await _tile_cache(request).indexes(_loaded(request))
    body = msgspec.json.encode(
        NetworkIndex(
            [
                NetworkEntry(
                    name=index.network.name,
                    bounds=index.network.bounds,
                    nodes=index.network.node_count,
                    edges=index.network.edge_count,
                    tiles=tiles_path(index),
                    max_zoom=MAX_ZOOM,
                    max_tile_edges=MAX_TILE_EDGES,
                )
                for index in indexes
            ]
        )
    )
    etag = f'W/"{hashlib.sha256(body).hexdigest()[:32]}"'
    return cached_response(request, body, "application/json", etag)


def accepts_gzip(header: str) -> bool:
    """Whether an Accept-Encoding header takes gzip (`gzip`, `x-gzip` or `*`, not at q=0)."""
    for part in header.lower().split(","):
        coding, _, params = part.partition(";")
        if coding.strip() not in {"gzip", "x-gzip", "*"}:
            continue
        quality = params.strip().removeprefix("q=").strip() if "q=" in params else "1"
        try:
            if float(quality) > 0:
                return True
        except ValueError:
            continue
    return False


@get(
    f"{NETWORKS_PATH}/{{name:str}}/tiles/{{version:str}}/{{z:str}}/{{x:str}}/{{y:str}}",
    include_in_schema=False,
    exclude_from_auth=True,
    # Stored gzipped already: the app's compression must not pack it again.
    opt={SKIP_COMPRESSION: True},
)
async def explore_tile(
    request: Request[Any, Any, Any],
    name: FromPath[str],
    version: FromPath[str],
    z: FromPath[str],
    x: FromPath[str],
    y: FromPath[str],
) -> Response[bytes]:
    """One tile of a loaded network (`cleanair_http.explore.tiles`): 422 for an address that
    is no tile, 404 for an unknown network or version or a tile outside the network."""
    # Strings, not int path parameters: Litestar answers a non-number there with a 404, as
    # if the address did not exist, where a malformed one is the client's mistake (422).
    if not all(_WHOLE_NUMBER.fullmatch(part) for part in (z, x, y)):
        raise Unprocessable()
    return await _tile(request, name, version, int(z), int(x), int(y))


async def _tile(
    request: Request[Any, Any, Any], name: str, version: str, z: int, x: int, y: int
) -> Response[bytes]:
    if not is_tile(z, x, y):
        raise Unprocessable()
    await _count(request)
    cache = _tile_cache(request)
    # All the loaded networks, not only this one: the cache drops the indexes of those not
    # passed, and another network's would be made again on its next tile.
    indexes = await cache.indexes(_loaded(request))
    index = next((found for found in indexes if found.network.name == name), None)
    if index is None or index.version != version or not index.covers(z, x, y):
        raise NotFound()
    made = await cache.tile(index, z, x, y)
    headers = {
        "ETag": made.etag,
        "Cache-Control": IMMUTABLE,
        "Vary": "Accept-Encoding",
        "X-Content-Type-Options": "nosniff",
    }
    matches = {
        tag.strip().removeprefix("W/")
        for tag in request.headers.get("if-none-match", "").split(",")
    }
    if made.etag.removeprefix("W/") in matches or "*" in matches:
        return Response(b"", status_code=304, headers=headers)
    if accepts_gzip(request.headers.get("accept-encoding", "")):
        headers["Content-Encoding"] = "gzip"
        return Response(made.gzipped, media_type="application/json", headers=headers)
    plain = await in_thread(lambda: gzip.decompress(made.gzipped))
    return Response(plain, media_type="application/json", headers=headers)


@get(AIR_SOURCE_PATH, include_in_schema=False, exclude_from_auth=True)
async def explore_air_source(
    request: Request[Any, Any, Any],
    lat: Annotated[float | None, Parameter(ge=-90, le=90)] = None,
    lon: Annotated[float | None, Parameter(ge=-180, le=180)] = None,
) -> Response[AirSource]:
    """Where the air comes from, and which stations correct it at (`lat`, `lon`) now.

    Only a point inside a loaded network is asked for (the explorer's points are): a public
    route must not make the source work for any point on Earth.
    """
    core = request.app.state.core
    sources = core.sources
    point = None if lat is None or lon is None else Point(lat, lon)
    streets = None if sources is None else sources.networks
    if point is not None and (
        streets is None or not any(network.covers(point) for network in streets.loaded)
    ):
        point = None
    answer = await air_source(
        request.app.state.settings.air_quality_source,
        None if sources is None else sources.air_quality,
        point,
        core.clock.now(),
    )
    return Response(answer, headers={"Cache-Control": "no-store"})


@get(AIR_LAYERS_PATH, include_in_schema=False, exclude_from_auth=True)
async def explore_air_layers() -> Response[bytes]:
    """The air layer's layers, palettes and hours (`explore/air_layers.py`): the same for
    everyone while the server runs, so a browser may keep it for an hour."""
    return Response(
        AIR_LAYERS_JSON,
        media_type="application/json",
        headers={"Cache-Control": "public, max-age=3600"},
    )


ROUTE_HANDLERS = (
    explore_page,
    explore_asset,
    explore_networks,
    explore_tile,
    explore_air_source,
    explore_air_layers,
)

"""`GET /explore`: the route explorer, a page for app developers and operators.

Outside `/v1` and outside the OpenAPI document, like the health probes: the page and the
networks' geometry are public (OpenStreetMap data the page needs before a token is pasted),
so the bearer middleware skips them and they cost nothing. The page itself calls the `/v1`
API with the token a person pastes; the token stays in the browser (docs/explore.md).

Every asset is package data served from here, and the page's Content-Security-Policy lets it
load nothing from any other host: the explorer works offline and leaks nothing.
"""

from __future__ import annotations

import hashlib
from importlib.resources import files
from typing import Annotated, Any

import anyio
import attrs
from litestar import Request, Response, get
from litestar.exceptions import NotFoundException
from litestar.params import FromPath, Parameter

from cleanair_core.geo import Point
from cleanair_core.routes.network import StreetNetwork
from cleanair_http.explore.air_source import AirSource, air_source
from cleanair_http.explore.geometry import EncodedGeometry, encode_geometry
from cleanair_http.offloading import in_thread

EXPLORE_PATH = "/explore"
NETWORKS_PATH = "/explore/networks"
AIR_SOURCE_PATH = "/explore/air-source"
ASSETS_PATH = "/explore/assets"

#: The page may load and call only its own origin; nothing may frame it.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
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
    # Weak, as the geometry's (`EncodedGeometry.etag` says why): the app gzips files too.
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


class GeometryCache:
    """The encoded geometry of the networks last asked for: encoded once, in a thread, by one
    request while any others wait for it; encoded again only when the loaded networks change."""

    def __init__(self) -> None:
        self._lock = anyio.Lock()
        self._networks: tuple[StreetNetwork, ...] | None = None
        self._encoded: EncodedGeometry | None = None

    async def get(self, networks: tuple[StreetNetwork, ...]) -> EncodedGeometry:
        async with self._lock:
            # Networks compare by identity: a reloaded network is a new object.
            if self._encoded is None or self._networks != networks:
                self._encoded = await in_thread(lambda: encode_geometry(networks))
                self._networks = networks
            return self._encoded


def _geometry_cache(request: Request[Any, Any, Any]) -> GeometryCache:
    state = request.app.state
    found = state.get("explore_geometry")
    if not isinstance(found, GeometryCache):
        # No await since the lookup: one cache per app, even with requests racing.
        found = GeometryCache()
        state["explore_geometry"] = found
    return found


@get(NETWORKS_PATH, include_in_schema=False, exclude_from_auth=True)
async def explore_networks(request: Request[Any, Any, Any]) -> Response[bytes]:
    """The loaded street networks' geometry (`cleanair_http.explore.geometry`)."""
    sources = request.app.state.core.sources
    streets = None if sources is None else sources.networks
    networks = () if streets is None else tuple(streets.loaded)
    encoded = await _geometry_cache(request).get(networks)
    return cached_response(request, encoded.body, "application/json", encoded.etag)


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


ROUTE_HANDLERS = (explore_page, explore_asset, explore_networks, explore_air_source)

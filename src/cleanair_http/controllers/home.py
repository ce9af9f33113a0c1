"""`GET /`: the address `make run` advertises, a landing page saying what the service is.

Outside `/v1` and outside the OpenAPI document, like `/explore` and the health probes: no
token, no credits, no rate limit. A browser gets a small HTML page (package data, with the
explorer's strict Content-Security-Policy) linking the explorer, the API documentation, the
health probe and a short walkthrough on the page itself (nothing on another host). A client
that asks for JSON first gets the same links as a JSON index.
"""

from __future__ import annotations

from typing import Any

import msgspec
from litestar import Request, Response, get
from litestar.enums import MediaType

from cleanair_http.controllers.explore import EXPLORE_PATH, asset, cached_response
from cleanair_http.controllers.health import LIVE_PATH, READY_PATH
from cleanair_http.openapi import SCHEMA_PATH

HOME_PATH = "/"


class HomeIndex(msgspec.Struct):
    service: str
    description: str
    #: Where each thing is, as paths on this server.
    links: dict[str, str]


INDEX = HomeIndex(
    service="cleanair",
    description=(
        "Scores the air people breathe, forecasts it, measures the pollution dose along a "
        "route and plans cleaner walking, running and cycling routes."
    ),
    links={
        "api": "/v1",
        "api_docs": SCHEMA_PATH,
        "openapi": f"{SCHEMA_PATH}/openapi.json",
        "explorer": EXPLORE_PATH,
        "ready": READY_PATH,
        "live": LIVE_PATH,
        "walkthrough": f"{HOME_PATH}#walkthrough",
    },
)


@get(HOME_PATH, include_in_schema=False, exclude_from_auth=True)
async def home_page(request: Request[Any, Any, Any]) -> Response[Any]:
    # HTML first: a browser's Accept lists it and `*/*` (curl's) takes the first offered.
    wanted = request.accept.best_match([MediaType.HTML, MediaType.JSON], default=MediaType.HTML)
    if wanted == MediaType.JSON:
        return Response(INDEX, media_type=MediaType.JSON, headers={"Vary": "Accept"})
    page = asset("home.html")
    response = cached_response(request, page.body, page.media_type, page.etag)
    response.headers["Vary"] = "Accept"
    return response

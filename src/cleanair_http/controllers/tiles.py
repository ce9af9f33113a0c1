"""`GET /ext/v1/airquality/tiles/{layer}/{z}/{x}/{y}.png`: heatmap tiles of the air (issue
33), with the extension API's bearer auth, scope `aq:read` and error envelope. Free of
credits; each tile served counts against its owner's daily tile allowance, a 304 does not
(docs/api-choices.md). A browser page fetches them with its token in the Authorization
header and draws the blobs; `ETag` and `Cache-Control` let it keep them (docs/tiles.md)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from litestar import Request, Response, get
from litestar.params import PathParameter, QueryParameter

from cleanair_core.access.scopes import Scope
from cleanair_core.air.tiles.geometry import Tile
from cleanair_core.errors import Unprocessable, Violation
from cleanair_http import extension_schemas as ext
from cleanair_http import tile_schemas
from cleanair_http.auth import authorization_of, core_of, requires
from cleanair_http.encoded import SKIP_COMPRESSION
from cleanair_http.openapi import SECURITY, extension_error_responses

TAG = f"extension v{ext.EXTENSION_VERSION}"
#: Longer than any zoom's coordinates (2^18 has 6 digits): longer is refused unread.
_MAX_DIGITS = 7


def _whole(text: str, field: str) -> int:
    """A non-negative whole number written in plain digits, else Unprocessable (the value
    is not echoed)."""
    if not text.isascii() or not text.isdigit() or len(text) > _MAX_DIGITS:
        raise Unprocessable(violations=[Violation(field, "type", "must be a whole number")])
    return int(text)


def _y_of(name: str) -> int:
    stem, dot, suffix = name.rpartition(".")
    if not dot or suffix != "png":
        raise Unprocessable(
            violations=[Violation("y", "pattern", "must be a whole number followed by .png")]
        )
    return _whole(stem, "y")


def _time_of(text: str | None) -> datetime | None:
    if text is None:
        return None
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        raise Unprocessable(
            violations=[Violation("time", "format", "must be an ISO 8601 date-time")]
        ) from None


@get(
    "/ext/v1/airquality/tiles/{layer:str}/{z:str}/{x:str}/{y_png:str}",
    status_code=200,
    # A PNG is compressed already: gzip would spend CPU on every tile to save nothing.
    opt={**requires(Scope.AQ_READ), SKIP_COMPRESSION: True},
    security=SECURITY,
    summary="A heatmap tile of the air (PNG)",
    tags=[TAG],
    media_type="image/png",
    responses=extension_error_responses(
        400,
        401,
        403,
        404,
        422,
        429,
        503,
        s400="`time` is outside the data window: 30 days ago to 84 hours from now",
        s404="No such layer",
        s422="Request validation failed: zoom outside 0-18, x or y outside 0 to 2^zoom - 1, "
        "a y not ending in .png, an unknown palette or a malformed time",
        s429="Over the connection's rate limit, or the owner's daily tile allowance is "
        "spent; see Retry-After",
    ),
)
async def heatmap_tile(
    request: Request[Any, Any, Any],
    layer: Annotated[
        str,
        PathParameter(
            description="clean_air_score, us_epa_2024, eu_eaqi_2024, uk_daqi, no2, pm25, pm10 or o3"
        ),
    ],
    z: Annotated[str, PathParameter(description="Zoom, 0-18")],
    x: Annotated[str, PathParameter(description="Column, 0 to 2^z - 1, west to east")],
    y_png: Annotated[
        str, PathParameter(description="Row, 0 to 2^z - 1, north to south, then .png")
    ],
    time: Annotated[
        str | None,
        QueryParameter(
            description="Any instant of the data window (ISO 8601, UTC when no offset is "
            "given); its hour is drawn. Default: now.",
        ),
    ] = None,
    palette: Annotated[
        str, QueryParameter(description="default, or colorblind (viridis)")
    ] = "default",
) -> Response[bytes]:
    """The air of one hour over one Web-Mercator tile, 256 x 256 pixels, in the layer's own
    colours (or viridis): the fused background everywhere and, where a street network is
    loaded, each street's street-level value along it. Free of credits (scope `aq:read`);
    each tile served counts against the owner's daily tile allowance. A strong `ETag` and
    `Cache-Control` come with it; `If-None-Match` with a current ETag answers 304, free."""
    tile = Tile(_whole(z, "z"), _whole(x, "x"), _y_of(y_png))
    answer = await core_of(request).heatmap_tile(
        authorization_of(request),
        layer=layer,
        tile=tile,
        at=_time_of(time),
        palette=palette,
        if_none_match=request.headers.get("if-none-match"),
    )
    headers = {"ETag": answer.etag, "Cache-Control": f"private, max-age={answer.max_age}"}
    if answer.png is None:
        return Response(b"", status_code=304, headers=headers, media_type="image/png")
    return Response(answer.png, status_code=200, headers=headers, media_type="image/png")


@get(
    "/ext/v1/airquality/tiles/layers",
    status_code=200,
    opt=requires(Scope.AQ_READ),
    security=SECURITY,
    summary="The heatmap tiles' layers and their legends",
    tags=[TAG],
    responses=extension_error_responses(401, 403, 429, 503),
)
async def tile_layers() -> tile_schemas.LegendResponse:
    """Every tile layer: its name, title and unit, and each palette's steps in order, each
    step's colour, label and value range (the legend a map page draws). Free."""
    return _LEGEND


_LEGEND = tile_schemas.legend()

ROUTE_HANDLERS = (tile_layers, heatmap_tile)

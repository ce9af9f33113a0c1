"""OpenAPI: the real statuses of each endpoint, the bearer scheme, version 1.0.0; the
document and its Swagger UI page under /schema, served without any other host."""

from __future__ import annotations

from typing import Any

from litestar import Litestar, Request, Router, get
from litestar.datastructures import CacheControlHeader
from litestar.exceptions import NotFoundException
from litestar.openapi import OpenAPIConfig, ResponseSpec
from litestar.openapi.plugins import JsonRenderPlugin, SwaggerRenderPlugin, YamlRenderPlugin
from litestar.openapi.spec import Components, SecurityScheme
from litestar.params import FromPath
from litestar.response import File
from swagger_ui_bundle import swagger_ui_path

from cleanair_http.schemas import ErrorResponse

BEARER = "BearerAuth"
SECURITY: list[dict[str, list[str]]] = [{BEARER: []}]

_DESCRIPTIONS = {
    400: "Request outside what the service supports (see the endpoint)",
    401: "Missing, malformed, unknown or revoked token",
    403: "Missing scope or owner not premium",
    404: "Not found",
    422: "Request validation failed (the input is never echoed)",
    429: "Rate limited or credits exhausted; see Retry-After",
    503: "A dependent service or the service's database is unavailable; not charged",
}


def error_responses(*statuses: int, **descriptions: str) -> dict[int, ResponseSpec]:
    """Response specs for error statuses; `s401="..."` style keywords override descriptions.

    Every endpoint reaches the database, so every one may answer 503 when it is unavailable:
    that status is always declared."""
    if 503 not in statuses:
        statuses = (*statuses, 503)
        descriptions.setdefault("s503", "The service's database is unavailable; not charged")
    return {
        status: ResponseSpec(
            ErrorResponse,
            description=descriptions.get(f"s{status}", _DESCRIPTIONS[status]),
            generate_examples=False,
        )
        for status in statuses
    }


SCHEMA_PATH = "/schema"
#: Swagger UI's files, from the swagger-ui-bundle-v2 package rather than a CDN, under
#: /schema: outside /v1 and, like the document, served without a token.
SWAGGER_ASSETS_PATH = f"{SCHEMA_PATH}/assets/swagger-ui"


class OfflineSwagger(SwaggerRenderPlugin):
    """Swagger UI from the service's own files. Swagger UI would ask validator.swagger.io
    for a badge were the document ever loaded by URL: the online validator is switched off so
    that the page never reaches another host whatever its configuration."""

    _ANCHOR = b"dom_id: '#swagger-container',"

    def __init__(self) -> None:
        super().__init__(
            js_url=f"{SWAGGER_ASSETS_PATH}/swagger-ui-bundle.js",
            css_url=f"{SWAGGER_ASSETS_PATH}/swagger-ui.css",
            standalone_preset_js_url=f"{SWAGGER_ASSETS_PATH}/swagger-ui-standalone-preset.js",
            favicon=(
                f"<link rel='icon' type='image/png' href='{SWAGGER_ASSETS_PATH}/favicon-32x32.png'>"
            ),
            path="/swagger",
        )

    def render(self, request: Request[Any, Any, Any], openapi_schema: dict[str, Any]) -> bytes:
        page = super().render(request, openapi_schema)
        # Litestar's template offers no option for it; its tests fail if the anchor moves.
        if self._ANCHOR not in page:
            raise RuntimeError("Litestar's Swagger UI template changed: no dom_id to anchor on")
        return page.replace(self._ANCHOR, self._ANCHOR + b" validatorUrl: 'none',", 1)


#: The files the page loads (and their source maps, which a browser's tools ask for). Not the
#: whole folder: its index.html and swagger-initializer.js open a demo document on another host.
SWAGGER_FILES = {
    name: media_type
    for stem, media_type in (
        ("swagger-ui-bundle.js", "text/javascript"),
        ("swagger-ui-standalone-preset.js", "text/javascript"),
        ("swagger-ui.css", "text/css"),
    )
    for name, media_type in ((stem, media_type), (f"{stem}.map", "application/json"))
} | {"favicon-32x32.png": "image/png", "favicon-16x16.png": "image/png"}


@get(
    f"{SWAGGER_ASSETS_PATH.removeprefix(SCHEMA_PATH)}/{{name:str}}",
    include_in_schema=False,
    # The files change only with the package: a day's caching spares every page view 2 MB,
    # and an upgrade shows within a day.
    cache_control=CacheControlHeader(public=True, max_age=86400),
)
async def swagger_asset(name: FromPath[str]) -> File:
    media_type = SWAGGER_FILES.get(name)
    if media_type is None:
        raise NotFoundException()
    # Streamed in chunks by Litestar's async file I/O: the event loop never waits on the disk.
    return File(swagger_ui_path / name, media_type=media_type, content_disposition_type="inline")


def openapi_config() -> OpenAPIConfig:
    """The document at /schema/openapi.json (and .yaml), Swagger UI at /schema and
    /schema/swagger. Litestar's other pages (ReDoc, Elements, RapiDoc) load their scripts
    and fonts from CDNs and no maintained Python package ships them, so they are off: a page
    that is blank offline is worse than none."""
    return OpenAPIConfig(
        title="cleanair",
        version="1.0.0",
        description="Air-quality scoring, forecasts, route enrichment and cleaner route plans.",
        components=Components(
            security_schemes={BEARER: SecurityScheme(type="http", scheme="bearer")}
        ),
        path=SCHEMA_PATH,
        openapi_router=Router(SCHEMA_PATH, route_handlers=[swagger_asset], include_in_schema=False),
        render_plugins=[OfflineSwagger(), JsonRenderPlugin(), YamlRenderPlugin()],
        create_examples=False,
        use_handler_docstrings=True,
    )


def drop_framework_400s(app: Litestar) -> None:
    """Litestar documents a 400 for every handler with a body; ours answer 422 instead."""
    schema = app.openapi_schema
    for path_item in (schema.paths or {}).values():
        for method in ("get", "post", "put", "patch", "delete"):
            operation: Any = getattr(path_item, method, None)
            if operation is None or not operation.responses:
                continue
            response = operation.responses.get("400")
            if response is not None and "Bad request syntax" in (response.description or ""):
                del operation.responses["400"]

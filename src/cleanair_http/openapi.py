"""OpenAPI: the real statuses of each endpoint, the bearer scheme, version 1.0.0; the
document and its Swagger UI page under /schema, served without any other host."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from litestar import Litestar, Request, Router, get
from litestar.datastructures import CacheControlHeader
from litestar.exceptions import NotFoundException
from litestar.openapi import OpenAPIConfig, ResponseSpec
from litestar.openapi.plugins import JsonRenderPlugin, SwaggerRenderPlugin, YamlRenderPlugin
from litestar.openapi.spec import (
    Components,
    Discriminator,
    Example,
    OpenAPIHeader,
    OpenAPIResponse,
    OpenAPIType,
    Operation,
    Reference,
    RequestBody,
    Schema,
    SecurityScheme,
)
from litestar.params import FromPath
from litestar.response import File
from swagger_ui_bundle import swagger_ui_path

from cleanair_http.extension_schemas import EXTENSION_VERSION, ValidationErrorResponse
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


def extension_error_responses(*statuses: int, **descriptions: str) -> dict[int, ResponseSpec]:
    """`error_responses` for an /ext/v1 operation: its 422 also lists each failing field and
    rule (`ValidationErrorResponse`)."""
    responses = error_responses(*statuses, **descriptions)
    if 422 in responses:
        responses[422] = ResponseSpec(
            ValidationErrorResponse,
            description=descriptions.get("s422", _DESCRIPTIONS[422])
            + "; `errors` names each failing field and rule",
            generate_examples=False,
        )
    return responses


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
        description="Air-quality scoring, forecasts, route enrichment and cleaner route plans. "
        "The API contract's endpoints are under /v1 (version 1.0.0, frozen); the service's "
        f"extension is under /ext/v1 (version {EXTENSION_VERSION}, its operations tagged "
        f"`extension v{EXTENSION_VERSION}`), with the same bearer auth, scopes, credit pool, "
        "rate limits and error envelope.",
        components=Components(
            security_schemes={BEARER: SecurityScheme(type="http", scheme="bearer")}
        ),
        path=SCHEMA_PATH,
        openapi_router=Router(SCHEMA_PATH, route_handlers=[swagger_asset], include_in_schema=False),
        render_plugins=[OfflineSwagger(), JsonRenderPlugin(), YamlRenderPlugin()],
        create_examples=False,
        use_handler_docstrings=True,
    )


#: The contract's words for its enumerations. Litestar would take the Python enum's docstring
#: (notes for this code's readers), or the description of the first field typed with it.
ENUM_DESCRIPTIONS = {
    "ActivityType": "The activity during the exposure: it sets the breathing rate and, for a "
    "route without times, the speed",
    "EnvironmentType": "Where the air is breathed",
    "PlanActivityType": "How a planned route is travelled",
    "PlanRouteStatus": "A route plan's state: `pending` until the planner finishes, then "
    "`completed` (with a result) or `failed` (with an error)",
}

RETRY_AFTER = OpenAPIHeader(
    description="Seconds until the window that refused the call resets",
    required=True,
    schema=Schema(type=OpenAPIType.INTEGER, minimum=0),
)
RETRY_AFTER_UNAVAILABLE = OpenAPIHeader(
    description="Seconds until trying again makes sense: while an upstream's circuit breaker "
    "is open, until it lets a call through; otherwise a few seconds",
    required=True,
    schema=Schema(type=OpenAPIType.INTEGER, minimum=1),
)

#: Example bodies, by the name of the request's schema (its struct).
REQUEST_EXAMPLES: dict[str, dict[str, Example]] = {
    "RedeemPairingCode": {
        "pairing": Example(
            summary="A code shown in the companion app",
            value={"code": "123456", "name": "Kitchen display"},
        )
    },
    "ScoreRequest": {
        "coordinates": Example(
            summary="A point by its coordinates",
            value={"lat": 60.1699, "lon": 24.9384, "client": "kitchen-display"},
        ),
        "wifi": Example(
            summary="A point by a Wi-Fi scan, strongest first",
            value={
                "wifi": [
                    {"mac": "02:1a:2b:3c:4d:5e", "rssi": -48},
                    {"mac": "02:1a:2b:3c:4d:5f", "rssi": -63},
                ]
            },
        ),
    },
    "ConditionsRequest": {
        "place": Example(
            summary="A point's conditions with the place's own index",
            value={"lat": 60.1699, "lon": 24.9384},
        ),
        "indexes": Example(
            summary="Two indexes asked for by code",
            value={"lat": 51.5072, "lon": -0.1276, "indexes": ["uk_daqi", "eu_eaqi_2024"]},
        ),
    },
    "HistoryRequest": {
        "day": Example(
            summary="Yesterday's 24 hours at a point, in one page",
            value={
                "lat": 60.1699,
                "lon": 24.9384,
                "start": "2026-11-24T00:00:00Z",
                "end": "2026-11-25T00:00:00Z",
            },
        ),
    },
    "ForecastRequest": {
        "day": Example(
            summary="A day's hourly forecast for a run",
            value={
                "latitude": 60.1699,
                "longitude": 24.9384,
                "date": "2026-11-25",
                "timezone": "Europe/Helsinki",
                "activity_type": "running_outdoor",
            },
        )
    },
    "EnrichRouteRequest": {
        "planned": Example(
            summary="A walk to come: times from the start time and walking speed",
            value={
                "waypoints": [
                    {"lat": 60.1699, "lon": 24.9384},
                    {"lat": 60.1720, "lon": 24.9410},
                ],
                "start_time": "2026-11-25T08:00:00Z",
                "activity_type": "walking",
            },
        ),
        "recorded": Example(
            summary="A recorded ride: a time on every waypoint",
            value={
                "waypoints": [
                    {"lat": 60.1699, "lon": 24.9384, "time": "2026-11-24T07:30:00Z"},
                    {"lat": 60.1750, "lon": 24.9450, "time": "2026-11-24T07:33:00Z"},
                ],
                "activity_type": "cycling",
                "environment_type": "outdoor",
            },
        ),
    },
    "DeparturesRequest": {
        "commute": Example(
            summary="When to walk to work between 7 and 10 tomorrow morning",
            value={
                "start": {"latitude": 60.1699, "longitude": 24.9384},
                "end": {"latitude": 60.1841, "longitude": 24.9503},
                "activity_type": "walking",
                "earliest": "2026-11-26T05:00:00Z",
                "latest": "2026-11-26T08:00:00Z",
                "step_minutes": 30,
            },
        )
    },
    "SubscriptionRequest": {
        "place": Example(
            summary="Observed alerts at home when the air turns unhealthy, by webhook",
            value={
                "target": {"type": "place", "lat": 60.1699, "lon": 24.9384},
                "index": "eu_eaqi_2024",
                "threshold": 3,
                "kind": {"type": "observed"},
                "timezone": "Europe/Helsinki",
                "quiet_hours": {"start": "22:00", "end": "07:00"},
                "webhook_url": "https://hooks.example.com/cleanair",
            },
        ),
        "trip": Example(
            summary="Tomorrow's forecast for a weekday walk, at 21:00, in the feed only",
            value={
                "target": {
                    "type": "trip",
                    "start": {"latitude": 60.1699, "longitude": 24.9384},
                    "end": {"latitude": 60.1841, "longitude": 24.9503},
                    "activity_type": "walking",
                    "departure": "08:00",
                    "days": [1, 2, 3, 4, 5],
                },
                "threshold": 2,
                "audience": "sensitive",
                "kind": {"type": "forecast", "target_day": "tomorrow", "send_at": "21:00"},
                "timezone": "Europe/Helsinki",
            },
        ),
    },
    "PlanRouteRequest": {
        "walk": Example(
            summary="Cleaner walking routes across town",
            value={
                "start": {"latitude": 60.1699, "longitude": 24.9384},
                "end": {"latitude": 60.1841, "longitude": 24.9503},
                "activity_type": "walking",
            },
        )
    },
}


def finish_document(app: Litestar) -> None:
    """What Litestar cannot be told where the endpoints are declared: the 400s it documents
    for every body (ours answer 422) go, every 429 and 503 declares Retry-After, each request body
    gets examples, each enumeration the contract's description."""
    schema = app.openapi_schema
    for path_item in (schema.paths or {}).values():
        for method in ("get", "post", "put", "patch", "delete"):
            operation: Operation | None = getattr(path_item, method, None)
            if operation is None:
                continue
            _finish_operation(operation)
    components = schema.components.schemas or {}
    for each in components.values():
        _describe_tags(each)
        _discriminate(each, components)
    for name, description in ENUM_DESCRIPTIONS.items():
        component = components.get(name)
        if isinstance(component, Schema):
            # A field's own description or default may have leaked onto the shared component.
            component.description = description
            component.default = None
            component.examples = None


def _describe_tags(component: Schema | Reference) -> None:
    """A tagged union's member (msgspec's `tag_field`) gets its tag property described: the
    value that tells it from the union's other members (the property is Litestar's, bare)."""
    if not isinstance(component, Schema):
        return
    for name, field in (component.properties or {}).items():
        if isinstance(field, Schema) and field.const is not None and not field.description:
            field.description = (
                f"Always `{field.const}`: `{name}` tells which of its kinds this object is"
            )


def _discriminate(component: Schema | Reference, components: dict[str, Any]) -> None:
    """A property that is one of several tagged structs gets its discriminator: the tag
    property and which component each tag names, for clients that pick the model by it."""
    if not isinstance(component, Schema):
        return
    for field in (component.properties or {}).values():
        if isinstance(field, Schema) and field.one_of:
            field.discriminator = _discriminator(field.one_of, components)


def _discriminator(
    members: Sequence[Schema | Reference], components: dict[str, Any]
) -> Discriminator | None:
    """The discriminator of a union whose members each have one constant property, the same
    one; None for any other union."""
    mapping: dict[str, str] = {}
    names: set[str] = set()
    for member in members:
        if not isinstance(member, Reference):
            return None
        target = components.get(member.ref.rsplit("/", 1)[-1])
        properties = (target.properties or {}) if isinstance(target, Schema) else {}
        tags = [
            (name, tag.const)
            for name, tag in properties.items()
            if isinstance(tag, Schema) and isinstance(tag.const, str)
        ]
        if len(tags) != 1:
            return None
        ((name, value),) = tags
        names.add(name)
        mapping[value] = member.ref
    return Discriminator(property_name=names.pop(), mapping=mapping) if len(names) == 1 else None


def _finish_operation(operation: Operation) -> None:
    for status, response in list((operation.responses or {}).items()):
        if not isinstance(response, OpenAPIResponse):
            continue
        if status == "400" and "Bad request syntax" in (response.description or ""):
            del operation.responses[status]  # type: ignore[union-attr]
        elif status == "429":
            response.headers = {**(response.headers or {}), "Retry-After": RETRY_AFTER}
        elif status == "503":
            response.headers = {
                **(response.headers or {}),
                "Retry-After": RETRY_AFTER_UNAVAILABLE,
            }
    body = operation.request_body
    if not isinstance(body, RequestBody):
        return
    for media in body.content.values():
        if isinstance(media.schema, Reference):
            name = media.schema.ref.rsplit("/", 1)[-1]
            media.examples = dict(REQUEST_EXAMPLES.get(name, {})) or None

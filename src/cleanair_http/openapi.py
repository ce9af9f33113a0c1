"""OpenAPI: the real statuses of each endpoint, the bearer scheme, version 1.0.0."""

from __future__ import annotations

from typing import Any

from litestar import Litestar
from litestar.openapi import OpenAPIConfig, ResponseSpec
from litestar.openapi.spec import Components, SecurityScheme

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


def openapi_config() -> OpenAPIConfig:
    return OpenAPIConfig(
        title="cleanair",
        version="1.0.0",
        description="Air-quality scoring, forecasts, route enrichment and cleaner route plans.",
        components=Components(
            security_schemes={BEARER: SecurityScheme(type="http", scheme="bearer")}
        ),
        path="/schema",
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

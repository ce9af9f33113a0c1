"""The one place where errors become HTTP responses (contract section 7)."""

from __future__ import annotations

import logging
from typing import Any

from litestar import Request, Response
from litestar.exceptions import HTTPException
from litestar.types import ExceptionHandlersMap

from cleanair_core.errors import (
    CleanAirError,
    Forbidden,
    InvalidPairingCode,
    NotAuthenticated,
    NotFound,
    SourceUnavailable,
    TooManyRequests,
    Unprocessable,
)

VALIDATION_FAILED = "Request validation failed"
log = logging.getLogger("cleanair.errors")

_STATUS: list[tuple[type[CleanAirError], int]] = [
    (NotAuthenticated, 401),
    (InvalidPairingCode, 401),
    (Forbidden, 403),
    (NotFound, 404),
    (Unprocessable, 422),
    (TooManyRequests, 429),
    (SourceUnavailable, 503),
]


def status_of(exc: CleanAirError) -> int:
    """The HTTP status of a core error (400 for the core's bad-request errors)."""
    for kind, status in _STATUS:
        if isinstance(exc, kind):
            return status
    return 400


def _error(
    status: int, detail: str, headers: dict[str, str] | None = None
) -> Response[dict[str, str]]:
    return Response({"detail": detail}, status_code=status, headers=headers)


def core_error(_: Request[Any, Any, Any], exc: CleanAirError) -> Response[dict[str, str]]:
    status = status_of(exc)
    headers: dict[str, str] = {}
    if isinstance(exc, TooManyRequests):
        headers["Retry-After"] = str(exc.retry_after)
    if isinstance(exc, NotAuthenticated):
        headers["WWW-Authenticate"] = 'Bearer realm="cleanair"'
    return _error(status, exc.detail, headers)


def validation_error(_: Request[Any, Any, Any], __: Exception) -> Response[dict[str, str]]:
    # Litestar reports body and parameter failures (and malformed JSON) as 400; the contract
    # wants 422 with a fixed text that never echoes the input.
    return _error(422, VALIDATION_FAILED)


def http_error(_: Request[Any, Any, Any], exc: HTTPException) -> Response[dict[str, str]]:
    headers = dict(exc.headers or {})
    if exc.status_code == 429 and "Retry-After" not in headers:
        headers["Retry-After"] = "60"
    return _error(exc.status_code, str(exc.detail), headers)


def internal_error(request: Request[Any, Any, Any], exc: Exception) -> Response[str]:
    log.error(
        "unhandled error",
        exc_info=exc,
        extra={"method": request.method, "path": request.url.path},
    )
    return Response("Internal Server Error", status_code=500, media_type="text/plain")


EXCEPTION_HANDLERS: ExceptionHandlersMap = {
    400: validation_error,
    CleanAirError: core_error,
    HTTPException: http_error,
    500: internal_error,
    Exception: internal_error,
}

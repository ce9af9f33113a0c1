"""The one place where errors become HTTP responses (contract section 7)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any, cast

from litestar import Request, Response
from litestar.exceptions import HTTPException, ValidationException
from litestar.types import (
    ASGIApp,
    ExceptionHandlersMap,
    Receive,
    ReceiveMessage,
    Scope,
    Send,
)

from cleanair_core.errors import (
    CleanAirError,
    Forbidden,
    InvalidPairingCode,
    NotAuthenticated,
    NotFound,
    SourceUnavailable,
    TooManyRequests,
    Unprocessable,
    Violation,
)
from cleanair_http.violations import MALFORMED

VALIDATION_FAILED = "Request validation failed"
#: Where a 422 lists its violations; the contract fixes `/v1`'s 422 to `detail` alone.
EXTENSION_PREFIX = "/ext/v1/"
#: A refusal Litestar made before any body reached our decoder (a parameter, say).
_UNSPECIFIED = Violation("", "invalid", "is invalid")
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
) -> Response[dict[str, Any]]:
    return Response({"detail": detail}, status_code=status, headers=headers)


def _unprocessable(
    request: Request[Any, Any, Any], detail: str, violations: Sequence[Violation]
) -> Response[dict[str, Any]]:
    """A 422: under /ext/v1 with the list of what failed (`errors`), elsewhere the contract's
    envelope alone, byte for byte."""
    if not request.url.path.startswith(EXTENSION_PREFIX):
        return _error(422, detail)
    errors = [{"field": v.field, "rule": v.rule, "message": v.message} for v in violations]
    return Response({"detail": detail, "errors": errors}, status_code=422)


def core_error(request: Request[Any, Any, Any], exc: CleanAirError) -> Response[dict[str, Any]]:
    status = status_of(exc)
    if isinstance(exc, Unprocessable):
        return _unprocessable(request, exc.detail, exc.violations)
    headers: dict[str, str] = {}
    if isinstance(exc, TooManyRequests):
        headers["Retry-After"] = str(exc.retry_after)
        metrics = getattr(request.app.state, "metrics", None)
        if metrics is not None:  # every 429 of the API passes here, whoever raised it
            metrics.too_many_requests(exc.limit)
    if isinstance(exc, SourceUnavailable):
        # A client (or a proxy) that waits this long finds an open breaker half-open.
        headers["Retry-After"] = str(exc.retry_after)
    if isinstance(exc, NotAuthenticated):
        headers["WWW-Authenticate"] = 'Bearer realm="cleanair"'
    return _error(status, exc.detail, headers)


def validation_error(request: Request[Any, Any, Any], exc: Exception) -> Response[dict[str, Any]]:
    # Litestar reports body and parameter failures (and malformed JSON) as 400; the contract
    # wants 422 with a fixed text that never echoes the input (nor do Litestar's messages
    # get near the list: they may quote it).
    extra = exc.extra if isinstance(exc, ValidationException) else None
    on_body = isinstance(extra, list) and any(
        isinstance(item, dict) and item.get("source") == "body" for item in extra
    )
    # An empty body never reaches our decoder: Litestar finds no data at all.
    return _unprocessable(request, VALIDATION_FAILED, [MALFORMED if on_body else _UNSPECIFIED])


def http_error(_: Request[Any, Any, Any], exc: HTTPException) -> Response[dict[str, Any]]:
    headers = dict(exc.headers or {})
    if exc.status_code == 429 and "Retry-After" not in headers:
        headers["Retry-After"] = "60"
    return _error(exc.status_code, str(exc.detail), headers)


#: Where `watch_disconnects` marks a scope whose client went away.
_DISCONNECTED = "cleanair.client_disconnected"


def watch_disconnects(app: ASGIApp) -> ASGIApp:
    """ASGI middleware noting in the scope when the server reports `http.disconnect`, so a
    request that failed because its client went away is told apart from a bug by what
    happened, not by the wording of a framework's message."""

    async def middleware(scope: Scope, receive: Receive, send: Send) -> None:
        async def watched_receive() -> ReceiveMessage:
            message = await receive()
            if message["type"] == "http.disconnect":
                cast(dict[str, Any], scope)[_DISCONNECTED] = True
            return message

        await app(scope, watched_receive, send)

    return middleware


def client_disconnected(scope: Scope) -> bool:
    """Whether the client of this request disconnected before it was read in full."""
    return bool(cast(dict[str, Any], scope).get(_DISCONNECTED))


def failure_kind(exc: BaseException) -> tuple[str, str]:
    """An error's type and the file:line of its innermost frame: repeats of one failure share
    it, whatever their message (which may quote input)."""
    kind = f"{type(exc).__module__}.{type(exc).__qualname__}"
    tb = exc.__traceback__
    if tb is None:
        return kind, "?"
    while tb.tb_next is not None:
        tb = tb.tb_next
    return kind, f"{tb.tb_frame.f_code.co_filename}:{tb.tb_lineno}"


class UnhandledErrors:
    """The 500 handler. Each unhandled error is logged at ERROR, but the traceback of one kind
    of failure (`failure_kind`) at most once per `interval` seconds: a failure any client can
    trigger would otherwise write kilobytes of log per request. Repeats in between get one
    short line; the next traceback says how many there were."""

    #: Distinct failures remembered; more than this many in one interval and the oldest are
    #: forgotten (their next occurrence writes a traceback again).
    MAX_KINDS = 256

    def __init__(
        self, interval: float = 60.0, monotonic: Callable[[], float] = time.monotonic
    ) -> None:
        self.interval = interval
        self.monotonic = monotonic
        self._written: dict[tuple[str, str], float] = {}
        self._suppressed: dict[tuple[str, str], int] = {}

    def __call__(self, request: Request[Any, Any, Any], exc: Exception) -> Response[Any]:
        """Plain-text 500 (the detail stays in the log), or, for a client that went away
        while its request was read, an INFO line and a 499 nobody receives."""
        where = {"method": request.method, "path": request.url.path}
        if isinstance(exc, HTTPException) and client_disconnected(request.scope):
            # Not a fault of ours; its traceback says nothing. Never the body or headers.
            log.info("client disconnected", extra=where)
            # nginx's "client closed request", so the access log does not count a 5xx.
            return Response("", status_code=499, media_type="text/plain")
        kind, at = failure_kind(exc)
        repeats = self.admit((kind, at))
        if repeats is None:
            log.error(
                "unhandled error (a repeat: its traceback was written recently)",
                extra={**where, "error": kind, "at": at},
            )
        else:
            log.error(
                "unhandled error",
                exc_info=exc,
                extra={**where, "error": kind, "at": at, "repeats_suppressed": repeats},
            )
        return Response("Internal Server Error", status_code=500, media_type="text/plain")

    def admit(self, key: tuple[str, str]) -> int | None:
        """None if this failure's traceback was written within the interval; else the number
        of repeats suppressed since it was."""
        now = self.monotonic()
        last = self._written.get(key)
        if last is not None and now - last < self.interval:
            self._suppressed[key] = self._suppressed.get(key, 0) + 1
            return None
        if key not in self._written and len(self._written) >= self.MAX_KINDS:
            oldest = min(self._written, key=self._written.__getitem__)
            del self._written[oldest]
            self._suppressed.pop(oldest, None)
        self._written[key] = now
        return self._suppressed.pop(key, 0)


def exception_handlers(unhandled: UnhandledErrors | None = None) -> ExceptionHandlersMap:
    """The handlers for a Litestar app; `unhandled` (default: the process's own) writes the
    tracebacks of unhandled errors."""
    internal_error = unhandled or _UNHANDLED
    return {
        400: validation_error,
        CleanAirError: core_error,
        HTTPException: http_error,
        500: internal_error,
        Exception: internal_error,
    }


# One per process: "once a minute" holds however many apps the process serves.
_UNHANDLED = UnhandledErrors()
EXCEPTION_HANDLERS: ExceptionHandlersMap = exception_handlers()

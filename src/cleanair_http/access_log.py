"""One structured access-log line per request: never the Authorization header or a body."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Collection
from typing import Any

from litestar.enums import ScopeType
from litestar.types import ASGIApp, Message, Receive, Scope, Send

from cleanair_core.access.connections import Caller

log = logging.getLogger("cleanair.access")


class AccessLog:
    """ASGI wrapper around the whole app, so 404s and 405s are logged too. Requests to
    `quiet_paths` (health probes, every few seconds from every orchestrator and balancer)
    are logged at DEBUG, so at INFO they do not drown the requests of callers."""

    def __init__(self, app: ASGIApp, quiet_paths: Collection[str] = ()) -> None:
        self.app = app
        self.quiet_paths = frozenset(quiet_paths)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != ScopeType.HTTP:
            await self.app(scope, receive, send)
            return
        level = logging.DEBUG if scope["path"] in self.quiet_paths else logging.INFO
        if not log.isEnabledFor(level):
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def send_and_record(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_and_record)
        finally:
            caller = scope.get("user")
            log.log(
                level,
                "request",
                extra={
                    "method": scope.get("method"),
                    "path": scope["path"],  # no query string: it could carry anything
                    "status": status,
                    "duration_ms": round((time.perf_counter() - started) * 1000, 3),
                    # Only a caller the middleware authenticated: never the raw token.
                    "connection": str(caller.connection_id) if isinstance(caller, Caller) else None,
                },
            )


#: Record attributes that are not extra fields. uvicorn puts `color_message` on its records, a
#: copy of the message with ANSI colour codes for its own console formatter: in a JSON line it
#: would only be terminal escapes in a log store.
_STANDARD = set(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {
    "message",
    "color_message",
}
#: The access log's level (`CLEANAIR_ACCESS_LOG`) by setting: `info` logs callers' requests and
#: `debug` the health probes too, whatever CLEANAIR_LOG_LEVEL says.
ACCESS_LOG_LEVELS = {"info": logging.INFO, "debug": logging.DEBUG, "off": logging.CRITICAL + 1}


class JsonFormatter(logging.Formatter):
    """Log records as one JSON object per line, extra fields included."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S%z"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        entry.update({k: v for k, v in record.__dict__.items() if k not in _STANDARD})
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def configure_logging(level: str, access_log: str = "info") -> None:
    """JSON lines on stderr at `level`; the access log at its own level (`ACCESS_LOG_LEVELS`),
    so that an operator who turns the rest down to WARNING still sees the requests."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    log.setLevel(ACCESS_LOG_LEVELS[access_log])
    quiet_upstream_urls()


def quiet_upstream_urls() -> None:
    """Keep httpx from logging request URLs: they carry coordinates (as personal as the
    request they came from) and API keys. Its warnings still get through."""
    httpx_log = logging.getLogger("httpx")
    httpx_log.setLevel(max(logging.WARNING, httpx_log.level))

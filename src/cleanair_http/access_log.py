"""One structured access-log line per request: never the Authorization header or a body.

The lines go wherever the process's logging sends them: `cleanair_runtime.logs` formats and
writes them from a thread of their own, so a request only hands its record over.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Collection

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
            # makeRecord and handle, not log.log: that looks up the calling source line by
            # walking the stack, for a file name and line number the JSON line leaves out.
            record = log.makeRecord(
                log.name,
                level,
                "",
                0,
                "request",
                (),
                None,
                extra={
                    "method": scope.get("method"),
                    "path": scope["path"],  # no query string: it could carry anything
                    "status": status,
                    "duration_ms": round((time.perf_counter() - started) * 1000, 3),
                    # Only a caller the middleware authenticated: never the raw token.
                    "connection": str(caller.connection_id) if isinstance(caller, Caller) else None,
                },
            )
            log.handle(record)

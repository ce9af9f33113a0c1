"""One structured access-log line per request: never the Authorization header or a body.

The lines go wherever the process's logging sends them: `cleanair_runtime.logs` formats and
writes them from a thread of their own, so a request only hands its record over.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
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
            # A record and handle, not log.log: that looks up the calling source line by
            # walking the stack, for a file name and line number the JSON line leaves out.
            record = request_record(
                level,
                {
                    "method": scope.get("method"),
                    "path": scope["path"],  # no query string: it could carry anything
                    "status": status,
                    "duration_ms": round((time.perf_counter() - started) * 1000, 3),
                    # Only a caller the middleware authenticated: never the raw token.
                    "connection": str(caller.connection_id) if isinstance(caller, Caller) else None,
                },
            )
            log.handle(record)


#: A record of each level per process and thread, whose fields all but the times are the same
#: for every request: `request_record` copies them.
_TEMPLATES: dict[tuple[Any, ...], dict[str, Any]] = {}
#: Threads are few (an event loop's, and a test's portals): a bound all the same.
_MAX_TEMPLATES = 64
#: Records are copied from templates on the Python whose `LogRecord.__init__` this follows.
_TEMPLATED = sys.version_info[:2] == (3, 11)


def request_record(level: int, extra: dict[str, Any]) -> logging.LogRecord:
    """The record of one request: what `log.makeRecord` would make, with `extra`'s fields.

    `LogRecord.__init__` looks up the thread's and the process's names and splits an empty
    source path on every call (with `makeRecord`'s check of each extra field, about 2 % of a
    served score's CPU); here those come from a record made once per level, process and
    thread, and only the times are new. A process that installed a record factory of its own
    gets its records from it, as does any Python but 3.11 (3.12 names the asyncio task in
    each record, 3.13 times it in nanoseconds)."""
    if not _TEMPLATED or logging.getLogRecordFactory() is not logging.LogRecord:
        return log.makeRecord(log.name, level, "", 0, "request", (), None, extra=extra)
    # A thread's ident is reused by a later thread, its name may change, and logging's
    # switches may be turned: each is part of what a template is the record of.
    key = (
        level,
        os.getpid(),
        threading.get_ident(),
        threading.current_thread().name,
        logging.logThreads,
        logging.logProcesses,
        logging.logMultiprocessing,
    )
    template = _TEMPLATES.get(key)
    if template is None:
        if len(_TEMPLATES) >= _MAX_TEMPLATES:
            _TEMPLATES.clear()
        template = _TEMPLATES[key] = vars(
            log.makeRecord(log.name, level, "", 0, "request", (), None)
        )
    record = logging.LogRecord.__new__(logging.LogRecord)
    fields = vars(record)
    fields.update(template)
    # As LogRecord.__init__ sets them (Python 3.11).
    now = time.time()
    fields["created"] = now
    fields["msecs"] = int((now - int(now)) * 1000) + 0.0
    fields["relativeCreated"] = (now - logging._startTime) * 1000  # type: ignore[attr-defined]
    fields.update(extra)
    return record

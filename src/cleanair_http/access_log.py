"""One structured access-log line per request: never the Authorization header or a body.

Log lines are formatted and written by a thread of their own (`configure_logging`): a request
only hands its record over, and a clean stop writes every line handed over before it.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import sys
import threading
import time
from collections.abc import Collection
from queue import SimpleQueue
from typing import Any, TextIO

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
        elif record.exc_text:  # formatted when it was handed over (`_Handover`)
            entry["exception"] = record.exc_text
        return json.dumps(entry, default=str)


class _Writer:
    """Formats records as JSON lines and writes them to `stream` from a thread of its own,
    in the order they were handed over; stopped (`stop`), it writes them on the spot."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream  # replaced by `configure_logging`, while stopped
        self.formatter = JsonFormatter()
        # Serialises writes once stopped, when any thread may write.
        self.lock = threading.Lock()
        self.queue: SimpleQueue[logging.LogRecord | threading.Event | None] | None = None
        self.thread: threading.Thread | None = None
        self.paused = False  # stopped for a fork, to start again after it

    def start(self) -> None:
        self.queue = SimpleQueue()
        self.thread = threading.Thread(
            target=self._run, args=(self.queue,), name="cleanair-log-writer", daemon=True
        )
        self.thread.start()

    def stop(self) -> None:
        """Write every line handed over so far and end the thread; later lines are written
        by whoever logs them."""
        queue, thread = self.queue, self.thread
        if queue is None or thread is None:
            return
        self.queue = self.thread = None
        queue.put(None)
        thread.join()
        # A line handed over as the thread was told to end (another thread's) is not lost.
        while not queue.empty():
            item = queue.get()
            if isinstance(item, logging.LogRecord):
                self.write([item])

    def put(self, record: logging.LogRecord) -> None:
        queue = self.queue
        if queue is None:
            with self.lock:
                self.write([record])
        else:
            queue.put(record)

    def flush(self) -> None:
        """Return once every line handed over so far is written."""
        queue = self.queue
        if queue is None:
            return
        written = threading.Event()
        queue.put(written)
        written.wait()

    def _run(self, queue: SimpleQueue[logging.LogRecord | threading.Event | None]) -> None:
        while True:
            batch: list[logging.LogRecord] = []
            item = queue.get()
            # What has piled up meanwhile goes out in one write: one system call, not one a line.
            while True:
                if item is None:
                    self.write(batch)
                    return
                if isinstance(item, threading.Event):
                    self.write(batch)
                    batch = []
                    item.set()
                else:
                    batch.append(item)
                if queue.empty():
                    break
                item = queue.get()
            self.write(batch)

    def write(self, records: list[logging.LogRecord]) -> None:
        lines = []
        for record in records:
            try:
                lines.append(self.formatter.format(record) + "\n")
            except Exception:  # as logging's own handlers do: report it, log on
                logging.Handler().handleError(record)
        if not lines:
            return
        try:
            self.stream.write("".join(lines))
            self.stream.flush()
        except Exception:
            logging.Handler().handleError(records[-1])


class _Handover(logging.Handler):
    """The root logger's handler: hands each record to the writer thread."""

    def __init__(self, writer: _Writer) -> None:
        super().__init__()
        self.writer = writer

    def handle(self, record: logging.LogRecord) -> bool:
        # Without Handler.handle's lock: the queue takes records from any thread.
        if self.filter(record):
            self.emit(record)
        return True

    def emit(self, record: logging.LogRecord) -> None:
        # The message and any traceback are made now, from the objects as they are; the
        # extra fields are plain values (strings, numbers) the formatter reads later.
        record.msg, record.args = record.getMessage(), None
        if record.exc_info:
            if not record.exc_text:
                record.exc_text = self.writer.formatter.formatException(record.exc_info)
            record = logging.makeLogRecord({**record.__dict__, "exc_info": None})
        self.writer.put(record)


#: The process's writer, started by `configure_logging`.
_WRITER = _Writer(sys.stderr)


def configure_logging(level: str, access_log: str = "info") -> None:
    """JSON lines on stderr at `level`; the access log at its own level (`ACCESS_LOG_LEVELS`),
    so that an operator who turns the rest down to WARNING still sees the requests.

    The lines are formatted and written by a thread, so a request never waits for them; they
    are all written when the process ends normally (or `stop_logging` is called). A process
    killed outright loses those not yet written, a few milliseconds' worth at most."""
    _WRITER.stop()  # the lines of an earlier configuration go where it sent them
    _WRITER.stream = sys.stderr
    _WRITER.start()
    root = logging.getLogger()
    root.handlers[:] = [_Handover(_WRITER)]
    root.setLevel(level)
    log.setLevel(ACCESS_LOG_LEVELS[access_log])
    quiet_upstream_urls()


def flush_logs() -> None:
    """Return once every line logged so far is written."""
    _WRITER.flush()


def stop_logging() -> None:
    """Write every line logged so far and stop the writer thread: later lines are written
    as they are logged."""
    _WRITER.stop()


def _pause_writer() -> None:
    # A fork copies no threads: the writer is stopped first, every line written and no lock
    # held, then started again in both processes.
    if _WRITER.thread is not None:
        _WRITER.stop()
        _WRITER.paused = True


def _resume_writer() -> None:
    if _WRITER.paused:
        _WRITER.paused = False
        _WRITER.start()


os.register_at_fork(
    before=_pause_writer, after_in_parent=_resume_writer, after_in_child=_resume_writer
)
atexit.register(stop_logging)


def quiet_upstream_urls() -> None:
    """Keep httpx from logging request URLs: they carry coordinates (as personal as the
    request they came from) and API keys. Its warnings still get through."""
    httpx_log = logging.getLogger("httpx")
    httpx_log.setLevel(max(logging.WARNING, httpx_log.level))

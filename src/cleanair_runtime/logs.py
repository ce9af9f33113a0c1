"""The processes' logs: JSON lines on stderr or a file, written by a thread of their own.

`configure_logging` sets them up at a process's start: a request (the access log's line,
`cleanair_http.access_log`) only hands its record over, and a clean stop writes every line
handed over before it.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import stat
import sys
import threading
from collections import deque
from pathlib import Path
from typing import Any, TextIO

log = logging.getLogger("cleanair.access")


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


#: One encoder for every line: json.dumps with an argument makes a new one each call.
_ENCODER = json.JSONEncoder(default=str)


class JsonFormatter(logging.Formatter):
    """Log records as one JSON object per line, extra fields included."""

    def __init__(self) -> None:
        super().__init__()
        self._second = -1
        self._stamp = ""

    def format(self, record: logging.LogRecord) -> str:
        # Lines come many to the second: its stamp is made once.
        second = int(record.created)
        if second != self._second:
            self._stamp = self.formatTime(record, "%Y-%m-%dT%H:%M:%S%z")
            self._second = second
        entry: dict[str, Any] = {
            "time": self._stamp,
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        entry.update({k: v for k, v in record.__dict__.items() if k not in _STANDARD})
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:  # formatted when it was handed over (`_Handover`)
            entry["exception"] = record.exc_text
        return _ENCODER.encode(entry)


#: How often the writer thread wakes to write the lines logged meanwhile. Logging a line never
#: wakes it (that would be a system call and a thread switch a request); a line waits this
#: long at most.
WRITE_INTERVAL_S = 0.05


class _Writer:
    """Formats records as JSON lines and writes them to `stream` from a thread of its own,
    in the order they were handed over; stopped (`stop`), it writes them on the spot."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream  # replaced by `configure_logging`, while stopped
        #: The stream when it is a log file `configure_logging` opened (to close).
        self.log_file: TextIO | None = None
        self.formatter = JsonFormatter()
        # Appended to by any thread with no lock (deque appends are atomic).
        self.pending: deque[logging.LogRecord] = deque()
        self.lock = threading.Lock()  # one thread writes the stream at a time, in order
        self.wake = threading.Event()
        self.thread: threading.Thread | None = None
        self.paused = False  # stopped for a fork, to start again after it

    def start(self) -> None:
        self.wake.clear()
        self.thread = threading.Thread(target=self._run, name="cleanair-log-writer", daemon=True)
        self.thread.start()

    def stop(self) -> None:
        """Write every line handed over so far and end the thread; later lines are written
        by whoever logs them."""
        thread = self.thread
        if thread is None:
            return
        self.thread = None
        self.wake.set()
        thread.join()
        self.flush()

    def put(self, record: logging.LogRecord) -> None:
        self.pending.append(record)
        if self.thread is None:
            self.flush()

    def flush(self) -> None:
        """Write every line handed over so far, from this thread."""
        with self.lock:
            records = []
            while self.pending:
                records.append(self.pending.popleft())
            self.write(records)

    def _run(self) -> None:
        while self.thread is not None:
            self.wake.wait(WRITE_INTERVAL_S)
            self.flush()

    def write(self, records: list[logging.LogRecord]) -> None:
        lines = []
        for record in records:
            try:
                lines.append(self.formatter.format(record) + "\n")
            except Exception:  # as logging's own handlers do: report it, log on
                logging.Handler().handleError(record)
        if not lines:
            return
        # What piled up goes out in one write: one system call, not one a line.
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


def configure_logging(level: str, access_log: str = "info", file: Path | None = None) -> None:
    """JSON lines on stderr (or appended to `file`) at `level`; the access log at its own level
    (`ACCESS_LOG_LEVELS`), so that an operator who turns the rest down to WARNING still sees
    the requests.

    The lines are formatted and written by a thread, so a request never waits for them; they
    are all written when the process ends normally (or `stop_logging` is called). A process
    killed outright loses those not yet written, a few milliseconds' worth at most."""
    stream = sys.stderr if file is None else open_log_file(file)
    _WRITER.stop()  # the lines of an earlier configuration go where it sent them
    if _WRITER.log_file is not None:  # the file an earlier configuration opened
        _WRITER.log_file.close()
    _WRITER.stream = stream
    _WRITER.log_file = None if file is None else stream
    _WRITER.start()
    root = logging.getLogger()
    root.handlers[:] = [_Handover(_WRITER)]
    root.setLevel(level)
    log.setLevel(ACCESS_LOG_LEVELS[access_log])
    quiet_upstream_urls()
    name_uvicorns_lines()


#: The logger name uvicorn's own lines are written under (`name_uvicorns_lines`).
SERVER_LOGGER = "cleanair.server"


class _Renamed(logging.Filter):
    """Writes a logger's records under another name."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.new_name = name

    def filter(self, record: logging.LogRecord) -> bool:
        record.name = self.new_name
        return True


def name_uvicorns_lines() -> None:
    """Write uvicorn's start and stop lines ("Started server process", "Application shutdown
    complete", ...) and its errors under `SERVER_LOGGER`, not `uvicorn.error`: they are the
    server's lines, not errors, and an operator who follows the `cleanair` loggers sees them
    among ours."""
    uvicorn_log = logging.getLogger("uvicorn.error")
    if not any(isinstance(f, _Renamed) for f in uvicorn_log.filters):
        uvicorn_log.addFilter(_Renamed(SERVER_LOGGER))


#: A log file's mode: the lines name connections, paths and client errors, for nobody else.
LOG_FILE_MODE = 0o600


def open_log_file(path: Path) -> TextIO:
    """`path` opened to append to, created `LOG_FILE_MODE` whatever the umask; an existing
    regular file that others may read loses that access (its group's is left: a log
    shipper's), a device or FIFO keeps its mode."""
    # O_APPEND: every process of `serve --workers N` appends to the same file, each line
    # batch in one write.
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, LOG_FILE_MODE)
    try:
        status = os.fstat(fd)
        mode = status.st_mode & 0o777
        # A regular file only: an operator logging to /dev/null, a FIFO or a terminal names a
        # shared device whose mode is not ours to narrow (taking /dev/null's bits from others
        # broke every program of other accounts that writes to it, initdb among them).
        if stat.S_ISREG(status.st_mode) and mode & 0o007:
            os.fchmod(fd, mode & ~0o007)
        return os.fdopen(fd, "a", encoding="utf-8")
    except BaseException:
        os.close(fd)
        raise


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
        # A thread writing on the spot as the process forked holds the lock in the copy.
        _WRITER.lock = threading.Lock()
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

"""Text for an operator's terminal: what came from data or input is shown, never obeyed."""

from __future__ import annotations

import os
import re
import select
import sys
from collections.abc import Callable
from typing import TextIO

#: Escapes an operator reads at a glance; any other character is shown by its code point.
_NAMED_ESCAPES = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def escape_nonprintable(value: object) -> str:
    """`value` as text safe for a terminal: every character that `str.isprintable()` rejects
    is shown as a Python-style escape (ESC as `\\x1b`, CR as `\\r`, U+202E as `\\u202e`).

    Everything the CLI prints that came from data or from its arguments goes through this, so
    a connection name (any text an API client chose) cannot move the cursor, clear the screen
    or reorder the line. Printable text, non-ASCII letters included, is returned unchanged;
    a backslash is not escaped, so the function is idempotent and safe to apply twice.
    """
    text = str(value)
    if text.isprintable():
        return text
    return "".join(char if char.isprintable() else _escape(char) for char in text)


def _escape(char: str) -> str:
    named = _NAMED_ESCAPES.get(char)
    if named is not None:
        return named
    code = ord(char)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def cannot_listen(host: str, port: int | None, reason: str | OSError) -> int:
    """Say on stderr, in one line, why a command cannot listen on `host:port`; its exit
    status (1: the operation was refused)."""
    if isinstance(reason, OSError):  # in use, or not an address of this machine
        reason = reason.strerror or str(reason)
    print(
        f"cleanair: cannot listen on {escape_nonprintable(host)}:{port}: "
        f"{escape_nonprintable(reason)}",
        file=sys.stderr,
        flush=True,
    )
    return 1


#: The exit status of a command whose stdout was closed by its reader (`cleanair stations
#: list | head -1`): 128 + SIGPIPE, what a shell reports for `yes | head`, so a script under
#: `set -o pipefail` can tell that the output was cut short.
CLOSED_PIPE_STATUS = 141


def quiet_on_closed_pipe(command: Callable[[], int]) -> int:
    """`command()`'s exit status, or `CLOSED_PIPE_STATUS` without a word when stdout is a pipe
    whose reader went away, whenever that is noticed: mid-output or at the last flush. A
    broken pipe of anything else (stdout still read) is raised as it came.

    stdout is flushed here, so the interpreter's own flush at exit has nothing left to fail
    on; after a failure it points at /dev/null, where what stayed in its buffer then goes.
    What the command did before (an import's writes) stands.
    """
    try:
        try:
            return command()
        finally:
            sys.stdout.flush()
    except BrokenPipeError:
        if not _reader_gone(sys.stdout):
            raise
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, sys.stdout.fileno())
        finally:
            os.close(devnull)
        return CLOSED_PIPE_STATUS


def _reader_gone(stream: TextIO) -> bool:
    """Whether `stream`'s file is a pipe (or socket) nobody reads any more: poll says so
    without writing to it."""
    try:
        fd = stream.fileno()
    except (OSError, ValueError):  # no file (io.UnsupportedOperation), or closed
        return False
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))


_DIGIT_RUNS = re.compile(r"([0-9]+)")


def natural_key(text: str) -> tuple[tuple[str | int, ...], str]:
    """A sort key that orders `text` by its runs of digits as numbers: `openaq:2` before
    `openaq:10`. Text and numbers alternate in the same places of every key (text first), so
    any two compare; the text itself breaks ties (`a01` and `a1` are never equal)."""
    parts: list[str | int] = []
    for index, part in enumerate(_DIGIT_RUNS.split(text)):
        parts.append(int(part) if index % 2 else part)
    return tuple(parts), text

"""Operators' text files read without trusting them: only regular files (a device such as
/dev/zero never ends; a pipe would be read once), and a line at most so many characters, read
no further than that, so one endless line cannot fill the memory."""

from __future__ import annotations

import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TextIO

from cleanair_core.errors import OperatorError

#: The longest line an import reads, in characters, its line break not counted: forty times
#: an OpenAQ archive row, twenty times a Wi-Fi access point's.
MAX_LINE_CHARS = 4_096


def check_regular(path: Path, error: Callable[[str], Exception] = OperatorError) -> None:
    """`error(message)` unless `path` is a regular file (or a link to one)."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise error(f"no such file: {path}") from None
    except OSError as exc:
        raise error(f"cannot read {path}: {exc.strerror or exc}") from None
    if stat.S_ISDIR(mode):
        raise error(f"{path} is a folder, not a file")
    if not stat.S_ISREG(mode):
        raise error(f"{path} is not a regular file (a device, pipe or socket): give a file's path")


def bounded_lines(
    name: str,
    handle: TextIO,
    what: str,
    limit: int = MAX_LINE_CHARS,
    error: Callable[[str], Exception] = OperatorError,
) -> Iterator[str]:
    """The lines of `handle` (opened with `newline=""`), line breaks kept, never asking it for
    more than `limit` + 2 characters at once: `error(message)` naming the line's number when
    one is longer than `limit` characters, before the rest of it is read. `what` names the
    rows the file should hold ("which no {what} is")."""
    number = 0
    while line := handle.readline(limit + 2):
        number += 1
        body = line.removesuffix("\n").removesuffix("\r")
        if len(body) > limit:
            raise error(
                f"{name}, line {number}: longer than {limit:,} characters, which no {what} is"
            )
        yield line

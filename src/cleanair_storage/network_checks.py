"""A network file's data checksum, read through once per file and boot (issue 34).

Every process that maps a network file checked its data's CRC by reading the whole file: on
the generated 5M-node city 2.3 GB, seconds of CPU at every start and reload of every API and
plan process. Now the first process that finds the file intact leaves a mark beside it (a dot
file of the directory): the machine's boot, and the file's identity and last change (device,
inode, size, modification and change times). A later process whose boot and file match the
mark reads the header (still checked by its own CRC) and maps the data at once.

What still reads the whole file: a new boot (the disk may have been written by anything
meanwhile), and any write to the file after the mark, which changes its times. A write within
the clock's granularity of the file's own last change could leave its times as they were, so
a file changed less than `SETTLED_NS` before it is checked gets no mark: it is read through
again next time, as before.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable
from pathlib import Path

#: A file changed more recently than this before its check is not marked.
SETTLED_NS = 2_000_000_000
_MARK = ".verified"
_BOOT_ID = Path("/proc/sys/kernel/random/boot_id")

#: The wall clock, in nanoseconds (the file times' clock); tests set it.
now_ns: Callable[[], int] = time.time_ns


def mark_path(path: Path) -> Path:
    """Where the mark of the network file at `path` is kept."""
    return path.with_name(f".{path.name}{_MARK}")


def is_mark(path: Path) -> bool:
    return path.name.startswith(".") and path.name.endswith(_MARK)


def marked_file(mark: Path) -> Path:
    """The network file a mark is of."""
    return mark.with_name(mark.name[1 : -len(_MARK)])


def boot() -> str | None:
    """This boot of the machine (Linux); None elsewhere, where nothing is marked."""
    try:
        return _BOOT_ID.read_text().strip() or None
    except OSError:
        return None


def _identity(fd: int, crc: int) -> dict[str, object] | None:
    here = boot()
    if here is None:
        return None
    s = os.fstat(fd)
    return {
        "boot": here,
        "file": [s.st_dev, s.st_ino, s.st_size, s.st_mtime_ns, s.st_ctime_ns],
        "crc": crc,
    }


def checked_this_boot(path: Path, fd: int, crc: int) -> bool:
    """Whether the file at `path` (open as `fd`), whose data's CRC its header says is `crc`,
    was found intact since the machine booted and not changed since."""
    identity = _identity(fd, crc)
    if identity is None:
        return False
    try:
        return bool(json.loads(mark_path(path).read_text()) == identity)
    except (OSError, ValueError):
        return False


def mark_checked(path: Path, fd: int, crc: int) -> None:
    """Mark the file at `path` (open as `fd`) as found intact now, when it has settled; a mark
    that cannot be written is no mark (the next process reads the file through)."""
    identity = _identity(fd, crc)
    if identity is None or now_ns() - os.fstat(fd).st_ctime_ns < SETTLED_NS:
        return
    mark = mark_path(path)
    temporary = mark.with_name(f"{mark.name}.{os.getpid()}")
    with contextlib.suppress(OSError):
        temporary.write_text(json.dumps(identity))
        os.replace(temporary, mark)  # whole or not at all: a torn mark matches nothing
    with contextlib.suppress(OSError):
        temporary.unlink(missing_ok=True)

"""How much of a network file a process maps for what it reads (issue 34).

Linux caches a file written or read ahead in large folios (up to 2 MiB on ext4 here), and a
read fault in a mapping maps the whole folio it lands in: a plan reading one node mapped
2 MiB of every array around it. A network file's pages are therefore brought into the cache
in single pages (dropped after the write, read through for the checksum without read-ahead):
a fault then maps the kernel's fault-around window (64 KiB) at most.
"""

from __future__ import annotations

import mmap
import os
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from cleanair_storage.network_files import NetworkFiles

#: The most a single read fault may map: the kernel's fault-around window (64 KiB) and a
#: page's worth of slack, far below a large folio (2 MiB).
FAULT_AROUND = 68 * 1024


def mapped_bytes(path: Path) -> int:
    """Resident bytes of this process's mappings of `path` (from /proc/self/smaps)."""
    total, ours = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split(maxsplit=1)[0]
        if "-" in head and not head.endswith(":"):
            ours = line.rstrip().endswith(str(path))
        elif ours and head == "Rss:":
            total += int(line.split()[1]) * 1024
    return total


def touched(values: npt.NDArray[np.float64], path: Path, mapped: npt.NDArray[Any]) -> int:
    """Bytes of `path` mapped after reading two values a third of the way apart."""
    assert mapped_bytes(path) == 0  # nothing read yet: checking it mapped nothing
    for at in (len(values) // 3, 2 * len(values) // 3):
        assert mapped[at] == values[at]
    return mapped_bytes(path)


def test_a_written_file_leaves_no_large_folios_in_the_cache(tmp_path: Path) -> None:
    """The writer drops what its writes cached: a process mapping the file at once (one
    whose check was done this boot, say) reads it back page by page."""
    values = np.random.default_rng(3).random(4 << 20)  # 32 MiB of float64
    path = NetworkFiles(tmp_path).write("north", "k1", {"x": values}, {})
    with path.open("rb") as file:
        whole = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
    try:
        mapped = np.frombuffer(whole, dtype=np.float64)
        first = len(mapped) - len(values)  # after the header
        assert 0 < touched(values, path, mapped[first:]) <= 2 * FAULT_AROUND
        del mapped
    finally:
        whole.close()


def test_a_file_read_through_is_cached_page_by_page(tmp_path: Path) -> None:
    """A file cached in large folios by another writer (copied in, restored from a backup)
    is cached again page by page by the checksum's read-through of its first open."""
    files = NetworkFiles(tmp_path)
    values = np.random.default_rng(4).random(4 << 20)
    path = files.write("north", "k1", {"x": values}, {})
    data = path.read_bytes()
    path.unlink()
    with path.open("wb") as out:  # an ordinary write: cached in large folios
        out.write(data)
        out.flush()
        os.fsync(out.fileno())  # written back (a dirty page is never dropped)
    opened = files.open("north", "k1")
    assert opened is not None
    assert 0 < touched(values, path, opened.arrays["x"]) <= 2 * FAULT_AROUND

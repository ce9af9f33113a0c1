"""Street networks in files that every process of a machine maps read-only: one copy in memory.

The database stays the source of truth (a PostgreSQL deployment spans machines); each machine
lays a network's arrays, and what the adapters derive from them at load (a router's arcs and
snapping index, the street level's increments), out in one file of a local directory, and
every API and plan process maps it. The kernel keeps one copy of the pages, whatever the
number of processes (they count as each process's shared, clean memory).

A file is named by its network and a key of the network's stored version (name, import time,
sizes, source) and of the layout (`FORMAT`, and the derivation's own version): a network
imported again gets a new file, and a file of another layout is never read. Each file carries
a checksum of its header and one of its data, checked when a process maps it (read through the
file, not the mapping, so the check pages nothing into the process): a damaged file is rebuilt,
never used. The data's is read through once per file and boot (`network_checks.py`).

Writing: the first process that misses a file takes the directory's lock (`flock`; another
process waiting for it then finds the file made), loads the networks from the database, derives
and writes each missing file as a temporary file (synced, then renamed into place, the
directory synced): a crash mid-write leaves only a temporary file, which no reader opens and the
next writer removes. Files of versions no longer stored are removed by the writer and by every
load that finds the lock free; a process still mapping one keeps its pages (Linux keeps an
unlinked file's mapped pages until they are unmapped), so plans running on an old network
finish on it.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import mmap
import os
import re
import struct
import zlib
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import attrs

from cleanair_core.routes.network import NetworkSummary, StreetNetwork
from cleanair_storage.network_arrays import (
    AREA_ARRAYS,
    NETWORK_ARRAYS,
    names_bytes,
    names_of,
)
from cleanair_storage.network_checks import (
    checked_this_boot,
    is_mark,
    mark_checked,
    marked_file,
)

if TYPE_CHECKING:
    import numpy.typing as npt

#: The layout of a file; a change to it (or to what is stored) changes every key.
FORMAT = 1
_MAGIC = b"CLNAIRN1"
_PREFIX = struct.Struct("<8sII")  # magic, header length, header CRC-32
_ALIGN = 64
_SUFFIX = ".network"
_TEMPORARY = ".partial"
_LOCK = ".lock"
_CHUNK = 1 << 22

log = logging.getLogger("cleanair.networks")

Derive = Callable[[StreetNetwork], Mapping[str, "npt.NDArray[Any]"]]


class NetworkSource(Protocol):
    """What the mapped networks are loaded from: the database's networks."""

    def network_summaries(self) -> list[NetworkSummary]: ...

    def load_networks(self) -> list[StreetNetwork]: ...


def network_key(
    name: str, imported_at: datetime | None, nodes: int, edges: int, source: str, derivation: str
) -> str:
    """The key of one stored version of a network, in one layout."""
    version = [
        FORMAT,
        derivation,
        name,
        "" if imported_at is None else imported_at.isoformat(),
        nodes,
        edges,
        source,
    ]
    return hashlib.sha256(json.dumps(version).encode()).hexdigest()[:24]


@attrs.frozen
class MappedFile:
    """One file's arrays (read-only views of its mapping) and the values stored beside them."""

    path: Path
    arrays: Mapping[str, npt.NDArray[Any]]
    values: Mapping[str, Any]


class NetworkFiles:
    """The directory of one machine's network files."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def path(self, name: str, key: str) -> Path:
        return self.directory / f"{name}.{key}{_SUFFIX}"

    @contextlib.contextmanager
    def lock(self, *, wait: bool = True) -> Iterator[bool]:
        """The directory's lock, held by the one process writing or removing files; without
        `wait`, whether it was free (and is now held)."""
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(self.directory / _LOCK, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                yield False
                return
            yield True
        finally:
            os.close(fd)  # closing releases the lock

    def write(
        self,
        name: str,
        key: str,
        arrays: Mapping[str, npt.NDArray[Any]],
        values: Mapping[str, Any],
    ) -> Path:
        """Write one file: a temporary one, synced, then renamed into place (call with the
        lock held)."""
        import numpy as np

        layout: dict[str, list[Any]] = {}
        offset = 0
        parts: list[npt.NDArray[Any]] = []
        for array_name, array in arrays.items():
            native = np.ascontiguousarray(array)
            little = native.astype(native.dtype.newbyteorder("<"), copy=False)
            layout[array_name] = [little.dtype.str, list(little.shape), offset, little.nbytes]
            parts.append(little)
            offset = _aligned(offset + little.nbytes)
        data_crc = 0
        for part in parts:
            data_crc = _crc_of(part.reshape(-1).view(np.uint8).data, data_crc)
        header = json.dumps(
            {"name": name, "key": key, "arrays": layout, "values": dict(values), "crc": data_crc},
            sort_keys=True,
        ).encode()
        start = _aligned(_PREFIX.size + len(header))
        final = self.path(name, key)
        temporary = final.with_name(final.name + _TEMPORARY)
        with open(temporary, "wb") as out:
            out.write(_PREFIX.pack(_MAGIC, len(header), zlib.crc32(header)))
            out.write(header)
            for part, (_, _, at, _) in zip(parts, layout.values(), strict=True):
                out.seek(start + at)
                out.write(part.reshape(-1).view(np.uint8).data)
            out.truncate(start + offset)
            out.flush()
            os.fsync(out.fileno())
            # The writes left the file cached in large folios: dropped now that the pages are
            # clean, the first reader brings them back in single pages (`_single_pages`).
            os.posix_fadvise(out.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
        os.chmod(temporary, 0o644)
        os.replace(temporary, final)
        _sync_directory(self.directory)
        return final

    def open(self, name: str, key: str) -> MappedFile | None:
        """The file of `name` at `key`, mapped read-only; None when there is none, or it is
        damaged or of another version (it is then to be written again)."""
        import numpy as np

        path = self.path(name, key)
        try:
            file = open(path, "rb")  # noqa: SIM115 (closed below; a missing file is no file)
        except FileNotFoundError:
            return None
        with file:
            read = _checked(file, name, key)
            if read is None:
                return None
            header, start = read
            mapped = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
        arrays: dict[str, npt.NDArray[Any]] = {}
        for array_name, (kind, shape, at, nbytes) in header["arrays"].items():
            dtype = np.dtype(kind)
            count = nbytes // dtype.itemsize
            flat = np.frombuffer(mapped, dtype=dtype, count=count, offset=start + at)
            arrays[array_name] = flat.reshape(shape)
        return MappedFile(path, arrays, header["values"])

    def remove_except(self, keep: set[Path]) -> list[Path]:
        """Remove every network file but `keep`, and every temporary file (call with the lock
        held: no other process is writing one); the files removed."""
        removed = []
        for path in self.directory.glob(f"*{_SUFFIX}*"):
            if is_mark(path):  # goes with its file
                if marked_file(path) not in keep:
                    with contextlib.suppress(FileNotFoundError):
                        path.unlink()
                continue
            temporary = path.name.endswith(_SUFFIX + _TEMPORARY)
            if (temporary or path.name.endswith(_SUFFIX)) and path not in keep:
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
                    removed.append(path)
        return removed


def _aligned(offset: int) -> int:
    return -(-offset // _ALIGN) * _ALIGN


def _crc_of(data: memoryview, crc: int) -> int:
    for first in range(0, len(data), _CHUNK):
        crc = zlib.crc32(data[first : first + _CHUNK], crc)
    return crc


def _checked(file: Any, name: str, key: str) -> tuple[dict[str, Any], int] | None:
    """The header of an intact file of `name` at `key`, and where its data starts."""
    prefix = file.read(_PREFIX.size)
    if len(prefix) != _PREFIX.size:
        return None
    magic, length, header_crc = _PREFIX.unpack(prefix)
    header_bytes = file.read(length)
    if magic != _MAGIC or len(header_bytes) != length or zlib.crc32(header_bytes) != header_crc:
        return None
    try:
        header = json.loads(header_bytes)
    except ValueError:
        return None
    if header.get("name") != name or header.get("key") != key:
        return None
    start = _aligned(_PREFIX.size + length)
    arrays = header["arrays"]
    end = start + max((at + nbytes for _, _, at, nbytes in arrays.values()), default=0)
    if os.fstat(file.fileno()).st_size < end:
        return None
    path = Path(file.name)
    if checked_this_boot(path, file.fileno(), header["crc"]):
        return header, start  # read through already since the machine booted, and unchanged
    _single_pages(file.fileno())
    # Read through the file, not the mapping: the pages go to the cache, not to this process.
    crc = 0
    buffer = bytearray(_CHUNK)
    for _, _, at, nbytes in sorted(arrays.values(), key=lambda layout: layout[2]):
        file.seek(start + at)
        left = nbytes
        while left:
            got = file.readinto(memoryview(buffer)[: min(left, _CHUNK)])
            if not got:
                return None
            crc = zlib.crc32(memoryview(buffer)[:got], crc)
            left -= got
    if crc != header["crc"]:
        return None
    mark_checked(path, file.fileno(), crc)
    return header, start


def _single_pages(fd: int) -> None:
    """Have the file's pages cached one by one from here on, not in large folios.

    Linux caches a file written or read ahead in large folios (up to 2 MiB on ext4), and a
    fault in a mapping maps the whole folio it lands in: a plan reading one node mapped 2 MiB
    of each array around it, and a plan process held 130-195 MiB of the 480 MiB file of the
    million-node city after seven walks. Cached page by page (the cached large folios that
    no process maps dropped, then read without read-ahead: `POSIX_FADV_RANDOM`), a fault maps
    the kernel's fault-around window, 64 KiB, at most: 60-115 MiB. `madvise(MADV_RANDOM)` on
    the mapping does not do it: it changes how a fault reads a page not cached, not how much
    of a cached folio it maps, and with the file not cached each fault became a disk read of
    its own (plans 2-3x slower). Once per file and boot, with the checksum's read-through.
    """
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)


def _sync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


class MappedNetworks:
    """`load_networks` and `network_summaries` of a store, the networks mapped from files.

    `derive` gives the arrays the adapters derive from a network at load (names prefixed by
    each adapter); `derivation` names their version (a new one writes new files).
    """

    def __init__(
        self, store: NetworkSource, files: NetworkFiles, derive: Derive, derivation: str
    ) -> None:
        self._store = store
        self.files = files
        self._derive = derive
        self._derivation = derivation

    def network_summaries(self) -> list[NetworkSummary]:
        return self._store.network_summaries()

    def load_networks(self) -> list[StreetNetwork]:
        """The stored networks, mapped from this machine's files (written first where
        missing, stale or damaged); the database's own copies when the directory cannot be
        used (a read-only or full disk, say: logged, and the service goes on)."""
        try:
            found = self._mapped()
            if found is None:
                return self._written()
        except OSError as exc:
            log.warning(
                "street networks loaded without their files: each process holds a copy",
                extra={
                    "directory": str(self.files.directory),
                    "error": f"{type(exc).__name__}: {exc.strerror or exc}",
                },
            )
            return self._store.load_networks()
        networks, paths = found
        with self.files.lock(wait=False) as free:
            if free:
                self.files.remove_except(paths)
        return networks

    def _mapped(self) -> tuple[list[StreetNetwork], set[Path]] | None:
        """The networks the summaries name, each mapped from its file; None when one has
        none (or a damaged one)."""
        networks: list[StreetNetwork] = []
        paths: set[Path] = set()
        for summary in self._store.network_summaries():
            key = network_key(
                summary.name,
                summary.imported_at,
                summary.nodes,
                summary.edges,
                summary.source,
                self._derivation,
            )
            mapped = self.files.open(summary.name, key) if _NAME.fullmatch(summary.name) else None
            if mapped is None:
                return None
            networks.append(network_of(mapped))
            paths.add(mapped.path)
        return networks, paths

    def _written(self) -> list[StreetNetwork]:
        with self.files.lock():
            # Another process may have written them while this one waited for the lock.
            found = self._mapped()
            if found is not None:
                return found[0]
            # Loaded under the lock: the database may hold a newer version than the summaries
            # said, and it is that one that is written.
            networks: list[StreetNetwork] = []
            paths: set[Path] = set()
            for network in self._store.load_networks():
                if not _NAME.fullmatch(network.name):  # never a path of its own making
                    networks.append(network)
                    continue
                key = network_key(
                    network.name,
                    network.imported_at,
                    network.node_count,
                    network.edge_count,
                    network.source,
                    self._derivation,
                )
                mapped = self.files.open(network.name, key)
                if mapped is None:
                    arrays, values = stored_form(network)
                    arrays.update(self._derive(network))
                    self.files.write(network.name, key, arrays, values)
                    del arrays
                    mapped = self.files.open(network.name, key)
                    if mapped is None:
                        raise OSError(f"the network file of {network.name} cannot be read back")
                networks.append(network_of(mapped))
                paths.add(mapped.path)
            self.files.remove_except(paths)
        _release_freed_memory()
        return networks


def _release_freed_memory() -> None:
    """Give the system back what deriving freed: the allocator keeps freed pieces of a build's
    heap (hundreds of megabytes for a million nodes) as the process's own otherwise."""
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)


def stored_form(network: StreetNetwork) -> tuple[dict[str, npt.NDArray[Any]], dict[str, Any]]:
    """A network's own arrays and values, as a file keeps them."""
    import numpy as np

    arrays: dict[str, npt.NDArray[Any]] = {}
    for name, kind in NETWORK_ARRAYS:
        array = getattr(network, name)
        if array is not None:
            arrays[f"network.{name}"] = np.asarray(array, dtype=kind)
    if network.areas is not None:
        for _, field, kind in AREA_ARRAYS:
            arrays[f"areas.{field}"] = np.asarray(getattr(network.areas, field), dtype=kind)
    arrays["network.street_names"] = np.frombuffer(
        names_bytes(network.street_names), dtype=np.uint8
    )
    values = {
        "name": network.name,
        "source": network.source,
        "imported_at": None if network.imported_at is None else network.imported_at.isoformat(),
    }
    return arrays, values


def network_of(mapped: MappedFile) -> StreetNetwork:
    """The network a file holds, its arrays the file's mapping (read-only)."""
    from cleanair_core.routes.network import NetworkAreas

    arrays = mapped.arrays
    values = mapped.values
    areas = None
    if "areas.kind" in arrays:
        areas = NetworkAreas(**{field: arrays[f"areas.{field}"] for _, field, _ in AREA_ARRAYS})
    derived = {
        name: array for name, array in arrays.items() if not name.startswith(("network.", "areas."))
    }
    imported = values["imported_at"]
    return StreetNetwork(
        name=values["name"],
        node_lat=arrays["network.node_lat"],
        node_lon=arrays["network.node_lon"],
        edge_from=arrays["network.edge_from"],
        edge_to=arrays["network.edge_to"],
        edge_length=arrays["network.edge_length"],
        edge_class=arrays["network.edge_class"],
        edge_access=arrays["network.edge_access"],
        source=values["source"],
        imported_at=None if imported is None else datetime.fromisoformat(imported),
        edge_traffic=arrays["network.edge_traffic"],
        edge_name=arrays.get("network.edge_name"),
        street_names=names_of(arrays["network.street_names"].tobytes()),
        areas=areas,
        derived=derived,
    )

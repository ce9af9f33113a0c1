"""Street networks in files every process of a machine maps (`cleanair_storage.network_files`):
one copy in memory, written once, never used stale, damaged or half-written, swapped by a
reload while a plan on the old version finishes on it."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import zlib
from datetime import UTC, datetime
from pathlib import Path

import attrs
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cleanair_core.geo import Point
from cleanair_core.routes.network import FloatArray, PlanActivityType, StreetNetwork
from cleanair_http.offloading import in_thread
from cleanair_runtime.composition.network_reload import NetworkReloader
from cleanair_sources.network_derivation import DERIVATION, derive
from cleanair_sources.street_increments import NetworkIncrements
from cleanair_sources.street_router import LoadedNetworks, ScipyRouter
from cleanair_storage import network_checks
from cleanair_storage.memory import MemoryStore
from cleanair_storage.network_files import MappedNetworks, NetworkFiles
from cleanair_storage.sqlite import SqliteStore
from support.networks import ORIGIN, grid

WALKING = PlanActivityType.WALKING
CYCLING = PlanActivityType.CYCLING
MAY = datetime(2026, 5, 1, tzinfo=UTC)


def at(network: StreetNetwork, imported_at: datetime) -> StreetNetwork:
    return attrs.evolve(network, imported_at=imported_at)


def mapped(store: MemoryStore | SqliteStore, directory: Path) -> MappedNetworks:
    return MappedNetworks(store, NetworkFiles(directory), derive, DERIVATION)


def files_in(directory: Path) -> list[str]:
    # Not the lock, nor the marks of files read through (`network_checks.py`): dot files.
    return sorted(p.name for p in directory.iterdir() if not p.name.startswith("."))


def test_a_mapped_network_is_the_stored_one_read_only_and_routes_alike(tmp_path: Path) -> None:
    store = MemoryStore()
    original = at(grid(6, 7, name="north"), MAY)
    store.save_network(original)

    [network] = mapped(store, tmp_path).load_networks()

    assert network.name == "north"
    assert network.imported_at == MAY
    for name in ("node_lat", "node_lon", "edge_from", "edge_to", "edge_length", "edge_access"):
        assert np.array_equal(getattr(network, name), getattr(original, name))
        assert not getattr(network, name).flags.writeable  # the file's pages, read-only
    assert network.derived, "the router and increments come from the file"
    ours, theirs = ScipyRouter(network), ScipyRouter(original)
    for activity in (WALKING, CYCLING):
        assert ours.path(0, 41, activity, original.edge_length) == theirs.path(
            0, 41, activity, original.edge_length
        )
    points = np.array([ORIGIN.lat + 0.002, ORIGIN.lat + 0.0031])
    lons = np.array([ORIGIN.lon + 0.003, ORIGIN.lon + 0.0051])
    assert np.allclose(
        NetworkIncrements([network]).at(points, lons),
        NetworkIncrements([original]).at(points, lons),
    )


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.floats(-0.01, 0.02), st.floats(-0.02, 0.03)), min_size=1, max_size=8))
def test_the_mapped_snapping_index_finds_the_nearest_edge_of_all(
    offsets: list[tuple[float, float]],
) -> None:
    # A network with a gap: some points' nearest edges lie several cells away.
    original = grid(5, 6, skip=lambda a, b: a == (2, 2) or b == (2, 2))
    network = attrs.evolve(original, derived=derive(original))
    ours, built = ScipyRouter(network), ScipyRouter(original)
    for dlat, dlon in offsets:
        point = Point(ORIGIN.lat + dlat, ORIGIN.lon + dlon)
        for activity in (WALKING, CYCLING):
            snapped = ours.snap(point, activity)
            assert snapped == built.snap(point, activity)
            # Against every usable edge, one by one: the cells searched miss none.
            snapper = ours._snapper(activity)
            assert snapper is not None
            assert snapped is not None
            here = ours_xy(ours, point)
            every = snapper.nearest_points(np.arange(len(snapper.edge)), here)
            assert snapped.distance_m == float(every.min())


def ours_xy(router: ScipyRouter, point: Point) -> FloatArray:
    """`point` in the router's local metres, as its snapping index has it."""
    from cleanair_sources.street_router import _xy

    here: FloatArray = _xy(np.array([point.lat]), np.array([point.lon]), router._lat0)[0]
    return here


def test_a_file_is_written_once_and_mapped_by_the_next_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = MemoryStore()
    store.save_network(at(grid(3, 3, name="north"), MAY))
    networks = mapped(store, tmp_path)
    networks.load_networks()
    [written] = files_in(tmp_path)

    def no_database_load() -> list[StreetNetwork]:
        raise AssertionError("the file was there: nothing to load from the database")

    monkeypatch.setattr(store, "load_networks", no_database_load)
    [network] = networks.load_networks()
    assert network.node_count == 9
    assert files_in(tmp_path) == [written]


def test_a_re_imported_network_gets_a_new_file_and_the_old_one_goes(tmp_path: Path) -> None:
    store = MemoryStore()
    store.save_network(at(grid(3, 3, name="north"), MAY))
    networks = mapped(store, tmp_path)
    [old] = networks.load_networks()
    [old_file] = files_in(tmp_path)

    store.save_network(at(grid(4, 4, name="north"), datetime(2026, 5, 2, tzinfo=UTC)))
    [new] = networks.load_networks()

    assert new.node_count == 16
    [new_file] = files_in(tmp_path)
    assert new_file != old_file  # the stale one is never used, and is removed
    # The old network's mapping outlives its file: a plan on it reads on.
    assert old.node_count == 9
    assert float(old.node_lat.sum()) > 0


@pytest.mark.parametrize("damage", ["data", "header", "truncated"])
def test_a_damaged_file_is_rebuilt_not_used(tmp_path: Path, damage: str) -> None:
    store = MemoryStore()
    original = at(grid(4, 5, name="north"), MAY)
    store.save_network(original)
    mapped(store, tmp_path).load_networks()
    [name] = files_in(tmp_path)
    path = tmp_path / name
    size = path.stat().st_size
    with open(path, "r+b") as file:
        if damage == "truncated":
            file.truncate(size - 100)
        else:
            file.seek(20 if damage == "header" else size - 50)
            byte = file.read(1)
            file.seek(-1, os.SEEK_CUR)
            file.write(bytes([byte[0] ^ 0xFF]))

    assert NetworkFiles(tmp_path).open("north", name.split(".")[1]) is None
    [network] = mapped(store, tmp_path).load_networks()

    assert np.array_equal(network.edge_length, original.edge_length)
    assert path.stat().st_size == size
    assert files_in(tmp_path) == [name]


# -- read through once per file and boot (issue 34) --------------------------------------------


def crc_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The sizes of the buffers network files' CRCs are computed over, from now on."""
    reads: list[int] = []
    crc32 = zlib.crc32

    def counted(data: bytes | memoryview, value: int = 0) -> int:
        reads.append(len(data))
        return crc32(data, value)

    # network_files calls zlib.crc32 through its module.
    monkeypatch.setattr(zlib, "crc32", counted)
    return reads


def settled(monkeypatch: pytest.MonkeyPatch, path: Path) -> None:
    """The clock set to well after the file's last change (no sleeping for it)."""
    changed = path.stat().st_ctime_ns
    monkeypatch.setattr(network_checks, "now_ns", lambda: changed + network_checks.SETTLED_NS)


def written_file(directory: Path) -> tuple[Path, str]:
    store = MemoryStore()
    store.save_network(at(grid(4, 5, name="north"), MAY))
    mapped(store, directory).load_networks()
    [name] = files_in(directory)
    return directory / name, name.split(".")[1]


def test_a_settled_file_found_intact_is_not_read_through_again_this_boot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, key = written_file(tmp_path)
    settled(monkeypatch, path)
    first = NetworkFiles(tmp_path).open("north", key)
    reads = crc_reads(monkeypatch)
    again = NetworkFiles(tmp_path).open("north", key)
    assert first is not None
    assert again is not None
    header = path.read_bytes()[12:]  # after the prefix: magic, header length, header CRC
    assert len(reads) == 1  # the header's own CRC alone
    assert reads[0] < len(header)
    assert all(np.array_equal(first.arrays[n], again.arrays[n]) for n in first.arrays)


def test_a_file_changed_within_the_settling_time_is_read_through_each_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A write within the clock's granularity may leave its times as they were: no mark.
    path, key = written_file(tmp_path)
    changed = path.stat().st_ctime_ns
    monkeypatch.setattr(network_checks, "now_ns", lambda: changed + network_checks.SETTLED_NS - 1)
    assert NetworkFiles(tmp_path).open("north", key) is not None
    reads = crc_reads(monkeypatch)
    assert NetworkFiles(tmp_path).open("north", key) is not None
    assert len(reads) > 1  # the data read through again
    assert not network_checks.mark_path(path).exists()


@pytest.mark.parametrize("damage", ["data", "truncated"])
def test_a_file_damaged_after_it_was_found_intact_is_rebuilt_not_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, damage: str
) -> None:
    path, key = written_file(tmp_path)
    settled(monkeypatch, path)
    assert NetworkFiles(tmp_path).open("north", key) is not None
    size = path.stat().st_size
    with open(path, "r+b") as file:
        if damage == "truncated":
            file.truncate(size - 100)
        else:
            file.seek(size - 50)
            byte = file.read(1)
            file.seek(-1, os.SEEK_CUR)
            file.write(bytes([byte[0] ^ 0xFF]))
    # A write after the settling time changes the file's times; within the same clock tick
    # here, so they are moved as that later write's would be.
    times = path.stat()
    os.utime(path, ns=(times.st_atime_ns, times.st_mtime_ns + network_checks.SETTLED_NS))
    assert NetworkFiles(tmp_path).open("north", key) is None


def test_a_file_found_intact_in_another_boot_is_read_through_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, key = written_file(tmp_path)
    settled(monkeypatch, path)
    assert NetworkFiles(tmp_path).open("north", key) is not None
    assert network_checks.mark_path(path).exists()
    other_boot = tmp_path / "boot_id"
    other_boot.write_text("another boot\n")
    monkeypatch.setattr(network_checks, "_BOOT_ID", other_boot)
    reads = crc_reads(monkeypatch)
    assert NetworkFiles(tmp_path).open("north", key) is not None
    assert len(reads) > 1


def test_a_removed_files_mark_goes_with_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path, key = written_file(tmp_path)
    settled(monkeypatch, path)
    assert NetworkFiles(tmp_path).open("north", key) is not None
    files = NetworkFiles(tmp_path)
    with files.lock():
        assert files.remove_except(set()) == [path]
    assert sorted(p.name for p in tmp_path.iterdir()) == [".lock"]


CRASHING_WRITER = """
import os, sys
from pathlib import Path
from cleanair_sources.network_derivation import DERIVATION, derive
from cleanair_storage.memory import MemoryStore
from cleanair_storage import network_checks
from cleanair_storage.network_files import MappedNetworks, NetworkFiles
from support.networks import grid

store = MemoryStore()
store.save_network(grid(4, 4, name="north"))

def power_cut(fd):
    os._exit(9)  # the machine stops between the data and the rename

os.fsync = power_cut
MappedNetworks(store, NetworkFiles(Path(sys.argv[1])), derive, DERIVATION).load_networks()
"""


def test_a_crash_mid_write_leaves_no_file_that_would_be_mapped(tmp_path: Path) -> None:
    support = Path(__file__).parents[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(support), *sys.path])}
    crashed = subprocess.run(
        [sys.executable, "-c", CRASHING_WRITER, str(tmp_path)], env=env, timeout=120, check=False
    )
    assert crashed.returncode == 9
    [partial] = files_in(tmp_path)
    assert partial.endswith(".partial")  # never the name a reader opens

    store = MemoryStore()
    store.save_network(grid(4, 4, name="north"))
    [network] = mapped(store, tmp_path).load_networks()

    assert network.node_count == 16
    [written] = files_in(tmp_path)  # written whole, the partial one removed
    assert written.endswith(".network")


SHARER = """
import sys
from pathlib import Path
import numpy as np
from cleanair_sources.network_derivation import DERIVATION, derive
from cleanair_storage import network_checks
from cleanair_storage.network_files import MappedNetworks, NetworkFiles
from cleanair_storage.sqlite import SqliteStore

store = SqliteStore(Path(sys.argv[1]))
files = NetworkFiles(Path(sys.argv[2]))
[network] = MappedNetworks(store, files, derive, DERIVATION).load_networks()
store.close()
touched = sum(float(np.asarray(a, dtype=np.float64).sum()) for a in network.derived.values())
touched += float(network.node_lat.sum() + network.edge_length.sum())
print("ready", flush=True)
sys.stdin.readline()  # both processes hold the mapping now
totals = dict.fromkeys(("Rss", "Shared_Clean", "Private_Clean", "Private_Dirty"), 0)
inside = False
for line in open("/proc/self/smaps"):
    fields = line.split()
    if not fields[0].endswith(":"):
        inside = fields[-1].endswith(".network")
    elif inside and fields[0][:-1] in totals:
        totals[fields[0][:-1]] += int(fields[1])
print(" ".join(f"{k}={v}" for k, v in totals.items()), flush=True)
sys.stdin.readline()  # the other has read its figures too
"""


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="Linux's /proc")
def test_two_processes_map_one_network_file_and_hold_one_copy(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "city.db")
    store.save_network(at(grid(100, 100, name="city"), MAY))  # megabytes of arrays
    store.close()
    support = Path(__file__).parents[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(support), *sys.path])}
    args = [sys.executable, "-c", SHARER, str(tmp_path / "city.db"), str(tmp_path / "files")]
    processes = [
        subprocess.Popen(args, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    try:
        for process in processes:
            assert process.stdout is not None
            assert process.stdout.readline() == "ready\n"
        figures = []
        for process in processes:
            assert process.stdin is not None
            assert process.stdout is not None
            process.stdin.write("go\n")
            process.stdin.flush()
            figures.append(dict(pair.split("=") for pair in process.stdout.readline().split()))
        for process in processes:
            process.communicate("done\n", timeout=120)
    finally:
        for process in processes:
            process.kill()
            process.wait()
    [name] = files_in(tmp_path / "files")
    file_kib = (tmp_path / "files" / name).stat().st_size // 1024
    for kib in ({k: int(v) for k, v in f.items()} for f in figures):
        # Each process has the file's pages resident, and every one of them is shared.
        assert kib["Rss"] > file_kib * 0.9
        assert kib["Shared_Clean"] > kib["Rss"] * 0.95
        assert kib["Private_Clean"] + kib["Private_Dirty"] < kib["Rss"] * 0.05


def test_a_reload_while_a_plan_runs_swaps_at_once_and_the_plan_finishes_on_the_old(
    tmp_path: Path,
) -> None:
    store = MemoryStore()
    store.save_network(at(grid(3, 3, name="north"), MAY))
    source = mapped(store, tmp_path)
    started = source.load_networks()
    loaded = LoadedNetworks(started)
    reloader = NetworkReloader(
        source,
        loaded.replace,
        NetworkIncrements,
        None,
        in_thread,
        started_with=started,
        interval=1,
    )
    here = Point(ORIGIN.lat + 0.0005, ORIGIN.lon + 0.001)
    in_flight = loaded.covering([here])  # a plan took its router, and searches on
    assert in_flight is not None
    first_file = files_in(tmp_path)

    store.save_network(at(grid(5, 5, name="north"), datetime(2026, 5, 2, tzinfo=UTC)))
    assert asyncio.run(reloader.check()) is True

    assert files_in(tmp_path) != first_file  # the old file is gone...
    # ...and the plan in flight finishes on the network it started on, whole.
    path = in_flight.path(0, 8, WALKING, in_flight.network.edge_length)
    assert path is not None
    assert path.nodes[-1] == 8
    assert in_flight.network.node_count == 9
    # A plan from now on gets the new network, never a mix.
    after = loaded.covering([here])
    assert after is not None
    assert after.network.node_count == 25
    assert after.path(0, 24, WALKING, after.network.edge_length) is not None


def test_a_directory_that_cannot_be_used_loads_the_databases_copies_and_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = MemoryStore()
    store.save_network(at(grid(3, 3, name="north"), MAY))
    blocked = tmp_path / "not-a-directory"
    blocked.write_text("")  # a file where the directory should be

    [network] = mapped(store, blocked).load_networks()

    assert network.node_count == 9
    assert not network.derived  # the database's copy: this process builds its own
    assert "loaded without their files" in caplog.text

"""The SQLite files themselves: private modes, a WAL that shrinks, busy means unavailable."""

from __future__ import annotations

import itertools
import os
import sqlite3
import stat
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from cleanair_core.access.accounts import User
from cleanair_core.errors import StoreUnavailable
from cleanair_core.routes.network import StreetNetwork
from cleanair_storage.errors import SchemaTooNew
from cleanair_storage.sqlite import CHECKPOINT_THREAD, JOURNAL_SIZE_LIMIT, SqliteStore
from support.sqlite_files import migrated_by_a_newer_release

T0 = datetime(2026, 3, 10, 9, 30, tzinfo=UTC)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def permissive_umask() -> Iterator[None]:
    """Umask 0, so nothing but the store's own choice keeps a file private."""
    previous = os.umask(0)
    try:
        yield
    finally:
        os.umask(previous)


def big_network(name: str, edges: int) -> StreetNetwork:
    """Arrays of `edges` edges (about 18 bytes each): enough to grow a WAL by megabytes."""
    rng = np.random.default_rng(7)
    nodes = edges // 2
    return StreetNetwork(
        name,
        60 + rng.random(nodes),
        24 + rng.random(nodes),
        rng.integers(0, nodes, edges, dtype=np.int32),
        rng.integers(0, nodes, edges, dtype=np.int32),
        1 + rng.random(edges),
        np.zeros(edges, dtype=np.uint8),
        np.ones(edges, dtype=np.uint8),
    )


@pytest.mark.usefixtures("permissive_umask")
def test_the_database_and_its_wal_and_shm_are_private(tmp_path: Path) -> None:
    path = tmp_path / "var" / "cleanair.db"
    store = SqliteStore(path)
    try:
        store.add_user(User("alice", True, T0))
        files = [path, Path(f"{path}-wal"), Path(f"{path}-shm")]
        assert all(f.exists() for f in files)
        assert {f.name: mode(f) for f in files} == {f.name: 0o600 for f in files}
    finally:
        store.close()


def test_an_existing_world_readable_database_loses_world_access(tmp_path: Path) -> None:
    path = tmp_path / "cleanair.db"
    SqliteStore(path).close()
    path.chmod(0o644)
    SqliteStore(path).close()
    assert mode(path) == 0o640  # the group (maybe a backup agent) keeps what it had


def test_a_large_write_gives_its_wal_back_while_others_hold_the_file(tmp_path: Path) -> None:
    path = tmp_path / "cleanair.db"
    server = SqliteStore(path)  # a running server keeps the WAL from being deleted
    cli = SqliteStore(path)
    try:
        server.add_user(User("alice", True, T0))
        cli.save_network(big_network("city", 1_000_000))
        assert Path(f"{path}-wal").stat().st_size <= JOURNAL_SIZE_LIMIT
        assert [n.name for n in server.network_summaries()] == ["city"]
    finally:
        cli.close()
        server.close()


def test_the_wal_is_checkpointed_in_the_background_and_cut_to_its_limit(tmp_path: Path) -> None:
    path = tmp_path / "cleanair.db"
    store = SqliteStore(path)
    raw = sqlite3.connect(path, isolation_level=None)
    try:
        raw.execute("PRAGMA wal_autocheckpoint = 0")  # only the store's thread checkpoints
        raw.execute("CREATE TABLE filler (data BLOB)")
        raw.execute("INSERT INTO filler VALUES (?)", (os.urandom(3 * JOURNAL_SIZE_LIMIT),))
        # Nobody asks for a checkpoint, and the blob stays under the writer's own backstop,
        # yet once the thread has copied the WAL into the database, the store's next write
        # restarts the WAL and cuts it back to the limit.
        wal = Path(f"{path}-wal")
        deadline = time.monotonic() + 10
        for k in itertools.count():
            store.add_user(User(f"user{k}", True, T0))
            if wal.stat().st_size <= JOURNAL_SIZE_LIMIT:
                break
            assert time.monotonic() < deadline, "the WAL was never checkpointed and cut back"
            time.sleep(0.05)
        assert path.stat().st_size >= 3 * JOURNAL_SIZE_LIMIT  # the blob is in the database
    finally:
        raw.close()
        store.close()


def test_closing_the_store_stops_its_checkpoint_thread(tmp_path: Path) -> None:
    before = set(threading.enumerate())
    store = SqliteStore(tmp_path / "cleanair.db")
    [started] = [t for t in set(threading.enumerate()) - before if t.name == CHECKPOINT_THREAD]
    store.close()
    assert not started.is_alive()


@pytest.fixture
def locked(tmp_path: Path) -> Iterator[tuple[SqliteStore, sqlite3.Connection]]:
    """A store with a short busy timeout and another connection holding the write lock."""
    path = tmp_path / "cleanair.db"
    store = SqliteStore(path, busy_timeout=0.05)
    store.add_user(User("alice", True, T0))
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    yield store, other
    other.close()
    store.close()


def test_a_write_past_the_busy_timeout_is_store_unavailable(
    locked: tuple[SqliteStore, sqlite3.Connection],
) -> None:
    store, other = locked
    with pytest.raises(StoreUnavailable):
        store.add_user(User("bob", True, T0))
    with pytest.raises(StoreUnavailable):
        store.hit("requests:x", 0)
    assert store.get_user("alice") is not None  # readers never wait in WAL mode
    other.execute("ROLLBACK")
    assert store.add_user(User("bob", True, T0))


def test_errors_that_are_not_about_availability_stay_what_they_are(tmp_path: Path) -> None:
    path = tmp_path / "cleanair.db"
    store = SqliteStore(path)
    raw = sqlite3.connect(path, isolation_level=None)
    try:
        raw.execute("DROP TABLE client_labels")  # a broken schema is a bug, not an outage
        with pytest.raises(sqlite3.OperationalError, match="no such table"):
            store.is_client_label("app")
    finally:
        raw.close()
        store.close()


def test_a_full_disk_is_store_unavailable_and_leaves_the_writer_usable(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "cleanair.db")
    try:
        # The store's writer may not grow the file by a page: a full disk, as SQLite sees it.
        writer = store._writer
        pages = writer.execute("PRAGMA page_count").fetchone()[0]
        writer.execute(f"PRAGMA max_page_count = {pages}")
        with pytest.raises(StoreUnavailable):
            store.save_network(big_network("city", 20_000))
        with pytest.raises(StoreUnavailable):  # and again: no transaction was left open
            store.save_network(big_network("city", 20_000))
        writer.execute(f"PRAGMA max_page_count = {pages * 1_000}")
        store.save_network(big_network("city", 20_000))
        assert [n.name for n in store.network_summaries()] == ["city"]
    finally:
        store.close()


def test_a_database_newer_than_the_code_is_refused_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "cleanair.db"
    migrated_by_a_newer_release(path)
    with sqlite3.connect(path) as conn:
        before = conn.execute("SELECT name FROM _sqlite_migrations ORDER BY id").fetchall()
    conn.close()

    with pytest.raises(SchemaTooNew, match=r"newer than this cleanair knows.*m999_from_the_future"):
        SqliteStore(path)

    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT name FROM _sqlite_migrations ORDER BY id").fetchall() == before
    conn.close()


def test_another_migration_set_in_the_same_file_is_not_a_newer_schema(tmp_path: Path) -> None:
    path = tmp_path / "cleanair.db"
    SqliteStore(path).close()
    with sqlite3.connect(path) as conn:  # e.g. an operator's own tool keeping notes beside ours
        conn.execute(
            "INSERT INTO _sqlite_migrations (migration_set, name, applied_at) "
            "VALUES ('reports', 'm001_monthly', '2026-01-01')"
        )
    conn.close()
    SqliteStore(path).close()

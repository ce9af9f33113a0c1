"""How far each store syncs a commit before it returns: SQLite's connections all take the
store's `synchronous` (FULL unless told), and PostgreSQL's settings that trade durability
away are named. That the sync happens before an answer is sent is proven end to end, with
real processes, in tests/e2e/test_durability.py."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

import psycopg
import pytest

from cleanair_core.offload import Offload, here_unless_blocked
from cleanair_storage.postgres.durability import warn_unless_durable, weakened
from cleanair_storage.sqlite import SqliteStore
from support.postgres import PostgresServer

T = TypeVar("T")
#: `PRAGMA synchronous` as SQLite reports it.
NORMAL, FULL = 1, 2


def synchronous(conn: sqlite3.Connection) -> int:
    row = conn.execute("PRAGMA synchronous").fetchone()
    return int(row[0])


def reader_in_another_thread(store: SqliteStore) -> sqlite3.Connection:
    found: list[sqlite3.Connection] = []
    thread = threading.Thread(target=lambda: found.append(store._read()))
    thread.start()
    thread.join()
    return found[0]


def test_every_sqlite_connection_syncs_each_commit_by_default(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "cleanair.db")
    try:
        assert store.synchronous == "full"
        assert synchronous(store._writer) == FULL
        assert synchronous(store._read()) == FULL
        assert synchronous(reader_in_another_thread(store)) == FULL
    finally:
        store.close()


def test_normal_is_taken_by_every_connection_when_asked(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "cleanair.db", synchronous="normal")
    try:
        assert synchronous(store._writer) == NORMAL
        assert synchronous(store._read()) == NORMAL
        assert synchronous(reader_in_another_thread(store)) == NORMAL
    finally:
        store.close()


def test_the_checkpoint_thread_takes_the_stores_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cleanair_storage.sqlite import database

    seen: list[str] = []
    opened = threading.Event()
    real_open = database._open

    def spying_open(
        path: str, busy_timeout: float, mode: database.Synchronous
    ) -> sqlite3.Connection:
        if threading.current_thread().name == database.CHECKPOINT_THREAD:
            seen.append(mode)
            opened.set()
        return real_open(path, busy_timeout, mode)

    monkeypatch.setattr(database, "_open", spying_open)
    modes: tuple[database.Synchronous, ...] = ("full", "normal")
    for mode in modes:
        opened.clear()
        store = SqliteStore(tmp_path / f"{mode}.db", synchronous=mode)
        try:
            assert opened.wait(60)
        finally:
            store.close()
    assert seen == ["full", "normal"]


def writes_and_reads_in_a_thread(store: SqliteStore) -> list[str]:
    """Which of a write and a read, tried on the event loop as the server tries its store
    calls (`here_unless_blocked`), went to the thread instead."""
    moved: list[str] = []

    def offload_named(name: str) -> Offload:
        async def in_thread(work: Callable[[], T], /) -> T:
            moved.append(name)
            return await asyncio.to_thread(work)

        return in_thread

    async def both() -> None:
        write = here_unless_blocked(offload_named("write"))
        assert await write(lambda: store.hit("key", 0)) == 1
        read = here_unless_blocked(offload_named("read"))
        await read(lambda: store.usage("user:alice", datetime.now(UTC)))

    asyncio.run(both())
    return moved


def test_a_commit_synced_to_disk_is_never_waited_for_on_the_event_loop(tmp_path: Path) -> None:
    # With FULL a commit waits for the disk: the write goes to a thread, the read stays.
    synced = SqliteStore(tmp_path / "full.db")
    unsynced = SqliteStore(tmp_path / "normal.db", synchronous="normal")
    try:
        assert writes_and_reads_in_a_thread(synced) == ["write"]
        assert writes_and_reads_in_a_thread(unsynced) == []
    finally:
        synced.close()
        unsynced.close()


@pytest.mark.parametrize("mode", ["off", "NORMAL", "full; DROP TABLE users"])
def test_an_unknown_mode_is_refused_before_any_file_is_made(tmp_path: Path, mode: str) -> None:
    with pytest.raises(ValueError, match="synchronous must be one of full, normal"):
        SqliteStore(tmp_path / "cleanair.db", synchronous=mode)  # type: ignore[arg-type]
    assert not (tmp_path / "cleanair.db").exists()


def test_postgresql_settings_that_trade_durability_away_are_named(
    postgres: PostgresServer, postgres_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    # The tests' shared server runs with fsync and synchronous_commit off (for speed).
    assert not postgres.durable
    with psycopg.connect(postgres_url) as conn:
        found = weakened(conn)
    assert len(found) == 2
    assert found[0].startswith("fsync is off")
    assert found[1].startswith("synchronous_commit is off")
    caplog.set_level(logging.WARNING, logger="cleanair.storage.postgres")
    warn_unless_durable(postgres_url)
    warnings = [r.getMessage() for r in caplog.records if r.name == "cleanair.storage.postgres"]
    assert len(warnings) == 2
    assert all("docs/deployment.md, Durability" in w for w in warnings)


def test_postgresql_defaults_sync_every_commit(own_server: PostgresServer) -> None:
    # A server as PostgreSQL ships (fsync and synchronous_commit on): nothing to warn of,
    # until a database is told not to wait for its commits' flush.
    url = own_server.database()
    with psycopg.connect(url) as conn:
        assert weakened(conn) == []
    name = url.rsplit("/", 1)[1]
    with psycopg.connect(own_server.url(), autocommit=True) as conn:
        conn.execute(f'ALTER DATABASE "{name}" SET synchronous_commit = off')
    with psycopg.connect(url) as conn:
        assert [w.split(":")[0] for w in weakened(conn)] == ["synchronous_commit is off"]

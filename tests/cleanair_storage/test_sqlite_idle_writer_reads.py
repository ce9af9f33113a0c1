"""SQLite's admission read on the writer connection when the writer is idle: a reader's page
cache is dropped after every commit of another connection, the writer's is not. It must read
what a reader reads: committed rows only, never a group batch's writes before their COMMIT
returned, and a unit of work's own writes inside it."""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cleanair_core.access.accounts import Owner, OwnerKind, User
from cleanair_core.access.connections import Connection
from cleanair_core.access.scopes import Scope
from cleanair_core.ports import AdmissionRead
from cleanair_storage.sqlite import SqliteStore

#: Generous: the machine is shared and loaded.
DEADLINE = 60
AT = datetime(2026, 3, 10, 12, tzinfo=UTC)
TOKEN_HASH = "h" * 64


def new_store(path: Path) -> tuple[SqliteStore, str]:
    """A store (synchronous=FULL, the default) with alice's connection; its rate-limit key."""
    store = SqliteStore(path)
    store.add_user(User("alice", True, AT))
    connection = Connection(
        id=uuid.uuid4(),
        owner=Owner(OwnerKind.USER, "alice"),
        name="phone",
        scopes=frozenset({Scope.AQ_READ}),
        token_hash=TOKEN_HASH,
        created_at=AT,
    )
    store.add_connection(connection)
    return store, f"req:{connection.id}"


@pytest.fixture
def store_and_key(tmp_path: Path) -> Iterator[tuple[SqliteStore, str]]:
    store, key = new_store(tmp_path / "cleanair.db")
    yield store, key
    store.close()


def admissions_on_writer(store: SqliteStore) -> list[str]:
    """Appends "admission" each time the writer connection runs the admission read."""
    ran: list[str] = []
    store._writer.set_trace_callback(
        lambda sql: ran.append("admission") if "FROM connections c" in sql else None
    )
    return ran


def counter(read: AdmissionRead) -> int | None:
    return None if read.counter is None else read.counter[1]


def test_an_idle_writer_answers_the_admission_read(
    store_and_key: tuple[SqliteStore, str],
) -> None:
    store, key = store_and_key
    writes = store.group_writes()
    assert writes is not None

    async def main() -> AdmissionRead:
        await writes(lambda: store.hit(key, 600))
        return store.admission(TOKEN_HASH, "req", AT)

    ran = admissions_on_writer(store)
    read = asyncio.run(main())
    store._writer.set_trace_callback(None)
    assert ran == ["admission"]
    assert counter(read) == 1
    with store._write_lock:  # the writer is busy: a reader answers, and reads the same
        assert store.admission(TOKEN_HASH, "req", AT) == read


def test_a_batch_whose_commit_is_in_flight_is_not_read(
    store_and_key: tuple[SqliteStore, str],
) -> None:
    """The batch's statements ran on the writer and its COMMIT waits on the committer
    thread: the writer's open transaction holds the hit, which no admission may count yet."""
    store, key = store_and_key
    writes = store.group_writes()
    assert writes is not None
    unit = store._group_writer._unit
    real_end = unit.end
    committing, release = threading.Event(), threading.Event()

    def held_end(commit: bool) -> None:
        committing.set()
        assert release.wait(DEADLINE)
        real_end(commit)

    object.__setattr__(unit, "end", held_end)  # a frozen attrs class: the test's own swap

    async def main() -> tuple[AdmissionRead, AdmissionRead]:
        hit = asyncio.ensure_future(writes(lambda: store.hit(key, 600)))
        await asyncio.to_thread(lambda: committing.wait(DEADLINE))
        during = store.admission(TOKEN_HASH, "req", AT)
        release.set()
        await hit
        return during, store.admission(TOKEN_HASH, "req", AT)

    ran = admissions_on_writer(store)
    during, after = asyncio.run(main())
    store._writer.set_trace_callback(None)
    assert counter(during) is None  # not the uncommitted hit
    assert counter(after) == 1
    assert ran == ["admission"]  # the second, once the writer was idle again


def test_a_unit_of_work_reads_its_own_writes(store_and_key: tuple[SqliteStore, str]) -> None:
    store, key = store_and_key
    with store.transaction():
        store.hit(key, 600)
        assert counter(store.admission(TOKEN_HASH, "req", AT)) == 1


def test_a_writer_held_by_another_thread_leaves_the_read_to_the_reader(
    store_and_key: tuple[SqliteStore, str],
) -> None:
    store, key = store_and_key
    store.hit(key, 600)
    ran = admissions_on_writer(store)
    with store._write_lock:  # as another thread's unit of work holds it
        read = store.admission(TOKEN_HASH, "req", AT)
    store._writer.set_trace_callback(None)
    assert counter(read) == 1
    assert ran == []


@settings(max_examples=15, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([540, 600, 660]), st.booleans()), max_size=12))
def test_the_writer_and_a_reader_read_the_same_admission(
    tmp_path_factory: pytest.TempPathFactory, hits: list[tuple[int, bool]]
) -> None:
    """Any run of hits, committed alone or in a unit of work: the admission read on the idle
    writer equals the same statement on a reader."""
    store, key = new_store(tmp_path_factory.mktemp("db") / "cleanair.db")
    try:
        for window_start, in_unit in hits:
            if in_unit:
                with store.transaction():
                    store.hit(key, window_start)
            else:
                store.hit(key, window_start)
            on_writer = store.admission(TOKEN_HASH, "req", AT)
            with store._write_lock:  # the writer is busy: the reader answers
                on_reader = store.admission(TOKEN_HASH, "req", AT)
            assert on_writer == on_reader
    finally:
        store.close()

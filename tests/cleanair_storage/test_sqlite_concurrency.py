"""The SQLite adapter under concurrent threads on one store, and files opened at once.

What every shared store guarantees across processes is in test_shared_store_processes.py."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

import pytest

from cleanair_core.access.accounts import User
from cleanair_core.credits.ledger import CreditLimits, Debit, LedgerEntry, Usage
from cleanair_core.errors import CreditsExhausted, StoreUnavailable
from cleanair_core.offload import WouldBlock, here_unless_blocked
from cleanair_storage.sqlite import SqliteStore
from support.networks import grid

T = TypeVar("T")
AT = datetime(2026, 2, 10, 12, 0, tzinfo=UTC)
POOL = "user:alice"
LIMITS = CreditLimits(monthly=1000, daily=100)


def test_threads_never_overspend_the_daily_cap(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "threads.db")
    barrier = threading.Barrier(130)
    outcomes: Counter[str] = Counter()
    lock = threading.Lock()

    def spend(index: int) -> None:
        barrier.wait(timeout=60)
        try:
            store.debit(Debit(POOL, f"conn-{index}", "score", 1, AT), LIMITS)
        except CreditsExhausted:
            outcome = "refused"
        else:
            outcome = "granted"
        with lock:
            outcomes[outcome] += 1

    try:
        threads = [threading.Thread(target=spend, args=(i,)) for i in range(130)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        assert outcomes == Counter(granted=100, refused=30)
        assert store.usage(POOL, AT) == Usage(month=100, day=100)
        assert len(store.entries(POOL)) == 100
    finally:
        store.close()


def open_together(path: Path, count: int) -> tuple[list[SqliteStore], list[BaseException]]:
    """Open `count` stores on `path` from as many threads released at once."""
    barrier = threading.Barrier(count)
    opened: list[SqliteStore] = []
    failures: list[BaseException] = []
    lock = threading.Lock()

    def open_store() -> None:
        barrier.wait(timeout=30)
        try:
            store = SqliteStore(path)
        except BaseException as exc:  # collected and reported by the caller
            with lock:
                failures.append(exc)
        else:
            with lock:
                opened.append(store)

    threads = [threading.Thread(target=open_store) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return opened, failures


def test_stores_opening_a_fresh_file_at_once_all_succeed(tmp_path: Path) -> None:
    # The race is narrow, so try it on many fresh files.
    for round_ in range(150):
        opened, failures = open_together(tmp_path / f"fresh-{round_}.db", 3)
        try:
            assert failures == []
            assert len(opened) == 3
            # Every instance works on the one schema, and sees the others' writes.
            for index, store in enumerate(opened):
                assert store.add_user(User(f"user{index}", True, AT))
            for store in opened:
                assert all(store.get_user(f"user{i}") is not None for i in range(3))
            entry = opened[0].debit(Debit(POOL, "c", "score", 1, AT), LIMITS)
            assert opened[2].entries(POOL) == [entry]
        finally:
            for store in opened:
                store.close()


def test_writes_survive_reopening(tmp_path: Path) -> None:
    path = tmp_path / "reopen.db"
    store = SqliteStore(path)
    store.add_user(User("alice", True, AT))
    first: LedgerEntry = store.debit(Debit(POOL, "c", "score", 2, AT), LIMITS)
    store.close()

    reopened = SqliteStore(path)
    try:
        assert reopened.get_user("alice") == User("alice", True, AT)
        assert reopened.entries(POOL) == [first]
        second = reopened.debit(Debit(POOL, "c", "score", 1, AT), LIMITS)
        assert second.id > first.id
    finally:
        reopened.close()


class LockHolder:
    """Another connection (as another process would) holding the database's write lock in
    its own thread, until `release()` or, at the latest, `at_most` seconds."""

    def __init__(self, path: Path, at_most: float = 20.0) -> None:
        self._path, self._at_most = path, at_most
        self.holding, self._release = threading.Event(), threading.Event()
        self._thread = threading.Thread(target=self._hold)
        self._thread.start()
        assert self.holding.wait(timeout=30)

    def _hold(self) -> None:
        other = sqlite3.connect(self._path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        self.holding.set()
        self._release.wait(timeout=self._at_most)
        self.holding.clear()
        other.execute("ROLLBACK")
        other.close()

    def release(self) -> None:
        self._release.set()
        self._thread.join(timeout=30)


class HandOver:
    """The fallback offload: records whether the lock was still held when work was handed
    over (had the attempt waited for the lock, the holder would have let go by then, and the
    work would have been done right there), and runs nothing."""

    def __init__(self, holder: LockHolder) -> None:
        self.holder = holder
        self.while_held: list[bool] = []

    async def __call__(self, work: Callable[[], T], /) -> T:
        self.while_held.append(self.holder.holding.is_set())
        raise AssertionError("handed over")


def test_told_not_to_wait_a_busy_store_says_so_at_once_and_changes_nothing(
    tmp_path: Path,
) -> None:
    path = tmp_path / "busy.db"
    # NORMAL: under FULL every write is handed over (a synced commit waits for the disk), so
    # only here does a free store's write run where it is tried.
    store = SqliteStore(path, busy_timeout=60, synchronous="normal")
    holder = LockHolder(path)
    elsewhere = HandOver(holder)
    handed_over_while_held = elsewhere.while_held
    here = here_unless_blocked(elsewhere)
    try:
        for work in (
            lambda: store.debit(Debit(POOL, "c", "score", 1, AT), LIMITS),
            lambda: store.hit("requests:c", 0),
            lambda: store.confirm_charge(1),
            lambda: store.add_user(User("bob", True, AT)),
        ):
            with pytest.raises(AssertionError, match="handed over"):
                asyncio.run(here(work))
        assert handed_over_while_held == [True] * 4
    finally:
        holder.release()
    try:
        assert store.get_user("bob") is None
        assert asyncio.run(here(lambda: store.hit("requests:c", 0))) == 1  # free: done here
        assert len(handed_over_while_held) == 4
        assert store.usage(POOL, AT) == Usage(0, 0)
    finally:
        store.close()


class LongUnitOfWork:
    """A unit of work on `store` held open in its own thread (it adds carol) until
    `finish()`: this process's writer, busy in another thread."""

    def __init__(self, store: SqliteStore) -> None:
        self._inside, self._release = threading.Event(), threading.Event()
        self.thread = threading.Thread(target=self._work, args=(store,))
        self.thread.start()
        assert self._inside.wait(timeout=30)

    def _work(self, store: SqliteStore) -> None:
        with store.transaction() as work:
            work.add_user(User("carol", True, AT))
            self._inside.set()
            self._release.wait(timeout=30)

    def finish(self) -> None:
        self._release.set()
        self.thread.join(timeout=30)


def test_told_not_to_wait_a_writer_busy_in_another_thread_says_so(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "thread.db")
    holder = LongUnitOfWork(store)
    try:
        with pytest.raises(WouldBlock):
            asyncio.run(_without_waiting(lambda: store.hit("requests:c", 0)))
    finally:
        holder.finish()
    try:
        assert store.get_user("carol") is not None
        assert store.hit("requests:c", 0) == 1  # the refused hit counted nothing
    finally:
        store.close()


async def _refuse(work: Callable[[], T], /) -> T:
    """A fallback that lets WouldBlock out, so a test sees it."""
    raise WouldBlock


async def _without_waiting(work: Callable[[], T]) -> T:
    """Run `work` here, not allowed to wait, and let WouldBlock out."""
    return await here_unless_blocked(_refuse)(work)


def test_a_thread_waiting_for_this_process_writer_gives_up_after_the_busy_timeout(
    tmp_path: Path,
) -> None:
    """Threads queued behind a long write get a 503 after one busy timeout, not one busy
    timeout per thread ahead of them (nor never)."""
    store = SqliteStore(tmp_path / "queue.db", busy_timeout=0.2)
    holder = LongUnitOfWork(store)
    outcome: list[BaseException | int] = []

    def hit() -> None:
        try:
            outcome.append(store.hit("requests:c", 0))
        except StoreUnavailable as exc:
            outcome.append(exc)

    try:
        waiter = threading.Thread(target=hit)
        waiter.start()
        waiter.join(timeout=10)  # a bound for a broken store, far beyond the 0.2 s timeout
        assert holder.thread.is_alive()  # the write was still going on all along
        assert len(outcome) == 1
        assert isinstance(outcome[0], StoreUnavailable)
    finally:
        holder.finish()
        store.close()


def test_readers_of_ended_threads_are_closed(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "readers.db")
    try:
        for _ in range(20):
            reader = threading.Thread(target=lambda: store.get_user("alice"))
            reader.start()
            reader.join(timeout=30)
        store.get_user("alice")
        # The main thread's reader and at most the last ended one, not twenty.
        assert len(store._readers) <= 2
    finally:
        store.close()


def test_a_network_can_be_saved_inside_a_unit_of_work(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "network.db")
    network = grid(3, 3)
    done = threading.Event()

    def save() -> None:
        with store.transaction() as work:
            work.save_network(network)
        done.set()

    saver = threading.Thread(target=save, daemon=True)
    saver.start()
    saver.join(timeout=30)
    try:
        assert done.is_set(), "saving a network inside a unit of work deadlocked"
        assert [n.name for n in store.network_summaries()] == [network.name]
    finally:
        store.close()


def test_the_writer_sets_its_busy_timeout_only_when_the_kind_of_write_changes(
    tmp_path: Path,
) -> None:
    """A server's requests never wait: a run of them sets the writer's busy timeout once,
    not twice per write. A write allowed to wait that follows tries its start itself (see
    the next test), then gets the whole timeout for its statements."""
    # NORMAL: under FULL no write runs where waiting is not allowed (see the test above).
    store = SqliteStore(tmp_path / "pragmas.db", busy_timeout=5, synchronous="normal")
    statements: list[str] = []
    store._writer.set_trace_callback(statements.append)
    try:
        for _ in range(5):
            asyncio.run(_without_waiting(lambda: store.hit("requests:c", 0)))
        timeouts = [s for s in statements if s.startswith("PRAGMA busy_timeout")]
        assert timeouts == ["PRAGMA busy_timeout = 0"]
        statements.clear()
        store.hit("requests:c", 0)  # on this thread: allowed to wait
        begin, pragma, *rest = statements
        assert (begin, pragma) == ("BEGIN IMMEDIATE", "PRAGMA busy_timeout = 5000")
        assert rest
        assert not any(s.startswith("PRAGMA busy_timeout") for s in rest)
    finally:
        store.close()


#: BEGINs a waiting write must try while another connection writes.
TRIES = 20


def test_a_write_allowed_to_wait_tries_again_itself_while_another_connection_writes(
    tmp_path: Path,
) -> None:
    """SQLite's own busy handler sleeps longer the longer it waits (100 ms a try after a
    third of a second), so a charged call behind a worker's transactions got in long after
    they ended (`make bench`, section 19). The store tries its start again itself, every
    millisecond at first: each try is a BEGIN the writer's trace sees (SQLite's handler
    tries inside one)."""
    path = tmp_path / "tries.db"
    store = SqliteStore(path, busy_timeout=60)
    tries: list[float] = []
    tried_often = threading.Event()

    def traced(statement: str) -> None:
        if statement == "BEGIN IMMEDIATE":
            tries.append(time.monotonic())
            if len(tries) >= TRIES:
                tried_often.set()

    store._writer.set_trace_callback(traced)
    holder = LockHolder(path)
    outcome: list[int] = []
    waiter = threading.Thread(target=lambda: outcome.append(store.hit("requests:c", 0)))
    try:
        waiter.start()
        assert tried_often.wait(timeout=10)
        assert holder.holding.is_set()  # every try met the other writer
    finally:
        holder.release()
        waiter.join(timeout=30)
        store.close()
    assert outcome == [1]  # once it let go, the write went through

"""The SQLite adapter under concurrent threads on one store, and files opened at once.

What every shared store guarantees across processes is in test_shared_store_processes.py."""

from __future__ import annotations

import threading
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

from cleanair_core.access.accounts import User
from cleanair_core.credits.ledger import CreditLimits, Debit, LedgerEntry, Usage
from cleanair_core.errors import CreditsExhausted
from cleanair_storage.sqlite import SqliteStore

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

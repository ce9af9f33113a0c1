"""What processes sharing one store do, for the multi-process contract suite.

Spawned children import this module by name (the tests put this directory on `sys.path`),
so it imports no test code. `open_shared` knows each shared adapter (SQLite: a file path;
PostgreSQL: a database URL); every test in test_shared_store_processes.py runs on each.
"""

from __future__ import annotations

import multiprocessing.queues
import multiprocessing.synchronize
import sys
from datetime import UTC, datetime, timedelta

from cleanair_core.credits.ledger import CreditLimits, Debit
from cleanair_core.errors import CreditsExhausted
from cleanair_core.ports import Store

#: The adapters whose stores several processes (and machines) can share.
SHARED_ADAPTERS = ("sqlite", "postgres")


def open_shared(adapter: str, location: str) -> Store:
    """Open the shared store of `adapter` at `location` (a file path, or a URL)."""
    if adapter == "sqlite":
        from cleanair_storage.sqlite import SqliteStore

        return SqliteStore(location)
    if adapter == "postgres":
        from cleanair_storage.postgres import PostgresStore

        return PostgresStore(location)
    raise ValueError(f"no shared adapter {adapter!r}")


def debit_many(
    adapter: str,
    location: str,
    pool: str,
    at: datetime,
    limits: CreditLimits,
    times: int,
    start: multiprocessing.synchronize.Barrier,
    results: multiprocessing.queues.Queue[tuple[int, int]],
) -> None:
    """Open the store, wait for every worker at `start`, then debit 1 credit `times` times;
    put (granted, refused) on `results`."""
    store = open_shared(adapter, location)
    granted = refused = 0
    try:
        start.wait(timeout=60)
        for index in range(times):
            try:
                store.debit(Debit(pool, f"conn-{index}", "score", 1, at), limits)
            except CreditsExhausted:
                refused += 1
            else:
                granted += 1
    finally:
        store.close()
    results.put((granted, refused))


def hit_many(
    adapter: str,
    location: str,
    key: str,
    window_start: int,
    times: int,
    start: multiprocessing.synchronize.Barrier,
    results: multiprocessing.queues.Queue[list[int]],
) -> None:
    """Open the store, wait for every worker at `start`, then count `times` rate-limit hits
    on `key`; put the counts the store answered on `results`."""
    store = open_shared(adapter, location)
    try:
        start.wait(timeout=60)
        counts = [store.hit(key, window_start) for _ in range(times)]
    finally:
        store.close()
    results.put(counts)


def refund_once(
    adapter: str,
    location: str,
    entry_id: int,
    at: datetime,
    start: multiprocessing.synchronize.Barrier,
    results: multiprocessing.queues.Queue[bool],
) -> None:
    """Open the store, wait for every worker at `start`, then refund `entry_id`; put whether
    this process's refund reversed it on `results`."""
    store = open_shared(adapter, location)
    try:
        start.wait(timeout=60)
        reversed_here = store.refund(entry_id, at) is not None
    finally:
        store.close()
    results.put(reversed_here)


def claim_all(
    adapter: str,
    location: str,
    now: datetime,
    lease: timedelta,
    start: multiprocessing.synchronize.Barrier,
    results: multiprocessing.queues.Queue[list[str]],
) -> None:
    """Open the store, wait for every worker at `start`, then claim plans until none is left;
    put the ids claimed, in order, on `results`."""
    store = open_shared(adapter, location)
    claimed: list[str] = []
    try:
        start.wait(timeout=60)
        while (plan := store.claim_plan(now, lease)) is not None:
            claimed.append(str(plan.id))
    finally:
        store.close()
    results.put(claimed)


DURABLE_AT = datetime(2026, 2, 10, 12, 0, tzinfo=UTC)


def debit_then_wait(adapter: str, location: str) -> None:
    """Debit 3 credits, print the entry's id, then wait to be killed (never closing)."""
    store = open_shared(adapter, location)
    entry = store.debit(Debit("user:alice", "conn-1", "score", 3, DURABLE_AT), CreditLimits())
    print(entry.id, flush=True)
    sys.stdin.read()


if __name__ == "__main__":
    debit_then_wait(sys.argv[1], sys.argv[2])

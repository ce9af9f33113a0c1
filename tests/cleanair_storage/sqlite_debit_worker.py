"""Worker run in spawned processes by test_sqlite_concurrency (kept free of test imports).

Spawned children import it by name, so the test puts this directory on `sys.path` first.
"""

from __future__ import annotations

import multiprocessing.queues
import multiprocessing.synchronize
from datetime import datetime

from cleanair_core.credits.ledger import CreditLimits, Debit
from cleanair_core.errors import CreditsExhausted
from cleanair_storage.sqlite import SqliteStore


def debit_many(
    path: str,
    pool: str,
    at: datetime,
    limits: CreditLimits,
    times: int,
    start: multiprocessing.synchronize.Barrier,
    results: multiprocessing.queues.Queue[tuple[int, int]],
) -> None:
    """Open the store, wait for every worker at `start`, then debit 1 credit `times` times;
    put (granted, refused) on `results`."""
    store = SqliteStore(path)
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

"""Worker run in spawned processes by test_sqlite_plan_claims (kept free of test imports).

Spawned children import it by name, so the test puts this directory on `sys.path` first.
"""

from __future__ import annotations

import multiprocessing.queues
import multiprocessing.synchronize
from datetime import datetime, timedelta

from cleanair_storage.sqlite import SqliteStore


def claim_all(
    path: str,
    now: datetime,
    lease: timedelta,
    start: multiprocessing.synchronize.Barrier,
    results: multiprocessing.queues.Queue[list[str]],
) -> None:
    """Open the store, wait for every worker at `start`, then claim plans until none is left;
    put the ids claimed, in order, on `results`."""
    store = SqliteStore(path)
    claimed: list[str] = []
    try:
        start.wait(timeout=60)
        while (plan := store.claim_plan(now, lease)) is not None:
            claimed.append(str(plan.id))
    finally:
        store.close()
    results.put(claimed)

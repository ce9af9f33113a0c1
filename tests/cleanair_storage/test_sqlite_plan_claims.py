"""Workers in several processes (and threads) claiming plans from one SQLite file."""

from __future__ import annotations

import importlib
import multiprocessing
import threading
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from cleanair_core.credits.ledger import CreditLimits, Debit
from cleanair_core.geo import Point
from cleanair_core.routes import plans as plan_rules
from cleanair_core.routes.network import PlanActivityType
from cleanair_core.routes.plans import Plan, PlanRequest, PlanStatus
from cleanair_storage.sqlite import SqliteStore

T0 = datetime(2026, 3, 10, 9, 30, tzinfo=UTC)
LEASE = timedelta(minutes=5)
PLANS = 40
REQUEST = PlanRequest(Point(52.52, 13.405), Point(52.51, 13.38), PlanActivityType.CYCLING, T0)


def fill(path: Path, count: int = PLANS) -> list[str]:
    """Create the file with `count` pending plans, a few sharing a creation time."""
    store = SqliteStore(path)
    try:
        ids = []
        for index in range(count):
            created = T0 + timedelta(microseconds=index // 3)
            plan = Plan(uuid.uuid4(), "alice", "conn-1", REQUEST, PlanStatus.PENDING, created)
            debit = Debit("user:alice", "conn-1", "route_plan", 25, created)
            plan_rules.submit(store, plan, debit, CreditLimits(monthly=10**6, daily=10**6))
            ids.append(str(plan.id))
        return ids
    finally:
        store.close()


def assert_each_claimed_once(path: Path, ids: list[str], claims: list[list[str]]) -> None:
    everything = [plan_id for claimed in claims for plan_id in claimed]
    assert len(everything) == len(set(everything)), "a plan was claimed twice"
    assert sorted(everything) == sorted(ids)
    store = SqliteStore(path)
    try:
        for plan_id in ids:
            plan = store.get_plan(uuid.UUID(plan_id))
            assert plan is not None
            assert (plan.attempts, plan.lease_until) == (1, T0 + timedelta(hours=1) + LEASE)
        assert store.claim_plan(T0 + timedelta(hours=1), LEASE) is None
    finally:
        store.close()


def test_processes_never_claim_the_same_plan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Spawned children import the worker by name: put its directory on the inherited path.
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    worker = importlib.import_module("sqlite_plan_worker")
    path = tmp_path / "claims.db"
    ids = fill(path)

    context = multiprocessing.get_context("spawn")
    start = context.Barrier(4)
    results = context.Queue()
    now = T0 + timedelta(hours=1)
    processes = [
        context.Process(target=worker.claim_all, args=(str(path), now, LEASE, start, results))
        for _ in range(4)
    ]
    for process in processes:
        process.start()
    try:
        for process in processes:  # the results are small, so the children exit before we read
            process.join(timeout=120)
    finally:
        for process in processes:
            if process.is_alive():
                process.kill()
                process.join()
    assert [p.exitcode for p in processes] == [0, 0, 0, 0]
    claims = [results.get(timeout=10) for _ in processes]
    assert_each_claimed_once(path, ids, claims)


def test_threads_with_their_own_stores_never_claim_the_same_plan(tmp_path: Path) -> None:
    path = tmp_path / "threads.db"
    ids = fill(path)
    stores = [SqliteStore(path) for _ in range(8)]
    barrier = threading.Barrier(len(stores))
    claims: list[list[str]] = [[] for _ in stores]
    now = T0 + timedelta(hours=1)

    def claim_all(index: int) -> None:
        barrier.wait(timeout=30)
        while (plan := stores[index].claim_plan(now, LEASE)) is not None:
            claims[index].append(str(plan.id))

    try:
        threads = [threading.Thread(target=claim_all, args=(i,)) for i in range(len(stores))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
    finally:
        for store in stores:
            store.close()
    assert_each_claimed_once(path, ids, claims)

"""The multi-process contract: what every store that several processes share guarantees.

Each test runs on every adapter in `shared_store_workers.SHARED_ADAPTERS`, with real
processes (spawned, or killed with SIGKILL): no overspend of a credit pool, no lost
rate-limit hit, one reversal however many refunds race, no plan claimed twice, and a debit
that was returned survives a hard kill.
"""

from __future__ import annotations

import importlib
import importlib.util
import multiprocessing
import subprocess
import sys
import threading
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import cast

import pytest

from cleanair_core.credits.ledger import CreditLimits, Debit, Usage
from cleanair_core.geo import Point
from cleanair_core.routes import plans as plan_rules
from cleanair_core.routes.network import PlanActivityType
from cleanair_core.routes.plans import Plan, PlanRequest, PlanStatus

HERE = Path(__file__).parent


def _load_workers() -> ModuleType:
    """The workers module, loaded from its file (the tests' directory is not importable)."""
    spec = importlib.util.spec_from_file_location("_workers", HERE / "shared_store_workers.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_WORKERS = _load_workers()
SHARED_ADAPTERS: tuple[str, ...] = _WORKERS.SHARED_ADAPTERS
open_shared = _WORKERS.open_shared

AT = datetime(2026, 2, 10, 12, 0, tzinfo=UTC)
POOL = "user:alice"
LIMITS = CreditLimits(monthly=1000, daily=100)
T0 = datetime(2026, 3, 10, 9, 30, tzinfo=UTC)
LEASE = timedelta(minutes=5)
PLANS = 40
REQUEST = PlanRequest(Point(52.52, 13.405), Point(52.51, 13.38), PlanActivityType.CYCLING, T0)


@pytest.fixture(params=SHARED_ADAPTERS)
def shared(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str]:
    """(adapter, location) of a fresh shared store, its schema created."""
    adapter: str = request.param
    if adapter == "postgres":
        location = str(request.getfixturevalue("postgres_url"))
    else:
        location = str(tmp_path / "shared.db")
    open_shared(adapter, location).close()
    return adapter, location


@pytest.fixture
def workers(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    # Spawned children import the workers by name: put their directory on the inherited path.
    monkeypatch.syspath_prepend(str(HERE))
    return importlib.import_module("shared_store_workers")


def run_processes(target: object, args: tuple[object, ...], count: int) -> list[object]:
    """Run `target(*args, start, results)` in `count` spawned processes released together;
    what each put on `results`."""
    context = multiprocessing.get_context("spawn")
    start = context.Barrier(count)
    results = context.Queue()
    processes = [
        context.Process(target=target, args=(*args, start, results))  # type: ignore[arg-type]
        for _ in range(count)
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
    assert [p.exitcode for p in processes] == [0] * count
    return [results.get(timeout=10) for _ in processes]


def test_processes_never_overspend_the_daily_cap(
    shared: tuple[str, str], workers: ModuleType
) -> None:
    counts = cast(
        list[tuple[int, int]],
        run_processes(workers.debit_many, (*shared, POOL, AT, LIMITS, 50), 4),
    )
    assert sum(granted for granted, _ in counts) == 100
    assert sum(refused for _, refused in counts) == 100
    store = open_shared(*shared)
    try:
        assert store.usage(POOL, AT) == Usage(month=100, day=100)
        assert len(store.entries(POOL)) == 100
    finally:
        store.close()


def fill(shared: tuple[str, str], count: int = PLANS) -> list[str]:
    """`count` pending plans, a few sharing a creation time."""
    store = open_shared(*shared)
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


def assert_each_claimed_once(
    shared: tuple[str, str], ids: list[str], claims: list[list[str]]
) -> None:
    everything = [plan_id for claimed in claims for plan_id in claimed]
    assert len(everything) == len(set(everything)), "a plan was claimed twice"
    assert sorted(everything) == sorted(ids)
    store = open_shared(*shared)
    try:
        for plan_id in ids:
            plan = store.get_plan(uuid.UUID(plan_id))
            assert plan is not None
            assert (plan.attempts, plan.lease_until) == (1, T0 + timedelta(hours=1) + LEASE)
        assert store.claim_plan(T0 + timedelta(hours=1), LEASE) is None
    finally:
        store.close()


def test_rate_limit_hits_from_many_processes_are_each_counted_once(
    shared: tuple[str, str], workers: ModuleType
) -> None:
    """No lost update: every hit of every process gets its own count, 1 to the total."""
    processes, hits = 4, 50
    counts = run_processes(workers.hit_many, (*shared, "conn-1", 7, hits), processes)
    answered = sorted(c for each in cast(list[list[int]], counts) for c in each)
    assert answered == list(range(1, processes * hits + 1))


def test_racing_refunds_of_one_debit_reverse_it_once(
    shared: tuple[str, str], workers: ModuleType
) -> None:
    store = open_shared(*shared)
    try:
        entry = store.debit(Debit(POOL, "conn-1", "score", 5, AT), LIMITS)
    finally:
        store.close()
    reversed_here = run_processes(workers.refund_once, (*shared, entry.id, AT), 4)
    assert sorted(cast(list[bool], reversed_here)) == [False, False, False, True]
    store = open_shared(*shared)
    try:
        assert [e.amount for e in store.entries(POOL)] == [5, -5]
        assert store.usage(POOL, AT) == Usage(0, 0)
    finally:
        store.close()


def test_processes_never_claim_the_same_plan(shared: tuple[str, str], workers: ModuleType) -> None:
    ids = fill(shared)
    claims = run_processes(workers.claim_all, (*shared, T0 + timedelta(hours=1), LEASE), 4)
    assert_each_claimed_once(shared, ids, claims)  # type: ignore[arg-type]


def test_threads_with_their_own_stores_never_claim_the_same_plan(
    shared: tuple[str, str],
) -> None:
    ids = fill(shared)
    stores = [open_shared(*shared) for _ in range(8)]
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
    assert_each_claimed_once(shared, ids, claims)


def test_a_returned_debit_survives_a_hard_kill(shared: tuple[str, str]) -> None:
    child = subprocess.Popen(
        [sys.executable, str(HERE / "shared_store_workers.py"), *shared],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
    finally:
        child.kill()  # SIGKILL: no cleanup, no close, no checkpoint
        child.wait(timeout=30)
        if child.stdin is not None:
            child.stdin.close()
        if child.stdout is not None:
            child.stdout.close()
    assert child.returncode == -9
    entry_id = int(line)

    store = open_shared(*shared)
    try:
        entries = store.entries(POOL)
        assert [(e.id, e.amount, e.at) for e in entries] == [(entry_id, 3, AT)]
        assert store.usage(POOL, AT) == Usage(month=3, day=3)
    finally:
        store.close()

"""Plan workers over one PostgreSQL database (`make bench`, sections 12 and 13), on the tests'
throwaway local server (fsync off).

12. Plans per second with 1 and 2 `cleanair worker` processes (one runner each, so the
    figure is what a second process adds): walks 0.5-3 km apart on the shipped Helsinki
    network, all submitted in one transaction once the workers listen and have each planned
    a warm-up (the first plan of a process builds its snapping tree), timed from that commit
    to the last plan's `finished_at`; with the workers' CPU per plan, which the machine's
    load does not change. The machine's free cores bound the ratio (the database and this
    process share them with the workers); each worker runs in its own session, as under a
    service manager, since in one session the kernel's autogroup scheduling would give all
    of them one session's share of the CPU.
13. Wake-up latency (issue 13: a plan submitted on one machine starts on another within
    100 ms): one idle worker whose idle wait is 60 s, so only LISTEN/NOTIFY wakes it; plans
    submitted one at a time from this process, each after the worker has gone back to rest;
    submit-to-claim is the claim instant (the lease the claim set, minus its length) less the
    plan's `created_at` (stamped before the submission's transaction, so its commit counts).
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path

import attrs
import psycopg

from bench.planning import walk_pairs
from cleanair_core import generate_key
from cleanair_core.geo import Point
from cleanair_runtime.composition.bootstrap import DEFAULT_NETWORK_FILE, DEFAULT_NETWORK_NAME
from cleanair_sources.osm_import import import_network

sys.path.insert(0, str(Path(__file__).parents[1] / "tests"))
from support.plan_workers import (
    PlanSubmitter,
    finished,
    wait_until_listening,
    watch_claim,
    worker_processes,
)
from support.postgres import shared_server
from support.servers import server_env

#: Plans timed per worker count; about 15 s for one worker here.
PLANS = 600
WORKER_COUNTS = (1, 2)
WAKE_SUBMISSIONS = 20
IDLE_SECONDS = 60
LEASE = timedelta(seconds=60)
#: Before each wake-up submission: the worker finishes the previous plan, looks once more
#: (finding nothing) and goes back to rest well within this.
SETTLE_S = 0.25
DEADLINE_S = 60.0

Pairs = list[tuple[Point, Point]]


def wait_until(check: Callable[[], bool], what: str, timeout: float = DEADLINE_S) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise SystemExit(f"workers bench: {what} not within {timeout:g} s")
        time.sleep(0.01)


def all_finished(conn: psycopg.Connection[tuple[object, ...]], ids: list[uuid.UUID]) -> bool:
    return finished(conn, ids) == len(ids)


def cpu_seconds(pids: list[int]) -> float:
    """User and system CPU the processes have used so far (Linux: /proc/<pid>/stat)."""
    total = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15)
    return total / os.sysconf("SC_CLK_TCK")


@attrs.frozen
class Throughput:
    plans_per_second: float
    #: Worker processes' CPU per plan: what the plans cost whatever else the machine runs.
    cpu_ms_per_plan: float
    failed: int


def plans_per_second(
    url: str, env: dict[str, str], submitter: PlanSubmitter, pairs: Pairs, logs: Path
) -> dict[int, Throughput]:
    """Per worker count: plans per second, the workers' CPU per plan, plans failed."""
    figures: dict[int, Throughput] = {}
    with psycopg.connect(url, autocommit=True) as conn:
        for count in WORKER_COUNTS:
            with worker_processes(env, count, logs) as workers:
                wait_until_listening(url, count, workers)
                # One per worker at once: each idle runner takes one.
                warm = [submitter.submit(*pair) for pair in pairs[:count]]
                wait_until(partial(all_finished, conn, warm), "the warm-up plans")
                timed = pairs[count : count + PLANS]
                with submitter.store.transaction():  # all claimable at one instant
                    ids = [submitter.submit(*pair) for pair in timed]
                released = datetime.now(UTC)
                cpu = cpu_seconds([w.pid for w in workers])
                wait_until(partial(all_finished, conn, ids), f"{PLANS} plans")
                cpu = cpu_seconds([w.pid for w in workers]) - cpu
                row = conn.execute(
                    "SELECT max(finished_at), count(*) FILTER (WHERE status = 'failed') "
                    "FROM plans WHERE id = ANY(%s)",
                    ([str(i) for i in ids],),
                ).fetchone()
            assert row is not None
            last, failed = row
            assert isinstance(last, datetime)
            assert isinstance(failed, int)
            rate = PLANS / (last - released).total_seconds()
            figures[count] = Throughput(rate, cpu / PLANS * 1000, failed)
    return figures


def wake_latencies(
    url: str, env: dict[str, str], submitter: PlanSubmitter, pairs: Pairs, logs: Path
) -> tuple[list[float], int]:
    """Submit-to-claim seconds of each submission to an idle worker, and how many plans
    were seen only once finished (their figure is then the finish, an overestimate)."""
    latencies: list[float] = []
    late = 0
    idle_env = {
        **env,
        "CLEANAIR_PLAN_WORKER_IDLE_SECONDS": str(IDLE_SECONDS),
        "CLEANAIR_PLAN_LEASE_SECONDS": str(int(LEASE.total_seconds())),
    }
    with (
        psycopg.connect(url, autocommit=True) as conn,
        worker_processes(idle_env, 1, logs) as workers,
    ):
        wait_until_listening(url, 1, workers)
        warm = [submitter.submit(*pairs[0])]
        wait_until(partial(all_finished, conn, warm), "the warm-up plan")
        for pair in pairs[1 : WAKE_SUBMISSIONS + 1]:
            time.sleep(SETTLE_S)
            plan = submitter.submit(*pair)
            claim = watch_claim(conn, plan, LEASE, timeout=IDLE_SECONDS / 4)
            if claim is None:
                raise SystemExit("workers bench: a submission did not wake the idle worker")
            latencies.append(claim.latency.total_seconds())
            late += not claim.exact
            wait_until(partial(all_finished, conn, [plan]), "a woken worker's plan")
    return latencies, late


def main() -> None:
    started = time.perf_counter()
    url = shared_server().database()
    key = generate_key()
    submitter = PlanSubmitter(url, key)
    try:
        network = import_network(DEFAULT_NETWORK_FILE, DEFAULT_NETWORK_NAME)
        submitter.store.save_network(network)  # stored once: no worker imports it
        pairs = walk_pairs(network, PLANS + max(WORKER_COUNTS), seed=13)
        with tempfile.TemporaryDirectory() as tmp:
            env = server_env(
                Path(tmp),
                CLEANAIR_DATABASE=url,
                CLEANAIR_SECRET_KEY=key.hex(),
                CLEANAIR_DEFAULT_NETWORK="false",
            )
            rates = plans_per_second(url, env, submitter, pairs, Path(tmp))
            latencies, late = wake_latencies(url, env, submitter, pairs, Path(tmp))
    finally:
        submitter.close()
    print(
        f"route plans by `cleanair worker` processes over one PostgreSQL database ({PLANS} "
        "Helsinki walks 0.5-3 km, one runner per process):"
    )
    for count, figures in rates.items():
        print(
            f"  {count} worker process{'es' if count > 1 else '  '}  "
            f"{figures.plans_per_second:6.1f} plans/s  "
            f"({figures.cpu_ms_per_plan:.1f} ms worker CPU per plan"
            f"{f', {figures.failed} failed' if figures.failed else ''})"
        )
    one, two = rates[1].plans_per_second, rates[2].plans_per_second
    print(
        f"  2 / 1 processes: {two / one:.2f}x (load average {os.getloadavg()[0]:.1f} on "
        f"{os.cpu_count()} cores, PostgreSQL and this process included)"
    )
    ordered = sorted(latencies)
    p90 = ordered[int(0.9 * (len(ordered) - 1))]
    print(
        f"wake-up of an idle worker in another process (idle wait {IDLE_SECONDS} s; "
        f"{len(latencies)} submissions): submit-to-claim median "
        f"{statistics.median(ordered) * 1000:.1f} ms, p90 {p90 * 1000:.1f} ms, max "
        f"{ordered[-1] * 1000:.1f} ms; aim under 100 ms: "
        f"{'met' if statistics.median(ordered) < 0.1 else 'NOT met'}"
    )
    if late:
        print(f"  ({late} seen only once finished: their figure is the finish, an overestimate)")
    print(f"  ({time.perf_counter() - started:.0f} s in all)")


if __name__ == "__main__":
    main()

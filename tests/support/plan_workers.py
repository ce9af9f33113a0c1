"""`cleanair worker` processes over one PostgreSQL database, and route plans submitted to
them from this process (another process than theirs), as an API server submits them.

For the end-to-end test of wake-ups across processes and for the worker benchmarks. What a
worker did is read from the database: a claim sets the plan's lease to the worker's clock
plus the lease, so `lease_until - lease` is the instant it claimed the plan.
"""

from __future__ import annotations

import signal
import subprocess
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import psycopg

from cleanair_core import CleanAir, Policy, TokenKeys
from cleanair_core.access.connections import Authorized
from cleanair_core.access.scopes import Scope
from cleanair_core.credits.ledger import CreditLimits
from cleanair_core.geo import Point
from cleanair_core.routes.network import PlanActivityType
from cleanair_storage.postgres import PostgresStore
from cleanair_storage.postgres.wakeups import CHANNEL
from support.servers import CLI, STARTUP_S, stop

#: What a worker's LISTENing connection last ran, as `pg_stat_activity` shows it.
LISTENING = f"LISTEN {CHANNEL}"
#: Between polls of the database, seconds: short against the latencies measured.
POLL_S = 0.002


@contextmanager
def worker_processes(
    env: Mapping[str, str], count: int, logs: Path, concurrency: int = 1
) -> Iterator[list[subprocess.Popen[str]]]:
    """`count` `cleanair worker --concurrency N` processes, each logging to a file under
    `logs`; stopped with SIGTERM (killed if that takes over 30 s) when the block ends."""
    with ExitStack() as stack:
        processes: list[subprocess.Popen[str]] = []
        for index in range(count):
            log = stack.enter_context((logs / f"worker-{index}.log").open("w"))
            process = subprocess.Popen(
                [CLI, "worker", "--concurrency", str(concurrency)],
                env=dict(env),
                stdout=subprocess.DEVNULL,
                stderr=log,
                text=True,
                # Its own session, as a service manager starts it: with the kernel's
                # autogroup scheduling one session shares one slice of the CPU however
                # many processes it runs, so workers added to this one would add nothing.
                start_new_session=True,
            )
            processes.append(process)
            stack.callback(_stop, process)
        yield processes


def _stop(process: subprocess.Popen[str]) -> None:
    stop(process, signal.SIGTERM, timeout=30)


def listeners(conn: psycopg.Connection[tuple[object, ...]]) -> int:
    """The connections LISTENing for plans on this database: one per started worker."""
    row = conn.execute(
        "SELECT count(*) FROM pg_stat_activity "
        "WHERE datname = current_database() AND state = 'idle' AND query = %s",
        (LISTENING,),
    ).fetchone()
    return int(str(row[0])) if row else 0


def wait_until_listening(
    url: str, count: int, processes: list[subprocess.Popen[str]], timeout: float = STARTUP_S
) -> None:
    """Until `count` workers listen for plans (each started: its network loaded, its first
    look for plans made alongside); bounded, and failing at once if a worker exits."""
    deadline = time.monotonic() + timeout
    with psycopg.connect(url, autocommit=True) as conn:
        while listeners(conn) < count:
            exited = [p.returncode for p in processes if p.poll() is not None]
            assert not exited, f"a worker exited with {exited}"
            assert time.monotonic() < deadline, f"{count} workers not listening in {timeout} s"
            time.sleep(0.05)


class PlanSubmitter:
    """Submits walking plans to the database at `url` as one user, through the core (the
    store's submission NOTIFYs the workers, as an API server's does)."""

    def __init__(self, url: str, key: bytes, user: str = "planner") -> None:
        self.store = PostgresStore(url)
        limits = CreditLimits(monthly=10**9, daily=10**9)
        self.core = CleanAir(self.store, TokenKeys(key), Policy(credits=limits))
        self.core.add_user(user)
        issued = self.core.redeem_pairing_code(
            self.core.create_pairing_code(user), "plans", "127.0.0.1"
        )
        caller = self.core.authenticate(issued.token)
        self.proof: Authorized = self.core.authorize(caller, Scope.ROUTES_PLAN, user_owned=True)

    def submit(self, start: Point, end: Point) -> uuid.UUID:
        return self.core.submit_plan(
            self.proof, start=start, end=end, activity=PlanActivityType.WALKING
        )

    def close(self) -> None:
        self.store.close()


@dataclass(frozen=True)
class Claim:
    """When a plan was created and when a worker claimed it. `exact`: read from its lease;
    otherwise the plan had finished before it was seen claimed, and `claimed` is when it
    finished (later than the claim: never a flattering figure)."""

    created: datetime
    claimed: datetime
    exact: bool

    @property
    def latency(self) -> timedelta:
        return self.claimed - self.created


def watch_claim(
    conn: psycopg.Connection[tuple[object, ...]],
    plan_id: uuid.UUID,
    lease: timedelta,
    timeout: float,
) -> Claim | None:
    """The plan's claim, watched every POLL_S until `timeout` (None if not claimed by then)."""
    deadline = time.monotonic() + timeout
    while True:
        row = conn.execute(
            "SELECT created_at, lease_until, finished_at, attempts FROM plans WHERE id = %s",
            (str(plan_id),),
        ).fetchone()
        assert row is not None, f"no plan {plan_id}"
        created, lease_until, finished_at, attempts = row
        assert isinstance(created, datetime)
        if isinstance(lease_until, datetime) and isinstance(attempts, int) and attempts > 0:
            return Claim(created, lease_until - lease, exact=True)
        if isinstance(finished_at, datetime):
            return Claim(created, finished_at, exact=False)
        if time.monotonic() > deadline:
            return None
        time.sleep(POLL_S)


def finished(conn: psycopg.Connection[tuple[object, ...]], plan_ids: list[uuid.UUID]) -> int:
    """How many of the plans are finished (completed or failed)."""
    row = conn.execute(
        "SELECT count(*) FROM plans WHERE id = ANY(%s) AND status <> 'pending'",
        ([str(p) for p in plan_ids],),
    ).fetchone()
    return int(str(row[0])) if row else 0

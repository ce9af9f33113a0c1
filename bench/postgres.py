"""PostgreSQL credit debits (`make bench`, section 11), on a throwaway local server.

Each figure is a ratio measured in the same run: PostgresStore debits (one autocommitted
statement: the two window counters' conditional upserts, the ledger row and its hold) against
a bare conditional `UPDATE ... RETURNING` on one row of the same server, and against SQLite
debits. One client thread, then two threads on one pool (debits of different pools).
Aim (issue 13): PostgreSQL debits >= 0.5x the bare conditional update. The debit writes four
rows where the bare update writes one: its statement alone, sent on a raw connection with no
pool and no store code, reached 0.44x in one run.
"""

from __future__ import annotations

import functools
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import psycopg

from bench.wrk import postgres_processes
from cleanair_core.credits.ledger import CreditLimits, Debit
from cleanair_storage.postgres import PostgresStore
from cleanair_storage.sqlite import SqliteStore

sys.path.insert(0, str(Path(__file__).parents[1] / "tests"))
from support.postgres import PostgresServer, shared_server, started_until_exit

DEBITS = 3000
LIMITS = CreditLimits(monthly=10**9, daily=10**9)


def rate(work: int, seconds: float) -> float:
    return work / seconds if seconds > 0 else float("inf")


def bare_updates(url: str, n: int) -> float:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS bare (id INT PRIMARY KEY, used INT NOT NULL)")
        conn.execute("INSERT INTO bare VALUES (1, 0) ON CONFLICT DO NOTHING")
        started = time.perf_counter()
        for _ in range(n):
            conn.execute(
                "UPDATE bare SET used = used + 1 WHERE id = 1 AND used + 1 <= %s RETURNING used",
                (10**9,),
            ).fetchone()
        return rate(n, time.perf_counter() - started)


def store_debits(store: PostgresStore | SqliteStore, n: int, threads: int) -> float:
    at = datetime.now(UTC)

    def work(index: int) -> None:
        for _ in range(n // threads):
            store.debit(Debit(f"user:bench{index}", "conn", "score", 1, at), LIMITS)

    runners = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    started = time.perf_counter()
    for runner in runners:
        runner.start()
    for runner in runners:
        runner.join()
    return rate(n, time.perf_counter() - started)


def test_server_url() -> str:
    """A fresh database on the tests' throwaway server (started on first use). That server
    runs without fsync or synchronous commits: fine for a figure that compares two things on
    it, wrong for one that stands for a served deployment (`shipped_server_url`)."""
    return shared_server().database()


def server_processes() -> list[int]:
    """The tests' throwaway server's processes: its postmaster and backends."""
    return postgres_processes(shared_server().data)


@functools.cache
def shipped_server() -> PostgresServer:
    """A throwaway server as PostgreSQL ships: fsync, full-page writes and synchronous commits
    on, so each acknowledged charge waits for its WAL to reach the disk (issue 34), as on
    SQLite with `synchronous=FULL`. Started on first use, stopped when this process exits;
    its files are in the system's temporary directory (on a tmpfs a sync would cost nothing,
    and the figures would say nothing)."""
    return started_until_exit(PostgresServer(durable=True))


def shipped_server_url() -> str:
    """A fresh database on `shipped_server`: the served figures' PostgreSQL."""
    return shipped_server().database()


def shipped_server_processes() -> list[int]:
    """`shipped_server`'s processes: its postmaster and backends."""
    return postgres_processes(shipped_server().data)


def main() -> None:
    server = shared_server()
    url = server.database()
    postgres = PostgresStore(url)
    with tempfile.TemporaryDirectory() as tmp:
        sqlite = SqliteStore(Path(tmp) / "bench.db")
        # Warm up, then alternate so machine noise hits both alike.
        bare_updates(url, 200)
        store_debits(postgres, 200, 1)
        figures: dict[str, list[float]] = {"bare": [], "pg1": [], "pg2": [], "sqlite": []}
        for _ in range(3):
            figures["bare"].append(bare_updates(url, DEBITS))
            figures["pg1"].append(store_debits(postgres, DEBITS, 1))
            figures["pg2"].append(store_debits(postgres, DEBITS, 2))
            figures["sqlite"].append(store_debits(sqlite, DEBITS, 1))
        sqlite.close()
    postgres.close()
    median = {name: sorted(values)[1] for name, values in figures.items()}
    bare = median["bare"]
    print(
        "credit debits on PostgreSQL (local server, fsync off as in the tests; 3 rounds, median):"
    )
    print(f"  bare conditional UPDATE ... RETURNING     {bare:>9,.0f}/s  baseline")
    for name, label in (
        ("pg1", "PostgresStore.debit, 1 thread"),
        ("pg2", "PostgresStore.debit, 2 threads"),
        ("sqlite", "SqliteStore.debit, 1 thread"),
    ):
        print(f"  {label:<40} {median[name]:>9,.0f}/s  {median[name] / bare:5.2f}x bare")
    ratio = median["pg1"] / bare
    print(
        f"  aim: PostgreSQL debits >= 0.5x the bare update: {ratio:.2f}x, "
        f"{'met' if ratio >= 0.5 else 'NOT met'}; PostgreSQL / SQLite "
        f"{median['pg1'] / median['sqlite']:.2f}x"
    )

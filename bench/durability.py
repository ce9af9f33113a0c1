"""What syncing every answered write to disk costs a served score (`make bench`, section 23).

Served score, as `bench/served.py` serves it (shipped access log and metrics, 8 keep-alive
connections from one client process), before and after: SQLite with `synchronous=NORMAL`
(a commit reaches the WAL, synced only at checkpoints) against `FULL` (the default: the WAL
is synced at every commit, one sync a group commit), and PostgreSQL with
`synchronous_commit=off` against `on` (PostgreSQL's default), on a durable local server
(fsync on, unlike the tests' server). Both servers of a pair run side by side and their
rounds alternate, so machine noise hits both alike; the cost is their ratio. The bare
endpoint of the synced server is the baseline of the issue's served ratios.

Alone: `PYTHONPATH=. .venv/bin/python -m bench.durability [sqlite | postgresql]` (both: about
three minutes). The servers keep their files in the system's temporary directory: on a tmpfs
a sync costs nothing, and the figures say nothing.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg

from bench import served
from bench.harness import SCORE_BODY
from cleanair_core.offload import Offload
from cleanair_core.ports import Store
from cleanair_http.offloading import here_or_in_thread
from cleanair_storage.sqlite import SqliteStore, Synchronous

sys.path.insert(0, str(Path(__file__).parents[1] / "tests"))
from support.postgres import PostgresServer

CONNECTIONS = served.CONNECTIONS
REQUESTS = 1200
ROUNDS = 3
PROCESSES = (1, 2)
Stats = tuple[float, float, float]  # requests a second, p50 µs, p99 µs


# -- the servers -----------------------------------------------------------------------------


def serve_synchronous(synchronous: Synchronous) -> None:
    """`bench/served.py`'s server, its SQLite store opened with `synchronous` (argv as its)."""
    shipped = served.open_store

    def open_store(database: str) -> tuple[Store, Offload]:
        if database.startswith("postgresql://"):
            return shipped(database)
        return SqliteStore(database, synchronous=synchronous), here_or_in_thread

    served.open_store = open_store
    served.main()


class Server:
    """A bench server's port and the requests to send it."""

    def __init__(self, port: int, token: str) -> None:
        self.port = port
        self.score = (
            f"POST /v1/airquality/score HTTP/1.1\r\nhost: bench\r\n"
            f"authorization: Bearer {token}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(SCORE_BODY)}\r\n\r\n"
        ).encode() + SCORE_BODY
        self.bare = b"GET /bare HTTP/1.1\r\nhost: bench\r\n\r\n"


@contextmanager
def bench_server(database: str, processes: int, synchronous: Synchronous) -> Iterator[Server]:
    """A bench server (see `serve_synchronous`) and its port and token, stopped at the end."""
    command = [sys.executable, "-m", "bench.durability", "serve", synchronous]
    command += [database, str(processes)]
    # The access log to a file, as a service manager's journal takes it: not the terminal.
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log, text=True)
        try:
            assert process.stdout is not None
            ready = process.stdout.readline().split()
            if not ready or ready[0] != "READY":
                log.seek(0)
                raise SystemExit(f"the bench server did not start: {log.read()[-2000:]!r}")
            yield Server(int(ready[1]), ready[2])
        finally:
            process.terminate()
            process.wait(timeout=30)


# -- the client ------------------------------------------------------------------------------


async def requests(port: int, request: bytes, n: int) -> Stats:
    """`n` requests over the served client's keep-alive connections, each answered 200."""
    await served.wait_until_listening(port)
    rate, p50, p99 = await served.served_round(port, request, n)
    return (rate, p50, p99)


def median(rounds: list[Stats]) -> Stats:
    return sorted(rounds)[len(rounds) // 2]


async def compare(weak: Server, synced: Server) -> dict[str, Stats]:
    """Score on both servers and bare on the synced one, rounds alternating (which server
    goes first alternates too); each one's median round."""
    jobs = {
        "weak": (weak.port, weak.score),
        "synced": (synced.port, synced.score),
        "bare": (synced.port, synced.bare),
    }
    for port, request in jobs.values():  # warm up
        await requests(port, request, REQUESTS // 3)
    runs: dict[str, list[Stats]] = {name: [] for name in jobs}
    for index in range(ROUNDS):
        order = list(jobs) if index % 2 == 0 else ["synced", "weak", "bare"]
        for name in order:
            port, request = jobs[name]
            runs[name].append(await requests(port, request, REQUESTS))
    return {name: median(rounds) for name, rounds in runs.items()}


def report(store: str, processes: int, weak: str, synced: str, figures: dict[str, Stats]) -> None:
    before, after, bare = figures["weak"], figures["synced"], figures["bare"]
    plural = "es" if processes > 1 else "  "
    print(
        f"  {store:<10} {processes} process{plural}  {weak:<22} {before[0]:>7,.0f}/s "
        f"p50 {before[1] / 1e3:5.1f} ms p99 {before[2] / 1e3:5.1f} ms"
    )
    print(
        f"  {'':<10} {'':<11} {synced:<22} {after[0]:>7,.0f}/s "
        f"p50 {after[1] / 1e3:5.1f} ms p99 {after[2] / 1e3:5.1f} ms  "
        f"{after[0] / before[0]:.2f}x the unsynced; {after[0] / bare[0]:.2f}x bare "
        f"({bare[0]:,.0f}/s)"
    )


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.2f} (1 min), {five:.2f} (5 min), {os.cpu_count()} cores"


async def sqlite_figures() -> None:
    for processes in PROCESSES:
        with (
            bench_server("sqlite", processes, "normal") as weak,
            bench_server("sqlite", processes, "full") as synced,
        ):
            figures = await compare(weak, synced)
        report("SQLite", processes, "synchronous=NORMAL", "synchronous=FULL (default)", figures)


async def postgres_figures() -> None:
    server = PostgresServer(durable=True)  # fsync on, as PostgreSQL ships
    try:
        server.start()
        for processes in PROCESSES:
            weak_url, synced_url = server.database(), server.database()
            with psycopg.connect(server.url(), autocommit=True) as conn:
                name = weak_url.rsplit("/", 1)[1]
                conn.execute(f'ALTER DATABASE "{name}" SET synchronous_commit = off')
            with (
                bench_server(weak_url, processes, "full") as weak,
                bench_server(synced_url, processes, "full") as synced,
            ):
                figures = await compare(weak, synced)
            report("PostgreSQL", processes, "synchronous_commit=off", "=on (default)", figures)
    finally:
        server.stop()


async def main(stores: tuple[str, ...] = ("sqlite", "postgresql")) -> None:
    """The section: `stores` says which of the two to measure."""
    started = time.perf_counter()
    print(
        f"durability: served score, unsynced against synced commits ({CONNECTIONS} keep-alive "
        f"connections, {ROUNDS} alternating rounds of {REQUESTS}, median round; {load()}):"
    )
    if "sqlite" in stores:
        await sqlite_figures()
    if "postgresql" in stores:
        await postgres_figures()
    print(f"  ({time.perf_counter() - started:.0f} s; {load()})")


if __name__ == "__main__":
    if sys.argv[1:2] == ["serve"]:
        mode = sys.argv[2]
        assert mode in ("full", "normal"), mode
        sys.argv = [sys.argv[0], *sys.argv[3:]]
        serve_synchronous("full" if mode == "full" else "normal")
    else:  # `python -m bench.durability [sqlite | postgresql]`
        asyncio.run(main(tuple(sys.argv[1:2]) or ("sqlite", "postgresql")))

"""Quota endpoint and SQLite debits, beside a bare Litestar JSON endpoint in the same run.

Requests are driven in process straight through the ASGI interface (no sockets), so the
figures measure the application, not a load generator; rounds alternate between the bare
endpoint and ours so machine noise hits both alike. Run: `make bench`.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from litestar import Litestar, get

from cleanair_core import CleanAir, Policy, TokenKeys, generate_key
from cleanair_core.credits import CreditLimits, Debit
from cleanair_http.app import create_app
from cleanair_storage.sqlite import SqliteStore

REQUESTS = 4000
DEBITS = 10000
ROUNDS = 3


@get("/bare")
async def bare() -> dict[str, bool]:
    return {"ok": True}


def scope_for(path: str, token: str | None) -> dict[str, Any]:
    headers = [(b"host", b"bench")]
    if token:
        headers.append((b"authorization", f"Bearer {token}".encode()))
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": headers,
        "client": ("127.0.0.1", 5000),
        "server": ("bench", 80),
        "state": {},
    }


async def run_requests(app: Any, path: str, token: str | None, n: int) -> list[float]:
    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    status: list[int] = []

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            status.append(message["status"])

    timings = []
    for _ in range(n):
        started = time.perf_counter()
        await app(scope_for(path, token), receive, send)
        timings.append(time.perf_counter() - started)
    if set(status) != {200}:
        raise SystemExit(f"{path}: unexpected statuses {sorted(set(status))}")
    return timings


def summary(timings: list[float]) -> tuple[float, float, float]:
    ordered = sorted(timings)
    rps = len(ordered) / sum(ordered)
    return rps, ordered[len(ordered) // 2] * 1e6, ordered[int(len(ordered) * 0.99)] * 1e6


def debit_timings(store: SqliteStore, n: int) -> list[float]:
    limits = CreditLimits(monthly=10**9, daily=10**9)
    at = datetime.now(UTC)
    timings = []
    for i in range(n):
        debit = Debit(f"user:bench{i % 50}", "conn", "score", 1, at)
        started = time.perf_counter()
        store.debit(debit, limits)
        timings.append(time.perf_counter() - started)
    return timings


def line(name: str, stats: tuple[float, float, float], base: float | None) -> str:
    rps, p50, p99 = stats
    ratio = f"{rps / base:6.2f}x bare" if base else " baseline  "
    return f"{name:<28} {rps:>9,.0f}/s  p50 {p50:>7.1f} µs  p99 {p99:>7.1f} µs  {ratio}"


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = SqliteStore(Path(tmp) / "bench.db")
        policy = Policy(requests_per_minute=10**9)
        core = CleanAir(store, TokenKeys(generate_key()), policy)
        core.add_user("bench")
        token = core.redeem_pairing_code(core.create_pairing_code("bench"), "b", "127.0.0.1").token
        ours = create_app(core)
        bare_app = Litestar([bare], openapi_config=None)
        runs: dict[str, list[list[float]]] = {"bare": [], "quota": [], "debit": []}
        jobs: list[tuple[str, Callable[[], Awaitable[list[float]]]]] = [
            ("bare", lambda: run_requests(bare_app, "/bare", None, REQUESTS)),
            ("quota", lambda: run_requests(ours, "/v1/quota", token, REQUESTS)),
        ]
        await jobs[0][1]()  # warm up both apps
        await jobs[1][1]()
        for _ in range(ROUNDS):
            for name, job in jobs:
                runs[name].append(await job())
            runs["debit"].append(debit_timings(store, DEBITS // ROUNDS))
        store.close()

    def median_round(name: str) -> tuple[float, float, float]:
        stats = [summary(t) for t in runs[name]]
        return sorted(stats)[len(stats) // 2]

    bare_stats = median_round("bare")
    print(f"cleanair benchmarks: {ROUNDS} alternating rounds, median round shown")
    print(line("GET /bare (bare Litestar)", bare_stats, None))
    print(line("GET /v1/quota (SQLite)", median_round("quota"), bare_stats[0]))
    print(line("credit debit (SQLite core)", median_round("debit"), bare_stats[0]))
    print("aims: quota >= 0.5x bare; debits >= 5,000/s in one process")


if __name__ == "__main__":
    asyncio.run(main())

"""Benchmarks, each as a ratio to a bare Litestar JSON endpoint measured in the same run.

1. In process: requests go straight through the ASGI interface (no sockets), so the figures
   are the application's own cost. Rounds alternate between the bare endpoint and ours so
   machine noise hits both alike.
2. Served: one uvicorn process serves the real app and a bare route side by side; a client
   in this process keeps 8 connections busy. This is what a caller sees, HTTP included.
3. Core alone: scoring 10,000 points with the embedded model, no HTTP, no storage.
4. Credit debits on SQLite, core alone.

Run: `make bench`. The machines are shared and noisy: compare ratios, not absolute figures.
"""

from __future__ import annotations

import asyncio
import json
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from litestar import Litestar, get

from cleanair_core import CleanAir, Policy, TokenKeys, generate_key
from cleanair_core.credits import CreditLimits, Debit
from cleanair_core.exposure import personal_score
from cleanair_core.geo import Point
from cleanair_http.app import create_app
from cleanair_http.bootstrap import build_sources
from cleanair_http.settings import Settings
from cleanair_sources.embedded_model import EmbeddedModel
from cleanair_sources.gazetteer import Gazetteer
from cleanair_storage.sqlite import SqliteStore

REQUESTS = 3000
SERVED_REQUESTS = 3000
CONNECTIONS = 8
DEBITS = 9000
POINTS = 10_000
ROUNDS = 3
SCORE_BODY = json.dumps({"lat": 60.17, "lon": 24.94}).encode()

Stats = tuple[float, float, float]


@get("/bare")
async def bare() -> dict[str, bool]:
    return {"ok": True}


# -- 1. in process ----------------------------------------------------------------------------


def scope_for(method: str, path: str, token: str | None, body: bytes) -> dict[str, Any]:
    headers = [(b"host", b"bench")]
    if token:
        headers.append((b"authorization", f"Bearer {token}".encode()))
    if body:
        headers += [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
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


async def run_requests(
    app: Any, method: str, path: str, token: str | None, n: int, body: bytes = b""
) -> list[float]:
    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    status: list[int] = []

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            status.append(message["status"])

    timings = []
    for _ in range(n):
        started = time.perf_counter()
        await app(scope_for(method, path, token, body), receive, send)
        timings.append(time.perf_counter() - started)
    if set(status) != {200}:
        raise SystemExit(f"{path}: unexpected statuses {sorted(set(status))}")
    return timings


def summary(timings: list[float]) -> Stats:
    ordered = sorted(timings)
    rps = len(ordered) / sum(ordered)
    return rps, ordered[len(ordered) // 2] * 1e6, ordered[int(len(ordered) * 0.99)] * 1e6


def median_round(rounds: list[Stats]) -> Stats:
    return sorted(rounds)[len(rounds) // 2]


async def in_process() -> dict[str, Stats]:
    with tempfile.TemporaryDirectory() as tmp:
        store = SqliteStore(Path(tmp) / "bench.db")
        keys = TokenKeys(generate_key())
        policy = Policy(requests_per_minute=10**9, credits=CreditLimits(monthly=10**9, daily=10**9))
        core = CleanAir(store, keys, policy, sources=build_sources(Settings(), store, keys))
        core.add_user("bench")
        token = core.redeem_pairing_code(core.create_pairing_code("bench"), "b", "127.0.0.1").token
        ours = create_app(core)
        bare_app = Litestar([bare], openapi_config=None)
        jobs: dict[str, Callable[[], Awaitable[list[float]]]] = {
            "bare": lambda: run_requests(bare_app, "GET", "/bare", None, REQUESTS),
            "quota": lambda: run_requests(ours, "GET", "/v1/quota", token, REQUESTS),
            "score": lambda: run_requests(
                ours, "POST", "/v1/airquality/score", token, REQUESTS, SCORE_BODY
            ),
        }
        runs: dict[str, list[Stats]] = {name: [] for name in jobs}
        for job in jobs.values():  # warm up
            await job()
        for _ in range(ROUNDS):
            for name, job in jobs.items():
                runs[name].append(summary(await job()))
        store.close()
    return {name: median_round(rounds) for name, rounds in runs.items()}


# -- 2. served --------------------------------------------------------------------------------


async def served_round(port: int, request: bytes, n: int) -> list[float]:
    timings: list[float] = []
    per_connection = n // CONNECTIONS

    async def worker() -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        for _ in range(per_connection):
            started = time.perf_counter()
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            if not head.startswith(b"HTTP/1.1 200"):
                raise SystemExit(f"served: {head.splitlines()[0]!r}")
            length = next(
                int(line.split(b":")[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length")
            )
            await reader.readexactly(length)
            timings.append(time.perf_counter() - started)
        writer.close()

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(CONNECTIONS)))
    elapsed = time.perf_counter() - started
    # Throughput is requests over wall time (connections overlap); latency per request.
    ordered = sorted(timings)
    return [
        len(ordered) / elapsed,
        ordered[len(ordered) // 2] * 1e6,
        ordered[-len(ordered) // 100] * 1e6,
    ]


async def wait_until_listening(port: int) -> None:
    for _ in range(100):
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            await asyncio.sleep(0.1)
            continue
        writer.close()
        return
    raise SystemExit("the bench server did not start listening")


async def served() -> dict[str, Stats]:
    server = subprocess.Popen(
        [sys.executable, "-m", "bench.served"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert server.stdout is not None
        ready = server.stdout.readline().split()
        if not ready or ready[0] != "READY":
            raise SystemExit("the bench server did not start")
        port, token = int(ready[1]), ready[2]
        await wait_until_listening(port)
        requests = {
            "bare": b"GET /bare HTTP/1.1\r\nhost: bench\r\n\r\n",
            "quota": (
                f"GET /v1/quota HTTP/1.1\r\nhost: bench\r\nauthorization: Bearer {token}\r\n\r\n"
            ).encode(),
            "score": (
                "POST /v1/airquality/score HTTP/1.1\r\nhost: bench\r\n"
                f"authorization: Bearer {token}\r\ncontent-type: application/json\r\n"
                f"content-length: {len(SCORE_BODY)}\r\n\r\n"
            ).encode()
            + SCORE_BODY,
        }
        runs: dict[str, list[Stats]] = {name: [] for name in requests}
        for request in requests.values():
            await served_round(port, request, SERVED_REQUESTS // 3)
        for _ in range(ROUNDS):
            for name, request in requests.items():
                r = await served_round(port, request, SERVED_REQUESTS)
                runs[name].append((r[0], r[1], r[2]))
        return {name: median_round(rounds) for name, rounds in runs.items()}
    finally:
        server.terminate()
        server.wait(timeout=10)


# -- 3. and 4. core alone ---------------------------------------------------------------------


def core_scoring() -> tuple[float, float, float]:
    started = time.perf_counter()
    model = EmbeddedModel(Gazetteer.load())
    load = time.perf_counter() - started
    rng = random.Random(3)
    at = datetime(2026, 11, 22, 8, tzinfo=UTC)
    points = [Point(rng.uniform(-60, 70), rng.uniform(-180, 180)) for _ in range(POINTS)]
    started = time.perf_counter()
    scores = [personal_score(model.concentrations_at(point, at)) for point in points]
    cold = time.perf_counter() - started
    started = time.perf_counter()
    scores = [personal_score(model.concentrations_at(point, at)) for point in points]
    warm = time.perf_counter() - started
    assert all(score is not None for score in scores)
    return load, cold, warm


def debits() -> Stats:
    with tempfile.TemporaryDirectory() as tmp:
        store = SqliteStore(Path(tmp) / "bench.db")
        limits = CreditLimits(monthly=10**9, daily=10**9)
        at = datetime.now(UTC)
        timings = []
        for i in range(DEBITS):
            debit = Debit(f"user:bench{i % 50}", "conn", "score", 1, at)
            started = time.perf_counter()
            store.debit(debit, limits)
            timings.append(time.perf_counter() - started)
        store.close()
    return summary(timings)


def line(name: str, stats: Stats, base: float | None) -> str:
    rps, p50, p99 = stats
    ratio = f"{rps / base:6.2f}x bare" if base else " baseline  "
    return f"  {name:<34} {rps:>9,.0f}/s  p50 {p50:>8.1f} µs  p99 {p99:>8.1f} µs  {ratio}"


async def main() -> None:
    print(f"cleanair benchmarks ({ROUNDS} alternating rounds, median round shown)")
    local = await in_process()
    print("in process (ASGI, no sockets):")
    print(line("GET /bare (bare Litestar)", local["bare"], None))
    print(line("GET /v1/quota", local["quota"], local["bare"][0]))
    print(line("POST /v1/airquality/score", local["score"], local["bare"][0]))
    remote = await served()
    print(f"served (uvicorn, {CONNECTIONS} keep-alive connections from one client process):")
    print(line("GET /bare (same server)", remote["bare"], None))
    print(line("GET /v1/quota", remote["quota"], remote["bare"][0]))
    print(line("POST /v1/airquality/score", remote["score"], remote["bare"][0]))
    load, cold, warm = core_scoring()
    print("core alone (embedded model + Clean Air Score):")
    print(f"  place data load {load * 1e3:.0f} ms")
    print(
        f"  {POINTS:,} points scattered worldwide: {cold * 1e3:.0f} ms cold caches "
        f"({cold / POINTS * 1e6:.1f} µs/point), {warm * 1e3:.0f} ms warm "
        f"({warm / POINTS * 1e6:.1f} µs/point)"
    )
    print("credit debits (SQLite, core alone):")
    print(line("debit", debits(), None).replace(" baseline  ", ""))
    print("aims: score >= 0.4x bare; quota >= 0.5x bare; debits >= 5,000/s")


if __name__ == "__main__":
    asyncio.run(main())

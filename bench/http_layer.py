"""The served app in process (`make bench`, section 27): a score's CPU and its Python calls by
package, against the bare endpoint, through the app's ASGI callable as `cleanair serve`
builds it (access log and metrics on, SQLite), with no sockets and no server.

    PYTHONPATH=. .venv/bin/python -m bench.http_layer

CPU: rounds alternating the bare endpoint and a score, 8 requests at a time (so charges share
their group commits, as they do served), best and median round, µs a request of the whole
process's CPU (its commit and log threads included). On a loaded machine the best round is
the steadier figure; to compare two checkouts, run this in each, alternating.

Calls: the Python functions one score calls, by package (Litestar's pipeline, our HTTP
layer, the core, the store, the rest), counted with a profiler after warm-up. Counts, not
times: they do not depend on the machine's load, and they show which layer a change to the
request path touched (issue 34; docs/architecture.md).
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import FrameType
from typing import Any

from bench.harness import SCORE_BODY
from bench.served import bench_core, beside_bare
from cleanair_core import generate_key
from cleanair_http.app import create_app, with_access_log
from cleanair_runtime.composition.settings import Settings
from cleanair_runtime.logs import configure_logging, stop_logging

ROUNDS = 10
#: Requests a round, 8 at a time.
REQUESTS = 400
AT_ONCE = 8
#: Packages by where their files are, the first that matches.
PACKAGES = (
    "litestar",
    "cleanair_http",
    "cleanair_core",
    "cleanair_storage",
    "cleanair_sources",
    "logging",
    "asyncio",
)
Request = Callable[[], Awaitable[None]]


def scope(method: str, path: str, headers: list[tuple[bytes, bytes]]) -> dict[str, Any]:
    """An HTTP scope as uvicorn makes one."""
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "server": ("127.0.0.1", 8000),
        "client": ("127.0.0.1", 40000),
        "scheme": "http",
        "method": method,
        "root_path": "",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "headers": headers,
        "state": {},
    }


def requester(
    app: Any, method: str, path: str, headers: list[tuple[bytes, bytes]], body: bytes
) -> Request:
    """One request of the kind, sent to `app` each call; it must answer 200."""

    async def request() -> None:
        sent: list[dict[str, Any]] = []
        received = False

        async def receive() -> dict[str, Any]:
            nonlocal received
            if not received:
                received = True
                return {"type": "http.request", "body": body, "more_body": False}
            await asyncio.Event().wait()  # the client stays: no disconnect
            raise AssertionError

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        await app(scope(method, path, headers), receive, send)
        if sent[0]["status"] != 200:
            raise SystemExit(f"http_layer: {path} answered {sent[0]['status']}")

    return request


async def cpu_a_request(request: Request, n: int) -> float:
    """Process CPU µs a request over `n` requests, `AT_ONCE` at a time."""

    async def one_connection() -> None:
        for _ in range(n // AT_ONCE):
            await request()

    started = time.process_time()
    await asyncio.gather(*(one_connection() for _ in range(AT_ONCE)))
    return (time.process_time() - started) / (n // AT_ONCE * AT_ONCE) * 1e6


def package_of(filename: str) -> str:
    return next((p for p in PACKAGES if f"/{p}/" in filename), "other")


async def calls_of(request: Request) -> Counter[str]:
    """The Python functions one request calls, by package (each call once, however often its
    coroutine resumes)."""
    frames: set[FrameType] = set()

    def profile(frame: FrameType, event: str, _: Any) -> None:
        if event == "call":
            frames.add(frame)

    sys.setprofile(profile)
    try:
        await request()
    finally:
        sys.setprofile(None)
    return Counter(package_of(frame.f_code.co_filename) for frame in frames)


async def measure(tmp: str) -> tuple[dict[str, list[float]], Counter[str], Counter[str]]:
    settings = Settings(plan_workers=0, access_log="info", metrics="on")
    store, _, core = bench_core(str(Path(tmp) / "bench.db"), generate_key())
    core.add_user("bench")
    token = core.redeem_pairing_code(core.create_pairing_code("bench"), "b", "127.0.0.1").token
    app = beside_bare(with_access_log(create_app(core, settings)))
    score_headers = [
        (b"host", b"bench"),
        (b"authorization", f"Bearer {token}".encode()),
        (b"content-type", b"application/json"),
        (b"content-length", str(len(SCORE_BODY)).encode()),
    ]
    requests = {
        "bare": requester(app, "GET", "/bare", [(b"host", b"bench")], b""),
        "score": requester(app, "POST", "/v1/airquality/score", score_headers, SCORE_BODY),
    }
    for request in requests.values():  # warm-up: what is made once is made
        await cpu_a_request(request, REQUESTS // 2)
    cpu: dict[str, list[float]] = {name: [] for name in requests}
    for _ in range(ROUNDS):
        for name, request in requests.items():
            cpu[name].append(await cpu_a_request(request, REQUESTS))
    bare_calls, score_calls = await calls_of(requests["bare"]), await calls_of(requests["score"])
    store.close()
    return cpu, bare_calls, score_calls


async def main() -> dict[str, list[float]]:
    """Print the figures; return each request's CPU µs by round."""
    # The access log's lines go nowhere: they would bury the figures.
    configure_logging("INFO", "info", Path(os.devnull))
    try:
        with tempfile.TemporaryDirectory() as tmp:
            cpu, bare_calls, score_calls = await measure(tmp)
    finally:
        stop_logging()
    one, five, _ = os.getloadavg()
    print(
        f"served app in process ({ROUNDS} rounds of {REQUESTS}, {AT_ONCE} at a time; load "
        f"average {one:.2f}, {five:.2f}):"
    )
    for name, rounds in cpu.items():
        ordered = sorted(rounds)
        print(
            f"  {name:<6} CPU a request: best {ordered[0]:7.1f} µs, median "
            f"{ordered[len(ordered) // 2]:7.1f} µs"
        )
    best = min(cpu["score"]) / min(cpu["bare"])
    print(f"  score against bare, best rounds: {best:.1f}x the CPU")
    print("  Python calls a request by package:")
    for package in (*PACKAGES, "other"):
        print(f"    {package:<17} bare {bare_calls[package]:5d}  score {score_calls[package]:5d}")
    return cpu


if __name__ == "__main__":
    asyncio.run(main())

"""A charged score in process, no HTTP (`make bench`, section 26): what `CleanAir.score` and
its admission cost the server's CPU.

The calls a served score makes below the HTTP adapter, as the bearer middleware and the
controller make them: `admit_awaited` (token, rate limit left pending, scope and plan on one
read), then `CleanAir.score` at the bench's point with the shipped sources (embedded model,
Helsinki's street level, fusion without stations) and its final charge. The stores: the
tests' in-memory one (`memory`: next to no cost and no batching, so the figure is the core's
own), a SQLite file with the shipped `synchronous=FULL` (its group commit included), and
PostgreSQL's request path on the event loop (a throwaway server with fsync and synchronous
commits on, as PostgreSQL ships, started on first use: `postgres.shipped_server`).
`CONCURRENT` tasks score at once, as the served bench's keep-alive connections do.

Figures: this process's CPU time (all its threads: the committer's sync included, not
PostgreSQL's processes) per score, best of `ROUNDS` rounds; and the point's air alone
(`score_at`) to show what the store and the charge add. To compare two checkouts, run this in
each, alternating; the machine is shared, so compare their ratio, not the microseconds.

Alone: `PYTHONPATH=. .venv/bin/python -m bench.score_core [memory] [sqlite] [postgresql]`
(all three unless told; about a minute). `spin memory|sqlite SECONDS` scores on and on, for a
sampling profiler to attach to (docs/architecture.md has the breakdown it gave).
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from bench import postgres
from bench.served import open_store, request_store
from cleanair_core import CleanAir, Policy, TokenKeys, generate_key
from cleanair_core.access.scopes import Scope
from cleanair_core.air.point_score import score_at
from cleanair_core.credits.ledger import CreditLimits
from cleanair_core.geo import Point
from cleanair_core.offload import inline
from cleanair_core.ports import Store
from cleanair_http.offloading import in_thread
from cleanair_runtime.composition.bootstrap import Deployment, build_sources
from cleanair_runtime.composition.settings import Settings
from cleanair_storage.memory import MemoryStore

ROUNDS = 12
#: Scores a round, split over the concurrent tasks.
SCORES = 800
CONCURRENT = 8
#: The served bench's point (bench/harness.py's SCORE_BODY).
POINT = Point(60.17, 24.94)
#: The server key the bench's tokens are hashed with.
KEY = generate_key()


def open_core(database: str) -> tuple[CleanAir, str, Callable[[], None]]:
    """The core as `bench.served` serves it over `database` (`memory`: the tests' in-memory
    store, its calls right here), a caller's token, and its close."""
    store: Store
    if database == "memory":
        store, store_calls, requests = MemoryStore(), inline, None
    else:
        store, store_calls = open_store(database)
        requests = request_store(store)
    sources = build_sources(Settings(), store, TokenKeys(KEY), Deployment())
    setup = CleanAir(store, TokenKeys(KEY), Policy())
    setup.add_user("bench")
    token = setup.redeem_pairing_code(setup.create_pairing_code("bench"), "b", "127.0.0.1")
    policy = Policy(requests_per_minute=10**9, credits=CreditLimits(monthly=10**9, daily=10**9))
    core = CleanAir(
        store,
        TokenKeys(KEY),
        policy,
        sources=sources,
        offload=in_thread,
        store_calls=store_calls,
        requests=requests,
    )

    def close() -> None:
        if requests is not None:
            requests.close()
        store.close()

    return core, token.token, close


def charged_score(core: CleanAir, token: str) -> Callable[[], Awaitable[object]]:
    """One score as a served request makes it: admission, then the use case."""

    async def one() -> object:
        admitted = await core.admit_awaited(token, scope=Scope.AQ_READ, defer_hit=True)
        assert admitted.proof is not None
        return await core.score(admitted.proof, point=POINT, pending=admitted.pending)

    return one


def air_alone(core: CleanAir) -> Callable[[], Awaitable[object]]:
    """The point's air as a score asks for it, no admission and no charge."""
    ctx = core.context
    air = ctx.require_sources().air_quality
    return lambda: score_at(air, POINT, ctx.now())


async def best_cpu_us(call: Callable[[], Awaitable[object]]) -> float:
    """The least CPU time of one call over `ROUNDS` rounds of `SCORES`, µs."""

    async def task(n: int) -> None:
        for _ in range(n):
            await call()

    async def a_round() -> float:
        started = time.process_time()
        await asyncio.gather(*(task(SCORES // CONCURRENT) for _ in range(CONCURRENT)))
        return (time.process_time() - started) / SCORES * 1e6

    await a_round()  # warm the caches
    return min([await a_round() for _ in range(ROUNDS)])


async def figures(databases: list[str]) -> dict[str, float]:
    """µs of CPU a score: the point's air alone, then charged on each database."""
    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in databases:
            url = {"sqlite": str(Path(tmp) / "bench.db"), "memory": "memory"}.get(name) or (
                postgres.shipped_server_url()
            )
            core, token, close = open_core(url)
            try:
                if not out:
                    out["air"] = await best_cpu_us(air_alone(core))
                out[name] = await best_cpu_us(charged_score(core, token))
            finally:
                close()
    return out


async def spin(database: str, seconds: float) -> None:
    """Charged scores for `seconds` after a warm-up, for a sampling profiler to attach to
    once this prints `WARM <pid>` (`py-spy record --pid`)."""
    with tempfile.TemporaryDirectory() as tmp:
        where = str(Path(tmp) / "bench.db") if database == "sqlite" else database
        core, token, close = open_core(where)
        one = charged_score(core, token)

        async def task(until: float) -> None:
            while time.monotonic() < until:
                await one()

        await asyncio.gather(*(task(time.monotonic() + 3) for _ in range(CONCURRENT)))
        print(f"WARM {os.getpid()}", flush=True)
        until = time.monotonic() + seconds
        await asyncio.gather(*(task(until) for _ in range(CONCURRENT)))
        close()


async def main(argv: list[str] | None = None) -> None:
    """Section 26, printed."""
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["spin"]:
        await spin(args[1], float(args[2]))
        return
    databases = args or ["memory", "sqlite", "postgresql"]
    got = await figures(databases)
    print(
        f"a charged score in process, no HTTP (CPU µs a score, best of {ROUNDS} rounds of "
        f"{SCORES}, {CONCURRENT} at once):"
    )
    print(f"  the point's air alone (score_at)          {got['air']:7.1f} µs")
    for name in databases:
        print(f"  admission + CleanAir.score, {name:<12}  {got[name]:7.1f} µs")


if __name__ == "__main__":
    asyncio.run(main())

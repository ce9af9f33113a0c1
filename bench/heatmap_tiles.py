"""Heatmap tiles (issue 33; `make bench`, section 21; alone: `.venv/bin/python -m
bench.heatmap_tiles`).

The shipped Helsinki network is loaded into an in-process app as `cleanair serve` builds it
(embedded model, street level, fusion); tiles are asked through the ASGI app with a token.
Cold: a tile of an hour not drawn before (each request a new hour, so the cache misses and
the air is computed and the PNG encoded). Warm: the same tile again (the cache answers).
A map view: 24 tiles (6 x 4) at zoom 15 over the centre for a new hour, fetched 6 at a
time as a browser does over HTTP/1.1 (the renders run in threads).
Then the score's latency alone and while 64 clients pan the map (zooms 12-16 around the
centre, sliding through 12 hours, four layers; tile after tile each), as section 17 times it
while the explorer's street tiles are fetched. Aims: cold p99 under 100 ms, warm p50 under
2 ms, the view under 1 s, score p99 under 50 ms while the map is panned.
"""

from __future__ import annotations

import asyncio
import random
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.harness import SCORE_BODY, run_requests, scope_for
from cleanair_core import CleanAir, Policy, TokenKeys, generate_key
from cleanair_core.air.tiles.geometry import px_of, py_of
from cleanair_core.credits.ledger import CreditLimits
from cleanair_http.app import create_app
from cleanair_http.offloading import here_or_in_thread, in_thread
from cleanair_runtime.composition.bootstrap import Deployment, build_sources
from cleanair_runtime.composition.settings import Settings
from cleanair_storage.sqlite import SqliteStore

CENTRE = (60.1700, 24.9440)
ZOOMS = (12, 15, 17)
COLD = 40
WARM = 400
VIEW = (6, 4)
#: A browser's connections to one host over HTTP/1.1: a view's tiles are fetched this many
#: at a time.
BROWSER_CONNECTIONS = 6
AIMS_MS = {"cold p99": 100.0, "warm p50": 2.0, "view": 1000.0, "score p99": 50.0}
#: Clients panning the map while scores are timed, the hours they slide through, the layers.
PANNERS = 64
PAN_HOURS = 12
PAN_LAYERS = ("no2", "clean_air_score", "eu_eaqi_2024", "pm25")
SCORES = 1000
PAN_SECONDS = 30


def tile_path(layer: str, z: int, dx: int = 0, dy: int = 0) -> str:
    x = int(px_of(CENTRE[1], z) // 256) + dx
    y = int(py_of(CENTRE[0], z) // 256) + dy
    return f"/ext/v1/airquality/tiles/{layer}/{z}/{x}/{y}.png"


async def get_at(app: Any, path: str, token: str, at: str) -> float:
    """One GET of `path?time=at`, timed (the harness sends no query string)."""
    scope = scope_for("GET", path, token, b"")
    scope["query_string"] = f"time={at}".encode()
    status: list[int] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            status.append(message["status"])

    started = time.perf_counter()
    await app(scope, receive, send)
    elapsed = time.perf_counter() - started
    if status != [200]:
        raise SystemExit(f"{path}: unexpected status {status}")
    return elapsed


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * share))]


async def figures() -> dict[str, float]:
    found: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        store = SqliteStore(Path(tmp) / "bench.db")
        keys = TokenKeys(generate_key())
        policy = Policy(
            requests_per_minute=10**9,
            credits=CreditLimits(monthly=10**9, daily=10**9),
            tiles_per_day=10**9,
        )
        sources = build_sources(Settings(), store, keys, Deployment())
        core = CleanAir(
            store, keys, policy, sources=sources, offload=in_thread, store_calls=here_or_in_thread
        )
        core.add_user("bench")
        token = core.redeem_pairing_code(core.create_pairing_code("bench"), "b", "127.0.0.1").token
        app = create_app(core)
        hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
        await run_requests(app, "GET", tile_path("no2", 12), token, 3)  # warm the model up
        for z in ZOOMS:
            cold = []
            for k in range(COLD):
                at = (hour - timedelta(hours=k + 1)).strftime("%Y-%m-%dT%H:%M:%SZ")
                cold.append(await get_at(app, tile_path("no2", z), token, at))
            warm = await run_requests(app, "GET", tile_path("no2", z), token, WARM)
            found[f"z{z} cold p50"] = percentile(cold, 0.5) * 1e3
            found[f"z{z} cold p99"] = percentile(cold, 0.99) * 1e3
            found[f"z{z} warm p50"] = percentile(warm, 0.5) * 1e3
        at = (hour - timedelta(hours=COLD + 5)).strftime("%Y-%m-%dT%H:%M:%SZ")
        paths = [
            tile_path("clean_air_score", 15, dx, dy)
            for dx in range(-VIEW[0] // 2, VIEW[0] // 2)
            for dy in range(-VIEW[1] // 2, VIEW[1] // 2)
        ]
        connections = asyncio.Semaphore(BROWSER_CONNECTIONS)

        async def fetch(path: str) -> None:
            async with connections:
                await get_at(app, path, token, at)

        started = time.perf_counter()
        await asyncio.gather(*(fetch(path) for path in paths))
        found["view"] = (time.perf_counter() - started) * 1e3
        found |= await panning(app, token, hour)
        store.close()
    return found


async def pan_forever(app: Any, token: str, hour: datetime, seed: int, got: list[float]) -> None:
    """One client panning and zooming around the centre and sliding through the next
    hours: tile after tile, each a random one of the view it would show."""
    rng = random.Random(seed)
    while True:
        z = rng.randint(12, 16)
        at = (hour + timedelta(hours=rng.randint(0, PAN_HOURS - 1))).strftime("%Y-%m-%dT%H:%M:%SZ")
        path = tile_path(rng.choice(PAN_LAYERS), z, rng.randint(-3, 3), rng.randint(-2, 2))
        got.append(await get_at(app, path, token, at))
        await asyncio.sleep(0)


async def panning(app: Any, token: str, hour: datetime) -> dict[str, float]:
    """Score latency alone, then while `PANNERS` clients pan the map (issue 33's aim: p99
    under 50 ms)."""
    alone = await run_requests(app, "POST", "/v1/airquality/score", token, SCORES, SCORE_BODY)
    got: list[float] = []
    panners = [
        asyncio.create_task(pan_forever(app, token, hour, seed, got)) for seed in range(PANNERS)
    ]
    busy: list[float] = []
    started = time.perf_counter()
    try:
        # Bounded: a loaded machine still gets its figures within half a minute.
        while len(busy) < SCORES and time.perf_counter() - started < PAN_SECONDS:
            busy += await run_requests(app, "POST", "/v1/airquality/score", token, 10, SCORE_BODY)
            await asyncio.sleep(0.01)  # a client's think time, as in sections 10 and 17
    finally:
        for task in panners:
            task.cancel()
        await asyncio.gather(*panners, return_exceptions=True)
    return {
        "score alone p99": percentile(alone, 0.99) * 1e3,
        "score panning p50": percentile(busy, 0.5) * 1e3,
        "score panning p99": percentile(busy, 0.99) * 1e3,
        "pan seconds": time.perf_counter() - started,
        "pan tiles": float(len(got)),
        "pan tile p99": percentile(got, 0.99) * 1e3 if got else float("nan"),
    }


def verdict(value: float, aim: float) -> str:
    return "met" if value < aim else "NOT met"


async def main() -> None:
    found = await figures()
    print(
        "heatmap tiles (issue 33): GET /ext/v1/airquality/tiles/no2/{z}/{x}/{y}.png over "
        "the shipped Helsinki network, in process:"
    )
    for z in ZOOMS:
        cold50, cold99, warm = (found[f"z{z} {k}"] for k in ("cold p50", "cold p99", "warm p50"))
        print(
            f"  zoom {z:>2}: cold p50 {cold50:6.1f} ms, p99 {cold99:6.1f} ms "
            f"({verdict(cold99, AIMS_MS['cold p99'])}, aim < 100 ms); warm p50 {warm:5.2f} ms "
            f"({verdict(warm, AIMS_MS['warm p50'])}, aim < 2 ms)"
        )
    print(
        f"  a map view of {VIEW[0] * VIEW[1]} tiles at zoom 15 for a new hour "
        f"({BROWSER_CONNECTIONS} at a time): "
        f"{found['view']:.0f} ms ({verdict(found['view'], AIMS_MS['view'])}, aim < 1 s)"
    )
    print(
        f"  score alone p99 {found['score alone p99']:.1f} ms; while {PANNERS} clients pan the "
        f"map (zooms 12-16, {PAN_HOURS} hours, mixed layers): p50 "
        f"{found['score panning p50']:.1f} ms, p99 {found['score panning p99']:.1f} ms "
        f"({verdict(found['score panning p99'], AIMS_MS['score p99'])}, aim < 50 ms); "
        f"{found['pan tiles']:.0f} tiles in {found['pan seconds']:.1f} s, tile p99 "
        f"{found['pan tile p99']:.0f} ms"
    )


if __name__ == "__main__":
    asyncio.run(main())

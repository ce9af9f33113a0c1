"""Benchmarks, each as a ratio to a bare Litestar JSON endpoint measured in the same run.

1. In process: requests go straight through the ASGI interface (no sockets), so the figures
   are the application's own cost. Rounds alternate between the bare endpoint and ours so
   machine noise hits both alike. Floors (`bench/floors.py`): the same HTTP work with no store
   and no model, and the store calls alone, bound what a score request could reach.
2. Served: one uvicorn process serves the real app and a bare route side by side; a client
   in this process keeps 8 connections busy (`bench/served.py`). This is what a caller sees,
   HTTP included. The served matrix (`bench/served_matrix.py`, runnable alone): SQLite and
   PostgreSQL with 1 and 2 API processes, each against the bare endpoint, PostgreSQL against
   SQLite and 2 processes against 1, with the serving processes' CPU time a request (its
   servers side by side, taking turns; PostgreSQL with fsync and synchronous commits on, as
   it ships: `bench.postgres.shipped_server`); then
   PostgreSQL's 1 and 2 processes driven by each client, the Python one and wrk (far less
   CPU a request; `make bench` installs it), with how the CPU divides between the client, the
   API processes and PostgreSQL (`python -m bench.served_matrix clients`, `bench/wrk.py`);
   with 2 processes, how each round's connections divide between them, and over 40 trials
   how eight connections opened together do (`python -m bench.served_matrix splits`).
3. Core alone: scoring 10,000 points with the embedded model, no HTTP, no storage.
4. Core alone: enriching a 100-waypoint route with the embedded model, against the aim of
   under 5 ms per enrichment; rounds alternate with scoring the same 100 points one by one.
5. Credit debits on SQLite, core alone.
6.-8. Route planning: plans on the Helsinki network (each against its own path searches, wall
   and CPU time; alone: `python -m bench.planning helsinki [TIME]`), on a generated
   105,000-edge city and on a generated million-node grid (first of the hour and later), path
   searches (SciPy vs NetworkX) and the memory of a loaded network; `bench/planning.py`. Then
   Helsinki plans served by `cleanair serve` against the core alone (`bench/served_plans.py`).
9. Route quality against an exact constrained search on the same data, per length budget
   and at three hours (`bench/quality.py`), and the street-level NO2 contrast over a
   lattice of central Helsinki (`bench/street_lattice.py`).
10. Score latency while plans run on a million-node network, served by real processes: the
    default layout against a separate `cleanair worker` (`bench/loaded.py`).
11. Credit debits on PostgreSQL against a bare conditional update (`bench/postgres.py`).
12.-13. Plans per second with 1 and 2 `cleanair worker` processes over one PostgreSQL
   database, and how soon an idle worker in another process claims a submitted plan
   (`bench/workers.py`).
14. Operator CLI start-up: whole `cleanair` processes against `python -c pass` (`bench/cli.py`).
15. Fusion against real stations: the shipped Beijing 2016 stations imported with the CLI,
   each station left out in turn (`bench/fusion.py`).
16. Start-up: `cleanair serve` to its first /livez and first score, installed and with no
   bytecode, and CLI commands from a fresh install, first and second run (`bench/startup.py`).
17. Score latency while 64 clients fetch the explorer's street tiles of the million-node
   network, and a tile's bytes and time (`bench/tiles.py`).
18.-20. Alerts: an hourly round of 100,000 place and 10,000 trip subscriptions on SQLite and
   PostgreSQL with where its time goes, score latency while `cleanair serve` runs it, and
   the delivery lag of 1,000 webhooks to a local receiver (`bench/alerts.py`).
21. Heatmap tiles over the Helsinki network: cold and warm tiles at zooms 12, 15 and 17, a
   map view of 24 tiles for a new hour, and score latency while 64 clients pan the map
   (`bench/heatmap_tiles.py`).
22. Memory of served processes, street networks mapped from shared files (issue 34): RSS,
   PSS and USS of each process of `cleanair serve` and of `serve --workers 2` after 7 plans on
   the generated million-node city (a plan process's by kind of mapping: network file, heap,
   anonymous, libraries), against each process loading its own copy, and what each further
   API and plan process adds; and the same with plan p50 on a generated 5M-node city
   (`bench/shared_networks.py`).
23. Durability: served score with unsynced against synced commits, SQLite synchronous NORMAL
   against FULL (the default) and PostgreSQL synchronous_commit off against on, 1 and 2 API
   processes, alternating rounds (`bench/durability.py`).
24. The event loop per served request: loop passes, callbacks, timers, tasks and `send` calls
   of the bare endpoint and of a score under `cleanair serve`'s protocol, a score on SQLite and
   on PostgreSQL (`bench/served_loop.py`; counts, not times, so the machine's load does not
   blur them).
25. The air at one point in process, as a score asks for it: the embedded model, its street
   level and fusion without stations, best of 60 rounds (`bench/point_air.py`).
26. A charged score in process, no HTTP: admission and `CleanAir.score` as the middleware and
   the controller call them, 8 at once, CPU µs a score on the in-memory store (the core's own
   cost), SQLite and PostgreSQL, against the point's air alone (`bench/score_core.py`).
27. The served app in process, no sockets (`bench/http_layer.py`): a score's CPU against the
   bare endpoint's, best and median of alternating rounds, and the Python calls of each by
   package (Litestar's pipeline, our HTTP layer, the core, the store): counts, so the machine's
   load does not change them.
28. A plan process's memory across an hour's turn on the generated million-node city: the
   next two hours' node air prepared as a plan worker does ten minutes before the hour,
   its traced peak, CPU and node air written, between walks before and after the turn, in a
   process of its own (`bench/node_air_preparation.py`).
29. The score route's own path against Litestar's (`bench/score_route.py`): two bench
   servers as `cleanair serve` serves one API process, one with the route's own path and one
   without, server CPU a score under wrk in alternating rounds, and the Python calls of a
   score each way by package.

Sections 1 and 2 also post a 100-waypoint route to /v1/airquality/routes (100 credits each;
the bench policy's credit limits are 10**9) and compare it with the score endpoint.

Run: `make bench`. The machines are shared and noisy: compare ratios, not absolute figures.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import attrs
from litestar import Litestar, get

from bench import (
    alerts,
    cli,
    durability,
    floors,
    fusion,
    heatmap_tiles,
    http_layer,
    loaded,
    planning,
    point_air,
    postgres,
    quality,
    score_core,
    score_route,
    served_loop,
    served_matrix,
    served_plans,
    shared_networks,
    startup,
    street_lattice,
    tiles,
    workers,
)
from bench.harness import SCORE_BODY, run_requests
from bench.served import (  # the served client's helpers, importable from here as before
    CONNECTIONS,
    ROUTE_WAYPOINTS,
    SERVED_REQUESTS,  # noqa: F401
    Stats,
    cpu_seconds,  # noqa: F401
    median_round,
    post_request,  # noqa: F401
    route_body,
    route_points,
    served,
    served_round,  # noqa: F401
    serving_processes,  # noqa: F401
    wait_until_listening,  # noqa: F401
)
from cleanair_core import CleanAir, Policy, TokenKeys, generate_key
from cleanair_core.air.exposure import personal_score
from cleanair_core.credits.ledger import CreditLimits, Debit
from cleanair_core.geo import Point, distance_m
from cleanair_core.routes.enrichment import enrich_route
from cleanair_http.app import create_app
from cleanair_http.offloading import here_or_in_thread, in_thread
from cleanair_runtime.composition.bootstrap import DEFAULT_NETWORK_FILE, Deployment, build_sources
from cleanair_runtime.composition.settings import Settings
from cleanair_sources.embedded_model import EmbeddedModel
from cleanair_sources.gazetteer import Gazetteer
from cleanair_sources.osm_import import import_network
from cleanair_storage.sqlite import SqliteStore

REQUESTS = 3000
DEBITS = 9000
POINTS = 10_000
ROUNDS = 3
#: Route enrichment: 100 waypoints (the contract's maximum, 100 credits) on a straight line of
#: about 4.9 km across Helsinki. Fewer requests than the score endpoint: each does 100x the work.
ROUTE_REQUESTS = 400
ROUTE_ENRICHMENTS = 300
COLD_ROUTES = 200
ROUTE_AIM_MS = 5.0
ROUTE_NAME = f"POST /v1/airquality/routes, {ROUTE_WAYPOINTS} wp"


@get("/bare")
async def bare() -> dict[str, bool]:
    return {"ok": True}


# -- 1. in process ----------------------------------------------------------------------------


def summary(timings: list[float]) -> Stats:
    ordered = sorted(timings)
    rps = len(ordered) / sum(ordered)
    return rps, ordered[len(ordered) // 2] * 1e6, ordered[int(len(ordered) * 0.99)] * 1e6


async def in_process() -> dict[str, Stats]:
    with tempfile.TemporaryDirectory() as tmp:
        store = SqliteStore(Path(tmp) / "bench.db")
        keys = TokenKeys(generate_key())
        policy = Policy(requests_per_minute=10**9, credits=CreditLimits(monthly=10**9, daily=10**9))
        sources = build_sources(Settings(), store, keys, Deployment())
        core = CleanAir(
            store, keys, policy, sources=sources, offload=in_thread, store_calls=here_or_in_thread
        )
        core.add_user("bench")
        token = core.redeem_pairing_code(core.create_pairing_code("bench"), "b", "127.0.0.1").token
        ours = create_app(core)
        body = route_body()
        bare_app = Litestar([bare], openapi_config=None)
        framework = floors.framework_app()
        jobs: dict[str, Callable[[], Awaitable[list[float]]]] = {
            "bare": lambda: run_requests(bare_app, "GET", "/bare", None, REQUESTS),
            "framework": lambda: run_requests(
                framework, "POST", "/floor", token, REQUESTS, SCORE_BODY
            ),
            "quota": lambda: run_requests(ours, "GET", "/v1/quota", token, REQUESTS),
            "score": lambda: run_requests(
                ours, "POST", "/v1/airquality/score", token, REQUESTS, SCORE_BODY
            ),
            "route": lambda: run_requests(
                ours, "POST", "/v1/airquality/routes", token, ROUTE_REQUESTS, body
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


# -- 3., 4. and 5. core alone --------------------------------------------------------------------


def core_scoring() -> tuple[float, float, float]:
    started = time.perf_counter()
    places = Gazetteer.load()
    len(places)  # the places are read at the first lookup: read them here, timed
    model = EmbeddedModel(places)
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


@attrs.frozen
class RouteFigures:
    """Core-alone route enrichment: seconds for the place data load and the very first call;
    per-call timings at unseen places; median warm rounds of enriching vs scoring the points."""

    load: float
    first: float
    cold: Stats
    warm: Stats
    points_alone: Stats


async def core_routes() -> RouteFigures:
    started = time.perf_counter()
    places = Gazetteer.load()
    len(places)  # the places are read at the first lookup: read them here, timed
    model = EmbeddedModel(places)
    load = time.perf_counter() - started
    points = route_points()
    now = datetime.now(UTC)
    times = [now + timedelta(minutes=i) for i in range(ROUTE_WAYPOINTS)]

    async def enrich(at: list[Point]) -> float:
        started = time.perf_counter()
        route = await enrich_route(model, at, times)
        elapsed = time.perf_counter() - started
        assert route.summary.clean_air_score is not None
        return elapsed

    async def enrichments(n: int) -> list[float]:
        return [await enrich(points) for _ in range(n)]

    async def points_alone(n: int) -> list[float]:
        timings = []
        for _ in range(n):
            started = time.perf_counter()
            for point, at in zip(points, times, strict=True):
                personal_score(model.concentrations_at(point, at))
            timings.append(time.perf_counter() - started)
        return timings

    first = await enrich(points)
    # The same line moved to places not asked before (Europe): the model's caches miss.
    rng = random.Random(5)
    cold = []
    for _ in range(COLD_ROUTES):
        dlat, dlon = rng.uniform(-20, 5), rng.uniform(-30, 20)
        cold.append(await enrich([Point(p.lat + dlat, p.lon + dlon) for p in points]))
    jobs: dict[str, Callable[[int], Awaitable[list[float]]]] = {
        "enrich": enrichments,
        "points": points_alone,
    }
    runs: dict[str, list[Stats]] = {name: [] for name in jobs}
    for job in jobs.values():  # warm up
        await job(ROUTE_ENRICHMENTS // 3)
    for _ in range(ROUNDS):
        for name, job in jobs.items():
            runs[name].append(summary(await job(ROUTE_ENRICHMENTS)))
    return RouteFigures(
        load,
        first,
        summary(cold),
        median_round(runs["enrich"]),
        median_round(runs["points"]),
    )


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


def versus(stats: Stats, base: Stats, base_name: str) -> str:
    """`stats` as multiples of `base`: latencies (higher is slower) and throughput."""
    return (
        f"  {'':<34} vs {base_name}: p50 {stats[1] / base[1]:.1f}x, p99 {stats[2] / base[2]:.1f}x, "
        f"throughput {stats[0] / base[0]:.3f}x"
    )


def ms(name: str, stats: Stats) -> str:
    return f"  {name:<44} p50 {stats[1] / 1e3:6.2f} ms  p99 {stats[2] / 1e3:6.2f} ms"


def verdict(seconds: float) -> str:
    return f"{seconds * 1e3:.2f} ms, {'met' if seconds * 1e3 < ROUTE_AIM_MS else 'NOT met'}"


async def main() -> None:
    print(f"cleanair benchmarks ({ROUNDS} alternating rounds, median round shown)")
    local = await in_process()
    print("in process (ASGI, no sockets):")
    print(line("GET /bare (bare Litestar)", local["bare"], None))
    print(line("GET /v1/quota", local["quota"], local["bare"][0]))
    print(line("POST /v1/airquality/score", local["score"], local["bare"][0]))
    print(line(ROUTE_NAME, local["route"], local["bare"][0]))
    print(versus(local["route"], local["score"], "score"))
    print(line("POST, body + auth middleware, no work", local["framework"], local["bare"][0]))
    store_s = floors.store_floor()
    ceiling = 1 / (1 / local["framework"][0] + store_s) / local["bare"][0]
    print(
        f"  floors (bench/floors.py): a score request's durable SQLite calls alone "
        f"{store_s * 1e6:.0f} µs; with the framework's part, no score endpoint on this stack "
        f"exceeds {ceiling:.2f}x bare in process (aim 0.15x)"
    )
    remote = await served()
    print(f"served (uvicorn, {CONNECTIONS} keep-alive connections from one client process):")
    print(line("GET /bare (same server)", remote["bare"], None))
    print(line("GET /v1/quota", remote["quota"], remote["bare"][0]))
    print(line("POST /v1/airquality/score", remote["score"], remote["bare"][0]))
    print(line(ROUTE_NAME, remote["route"], remote["bare"][0]))
    print(versus(remote["route"], remote["score"], "score"))
    load, cold, warm = core_scoring()
    print("core alone (embedded model + Clean Air Score):")
    print(f"  place data load {load * 1e3:.0f} ms")
    print(
        f"  {POINTS:,} points scattered worldwide: {cold * 1e3:.0f} ms cold caches "
        f"({cold / POINTS * 1e6:.1f} µs/point), {warm * 1e3:.0f} ms warm "
        f"({warm / POINTS * 1e6:.1f} µs/point)"
    )
    route = await core_routes()
    length = sum(distance_m(a, b) for a, b in itertools.pairwise(route_points())) / 1e3
    print(
        f"core alone, route enrichment ({ROUTE_WAYPOINTS} waypoints over {length:.1f} km in "
        "Helsinki, 1 min apart, embedded model):"
    )
    print(
        f"  place data load {route.load * 1e3:.0f} ms; first enrichment {route.first * 1e3:.2f} ms"
    )
    print(ms(f"{COLD_ROUTES} routes at unseen places (cold caches)", route.cold))
    print(ms(f"the same route again (warm, {ROUTE_ENRICHMENTS}/round)", route.warm))
    print(ms(f"scoring its {ROUTE_WAYPOINTS} points one by one (warm)", route.points_alone))
    print(
        f"  {'':<44} enrichment vs points alone: p50 {route.warm[1] / route.points_alone[1]:.2f}x"
    )
    print("credit debits (SQLite, core alone):")
    print(line("debit", debits(), None).replace(" baseline  ", ""))
    print("aims: score >= 0.4x bare; quota >= 0.5x bare; debits >= 5,000/s")
    print(
        f"aim: a {ROUTE_WAYPOINTS}-waypoint route enrichment (core alone) under "
        f"{ROUTE_AIM_MS:g} ms: warm p99 {verdict(route.warm[2] / 1e6)}; "
        f"cold-cache p99 {verdict(route.cold[2] / 1e6)}; first call {verdict(route.first)}"
    )
    await planning.main()
    await served_plans.main()
    await quality.main(import_network(DEFAULT_NETWORK_FILE, "helsinki"))
    street_lattice.main()
    loaded.main()
    shared_networks.main([])
    shared_networks.main(["--nodes", "5000000"])
    postgres.main()
    workers.main()
    await served_matrix.main()
    await served_matrix.clients()
    await served_matrix.splits()
    cli.main()
    await fusion.main()
    startup.main()
    await tiles.main()
    await alerts.main()
    await heatmap_tiles.main()
    await durability.main()
    served_loop.main()
    await point_air.main()
    await score_core.main([])
    await http_layer.main()
    # A process of its own: its peak RSS is the preparation's, not the sections' before it.
    subprocess.run([sys.executable, "-m", "bench.node_air_preparation"], check=True)
    await score_route.main()


if __name__ == "__main__":
    asyncio.run(main())

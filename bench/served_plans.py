"""Helsinki plans served (`make bench`, after section 6): what a caller waits for a plan.

`cleanair serve` with the shipped defaults (its plan process, the embedded model at street
level, the access log and metrics on) serves the shipped Helsinki network from a SQLite
database; a client submits section 6's Helsinki walks one at a time (`POST /v1/routes`),
watches the database (every 2 ms) until the plan's result is stored, and reads it with one
poll (`GET /v1/routes/{id}`: polls are limited to one a second). The same walks are then
planned in this process by the core alone (`plan_routes`, warm), so the served view's cost
over the core's, submission, the hand-over to the plan process, storing the result and
polling it, is a ratio within one run.

Run alone: `PYTHONPATH=. .venv/bin/python -m bench.served_plans` (about a minute).
"""

from __future__ import annotations

import asyncio
import signal
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx

from bench.loaded import CLI, finished, free_port, prepared, start, wait_until
from bench.planning import HELSINKI_MAX_M, HELSINKI_MIN_M, WALK, percentiles, walk_pairs
from cleanair_core.air.street_level import street_level_air
from cleanair_core.errors import PlanRejected
from cleanair_core.routes.network_air import NetworkAir
from cleanair_core.routes.planner import plan_routes
from cleanair_core.routes.plans import PlanRequest
from cleanair_runtime.composition.bootstrap import DEFAULT_NETWORK_FILE
from cleanair_sources.embedded_model import EmbeddedModel
from cleanair_sources.gazetteer import Gazetteer
from cleanair_sources.osm_import import import_network
from cleanair_sources.street_increments import NetworkIncrements
from cleanair_sources.street_router import LoadedNetworks

PLANS = 20
POLL_S = 0.002
DEADLINE_S = 300.0


def served(walks: list[tuple[dict[str, float], dict[str, float]]]) -> list[float]:
    """Seconds from each walk's submission to its poll answering `completed`."""
    with tempfile.TemporaryDirectory() as folder:
        network = import_network(DEFAULT_NETWORK_FILE, "helsinki")
        env, token = prepared(Path(folder), network)
        port = free_port()
        process = start(env, [str(CLI), "serve", "--port", str(port)], Path(folder) / "log")
        headers = {"Authorization": f"Bearer {token}"}
        seconds: list[float] = []
        try:
            with httpx.Client(
                base_url=f"http://127.0.0.1:{port}", headers=headers, timeout=60
            ) as client:

                def listening() -> bool:
                    try:
                        return client.get("/livez").status_code == 200
                    except httpx.TransportError:
                        return False

                wait_until(listening, "answer", [process])
                database = env["CLEANAIR_DATABASE"]
                for index, (begin, end) in enumerate([walks[0], *walks]):
                    body = {"start": begin, "end": end, "activity_type": "walking"}
                    started = time.perf_counter()
                    submitted = client.post("/v1/routes", json=body)
                    assert submitted.status_code == 202, submitted.text
                    # Polls are limited to one a second (contract section 8): the database
                    # tells when the result is stored, then one poll reads it.
                    deadline = started + DEADLINE_S
                    while finished(database) <= index:
                        assert time.perf_counter() < deadline, "a plan took too long"
                        time.sleep(POLL_S)
                    status = polled(client, f"/v1/routes/{submitted.json()['request_id']}")
                    if index and status == "completed":  # the first warms the plan process
                        seconds.append(time.perf_counter() - started)
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=DEADLINE_S)
    return seconds


def polled(client: httpx.Client, path: str) -> str:
    answer = client.get(path)
    assert answer.status_code == 200, answer.text
    status: str = answer.json()["status"]
    return status


async def core(walks: list[tuple[dict[str, float], dict[str, float]]], at: datetime) -> list[float]:
    """Seconds of `plan_routes` for each walk in this process (warm, as a plan process is)."""
    from cleanair_core.geo import Point

    network = import_network(DEFAULT_NETWORK_FILE, "helsinki")
    model = EmbeddedModel(Gazetteer.load())
    air = street_level_air(model, model, NetworkIncrements([network]))
    networks, kept = LoadedNetworks([network]), NetworkAir()
    seconds: list[float] = []
    for index, (begin, end) in enumerate([walks[0], *walks]):
        request = PlanRequest(
            Point(begin["latitude"], begin["longitude"]),
            Point(end["latitude"], end["longitude"]),
            WALK,
            at,
        )
        started = time.perf_counter()
        try:
            await plan_routes(request, networks, air, network_air=kept)
        except PlanRejected:
            continue
        if index:
            seconds.append(time.perf_counter() - started)
    return seconds


async def main() -> None:
    network = import_network(DEFAULT_NETWORK_FILE, "helsinki")
    walks = [
        (
            {"latitude": a.lat, "longitude": a.lon},
            {"latitude": b.lat, "longitude": b.lon},
        )
        for a, b in walk_pairs(network, PLANS, 6, HELSINKI_MIN_M, HELSINKI_MAX_M)
    ]
    at = datetime.now(UTC)
    by_serve = percentiles(served(walks))
    alone = percentiles(await core(walks, at))
    print(
        f"route plans served, central Helsinki ({PLANS} of section 6's walks, one at a time, "
        "`cleanair serve` with shipped defaults; the result stored, then one poll):"
    )
    print(
        f"  submit to the result read  p50 {by_serve[0] * 1e3:7.1f} ms  p99 "
        f"{by_serve[1] * 1e3:7.1f} ms"
    )
    print(
        f"  plan_routes alone (core)   p50 {alone[0] * 1e3:7.1f} ms  p99 {alone[1] * 1e3:7.1f} ms"
    )
    print(f"  {'':<26} served / core p50: {by_serve[0] / alone[0]:.1f}x")


if __name__ == "__main__":
    asyncio.run(main())

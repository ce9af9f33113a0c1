"""The score route's own path against Litestar's (`make bench`, section 29): a served score's
server CPU each way, in one run, and the Python calls of each.

    PYTHONPATH=. .venv/bin/python -m bench.score_route [ROUNDS]

Two bench servers are started as `cleanair serve` serves one API process (access log and
metrics on, its HTTP protocol and deadlines, SQLite with the shipped synced commits), each
over a database of its own. They differ in one thing: one has the score route's own path
(`cleanair_http.score_route`), the other has it turned off, so Litestar serves every score.
wrk keeps 8 connections busy on one server at a time, the two alternating round by round
(ROUNDS each, 5 by default, 5 s a round), so the machine's load falls on both alike. A
server's CPU a score is its process's user and system time over the requests answered
(/proc); the median round is reported, and their ratio. Without wrk, this process's asyncio
client sends the requests instead (more of the machine's CPU goes to the client).

Then, in process, the Python calls one score makes each way, by package (as section 27
counts them): counts, which the machine's load does not change.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import uvicorn

from bench.harness import SCORE_BODY
from bench.http_layer import PACKAGES, calls_of, requester
from bench.served import bench_core, post_request, served_round, wait_until_listening
from bench.wrk import cpu_of, lua_script, wrk_available, wrk_round
from cleanair_core import generate_key
from cleanair_core.ports import Store
from cleanair_http.app import create_app, with_access_log
from cleanair_http.score_route import SCORE_PATH, LeanScoreApp
from cleanair_runtime.composition.settings import Settings
from cleanair_runtime.logs import configure_logging, stop_logging
from cleanair_runtime.processes.connection_deadlines import with_deadlines

ROUNDS = 5
SECONDS = 5
CONNECTIONS = 8
#: Requests a round with the Python client (no wrk).
PYTHON_REQUESTS = 2000
WAYS = ("own path", "Litestar's")
SETTINGS = Settings(plan_workers=0, access_log="info", metrics="on")


def app_of(database: str, own_path: bool) -> tuple[LeanScoreApp, str, Store]:
    """The served app over `database`, with or without the score route's own path, a
    paired token, and the store to close."""
    store, _, core = bench_core(database, generate_key())
    core.add_user("bench")
    token = core.redeem_pairing_code(core.create_pairing_code("bench"), "b", "127.0.0.1").token
    app = create_app(core, SETTINGS)
    assert isinstance(app, LeanScoreApp)
    assert app.score_route is not None, "the shipped app has the score route's own path"
    if not own_path:
        app.score_route = None
    return app, token, store


def serve(own_path: bool) -> None:
    """A bench server (see the module): prints `READY <port> <token>` once listening."""
    configure_logging(SETTINGS.log_level, SETTINGS.access_log, Path(os.devnull))
    with tempfile.TemporaryDirectory() as tmp:
        app, token, store = app_of(str(Path(tmp) / "bench.db"), own_path)
        config = uvicorn.Config(
            with_access_log(app),
            host="127.0.0.1",
            port=0,
            log_config=None,
            access_log=False,
            server_header=False,
            http=with_deadlines(
                SETTINGS.header_timeout, SETTINGS.body_timeout, SETTINGS.send_timeout
            ),
        )
        server = uvicorn.Server(config)

        async def announce() -> None:
            while not server.started:
                await asyncio.sleep(0.05)
            port = server.servers[0].sockets[0].getsockname()[1]
            print(f"READY {port} {token}", flush=True)

        async def run() -> None:
            await asyncio.gather(server.serve(), announce())

        try:
            asyncio.run(run())
        finally:
            store.close()
            stop_logging()


async def cpu_a_score(pid: int, port: int, token: str) -> tuple[float, float]:
    """One round against a server: its CPU µs a score, and scores a second."""
    before = cpu_of([pid])
    if wrk_available():
        script = lua_script(
            "POST",
            {"authorization": f"Bearer {token}", "content-type": "application/json"},
            SCORE_BODY,
        )
        stats, answered, _ = wrk_round(
            f"http://127.0.0.1:{port}{SCORE_PATH}", script, CONNECTIONS, SECONDS
        )
        rate = stats[0]
    else:
        request = post_request(SCORE_PATH, token, SCORE_BODY)
        rate = (await served_round(port, request, PYTHON_REQUESTS))[0]
        answered = PYTHON_REQUESTS // CONNECTIONS * CONNECTIONS
    return (cpu_of([pid]) - before) / answered * 1e6, rate


async def served_figures(rounds: int) -> dict[str, list[tuple[float, float]]]:
    """Each way's rounds: (CPU µs a score, scores a second)."""
    servers = {
        way: subprocess.Popen(
            [sys.executable, "-m", "bench.score_route", "serve", "on" if way == WAYS[0] else "off"],
            stdout=subprocess.PIPE,
            text=True,
        )
        for way in WAYS
    }
    try:
        ready: dict[str, tuple[int, str]] = {}
        for way, server in servers.items():
            assert server.stdout is not None
            line = server.stdout.readline().split()
            if not line or line[0] != "READY":
                raise SystemExit("score_route: a bench server did not start")
            ready[way] = int(line[1]), line[2]
            await wait_until_listening(ready[way][0])
        figures: dict[str, list[tuple[float, float]]] = {way: [] for way in WAYS}
        for way in WAYS:  # warm-up: what is made once is made
            await cpu_a_score(servers[way].pid, *ready[way])
        for index in range(rounds):
            # Alternate which goes first, so a drift in the machine's load falls on both.
            for way in WAYS if index % 2 == 0 else WAYS[::-1]:
                figures[way].append(await cpu_a_score(servers[way].pid, *ready[way]))
        return figures
    finally:
        for server in servers.values():
            server.terminate()
            server.wait()


async def calls_each_way() -> dict[str, dict[str, int]]:
    """The Python calls of one score each way, by package."""
    configure_logging("INFO", "info", Path(os.devnull))
    try:
        with tempfile.TemporaryDirectory() as tmp:
            counts = {}
            for way in WAYS:
                app, token, store = app_of(str(Path(tmp) / f"{way[:3]}.db"), way == WAYS[0])
                headers = [
                    (b"host", b"bench"),
                    (b"authorization", f"Bearer {token}".encode()),
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(SCORE_BODY)).encode()),
                ]
                score = requester(with_access_log(app), "POST", SCORE_PATH, headers, SCORE_BODY)
                for _ in range(20):
                    await score()
                counts[way] = dict(await calls_of(score))
                store.close()
            return counts
    finally:
        stop_logging()


async def main(rounds: int = ROUNDS) -> dict[str, list[tuple[float, float]]]:
    """Print the figures; return each way's rounds."""
    figures = await served_figures(rounds)
    one, five, _ = os.getloadavg()
    client = "wrk" if wrk_available() else "the Python client"
    print(
        f"score route, served ({rounds} alternating rounds, {CONNECTIONS} connections, "
        f"{client}; load average {one:.2f}, {five:.2f}):"
    )
    medians = {}
    for way, rounds_of in figures.items():
        cpu = sorted(figure[0] for figure in rounds_of)
        rate = sorted(figure[1] for figure in rounds_of)
        medians[way] = cpu[len(cpu) // 2]
        each = ", ".join(f"{figure[0]:.0f}" for figure in rounds_of)
        print(
            f"  {way:<11} server CPU a score: median {medians[way]:6.0f} µs (rounds: {each}); "
            f"median {rate[len(rate) // 2]:6.0f}/s"
        )
    print(f"  own path against Litestar's, median CPU: {medians[WAYS[0]] / medians[WAYS[1]]:.2f}x")
    counts = await calls_each_way()
    print("  Python calls a score by package:")
    for package in (*PACKAGES, "other"):
        print(
            f"    {package:<17} own path {counts[WAYS[0]].get(package, 0):5d}  "
            f"Litestar's {counts[WAYS[1]].get(package, 0):5d}"
        )
    return figures


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "serve":
        serve(sys.argv[2] == "on")
    else:
        asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else ROUNDS))

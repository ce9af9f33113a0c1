"""A benchmark server: the real app plus a bare JSON route, over a throw-away database;
and the client that measures it (`served`), which the served sections share
(`bench/__main__.py`'s section 2, `bench/served_matrix.py`).

The server is started in a subprocess:

    python -m bench.served [sqlite | postgresql://...] [processes] [access log] [metrics]

As `cleanair serve` ships: the access log (`info`, or `off`) as JSON lines on stderr and
metrics (`on`, or `off`), both on unless told. It prints `READY <port> <token>` on stdout
once listening. Every serving process has both apps on one event loop and one HTTP stack:
`/bare` goes to a bare Litestar app, everything else to ours as served (access log and
metrics middleware included), so their ratio measures our endpoint's whole cost under real
HTTP. With several processes each serves a listening socket of its own on one port (Linux's
SO_REUSEPORT, as `cleanair serve --workers` binds them; elsewhere one they share) and they
share one database: a SQLite file, or the PostgreSQL database given.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from pathlib import Path

import uvicorn
from litestar import Litestar, get
from litestar.enums import ScopeType
from litestar.types import ASGIApp, Receive, Scope, Send

from bench.harness import SCORE_BODY
from bench.wrk import Shares, connections_by_process, cpu_of, lua_script, wrk_round
from cleanair_core import CleanAir, Policy, TokenKeys, generate_key
from cleanair_core.credits.ledger import CreditLimits
from cleanair_core.geo import Point
from cleanair_core.offload import Offload
from cleanair_core.ports import Store
from cleanair_http.app import create_app, with_access_log
from cleanair_http.offloading import here_or_in_thread, in_thread
from cleanair_runtime.composition.bootstrap import Deployment, build_sources
from cleanair_runtime.composition.settings import Settings
from cleanair_runtime.logs import configure_logging, stop_logging
from cleanair_runtime.processes.connection_deadlines import with_deadlines
from cleanair_runtime.processes.shared_listening import served_listening, slot_sockets
from cleanair_storage.postgres import PostgresStore
from cleanair_storage.postgres.requests import PostgresRequests
from cleanair_storage.sqlite import SqliteStore

SERVED_REQUESTS = 3000
SERVED_ROUTE_REQUESTS = 400
#: Keep-alive connections the client keeps busy.
CONNECTIONS = 8
#: Alternating rounds of each request; the median round is reported.
SERVED_ROUNDS = 3
#: Route enrichment: 100 waypoints (the contract's maximum, 100 credits) on a straight line of
#: about 4.9 km across Helsinki.
ROUTE_WAYPOINTS = 100
ROUTE_START = Point(60.1699, 24.9384)
ROUTE_END = Point(60.2055, 24.9900)
#: Requests a second, p50 µs, p99 µs.
Stats = tuple[float, float, float]


@get("/bare")
async def bare() -> dict[str, bool]:
    return {"ok": True}


def beside_bare(app: ASGIApp) -> ASGIApp:
    """`app`, with `/bare` answered by a bare Litestar app instead."""
    # No logging config: Litestar's default would replace the JSON lines the app is served with.
    bare_app = Litestar([bare], openapi_config=None, logging_config=None)

    async def dispatch(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == ScopeType.HTTP and scope["path"] == "/bare":
            await bare_app(scope, receive, send)
        else:
            await app(scope, receive, send)

    return dispatch


def open_store(database: str) -> tuple[Store, Offload]:
    """The store and its one-step-call offload, as the composition root chooses them."""
    if database.startswith("postgresql://"):
        return PostgresStore(database), in_thread
    return SqliteStore(database), here_or_in_thread


def request_store(store: Store) -> PostgresRequests | None:
    """The request path's store calls, as the composition root chooses them: PostgreSQL's on
    the event loop; None (the sync ports on the store-call offload) for any other store."""
    return PostgresRequests(store, in_thread) if isinstance(store, PostgresStore) else None


def bench_core(database: str, key: bytes) -> tuple[Store, PostgresRequests | None, CleanAir]:
    """The served benches' core on `database` (a SQLite path or a PostgreSQL URL): the shipped
    sources, limits no bench reaches, the store calls and request path `cleanair serve` makes;
    with its store and request store, which the caller closes."""
    store, store_calls = open_store(database)
    requests = request_store(store)
    keys = TokenKeys(key)
    policy = Policy(requests_per_minute=10**9, credits=CreditLimits(monthly=10**9, daily=10**9))
    core = CleanAir(
        store,
        keys,
        policy,
        sources=build_sources(Settings(), store, keys, Deployment()),
        offload=in_thread,
        store_calls=store_calls,
        requests=requests,
    )
    return store, requests, core


def serve(
    database: str, key: bytes, sock: socket.socket, settings: Settings, *, shared_with_others: bool
) -> None:
    """One serving process on `sock`; `shared_with_others`: other processes serve it too, and
    each accepts as `cleanair serve --workers N`'s API processes do."""
    store, requests, core = bench_core(database, key)
    app = create_app(core, settings)
    served_sock, backlog = served_listening(sock, shared_with_others=shared_with_others)
    config = uvicorn.Config(
        beside_bare(with_access_log(app)),
        log_config=None,
        access_log=False,
        server_header=False,
        # The HTTP protocol `cleanair serve` runs, with its deadlines.
        http=with_deadlines(settings.header_timeout, settings.body_timeout, settings.send_timeout),
        backlog=backlog,
    )
    uvicorn.Server(config).run(sockets=[served_sock])  # as `cleanair serve --workers` does
    if requests is not None:
        requests.close()
    store.close()


def main() -> None:
    database_arg = sys.argv[1] if len(sys.argv) > 1 else "sqlite"
    processes = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    access_log = sys.argv[3] if len(sys.argv) > 3 else "info"
    metrics = sys.argv[4] if len(sys.argv) > 4 else "on"
    settings = Settings(plan_workers=0, access_log=access_log, metrics=metrics)
    configure_logging(settings.log_level, settings.access_log)
    with tempfile.TemporaryDirectory() as tmp:
        database = str(Path(tmp) / "bench.db") if database_arg == "sqlite" else database_arg
        key = generate_key()
        store, _ = open_store(database)
        keys = TokenKeys(key)
        core = CleanAir(store, keys, Policy())
        core.add_user("bench")
        token = core.redeem_pairing_code(core.create_pairing_code("bench"), "b", "127.0.0.1")
        store.close()
        # One socket, or one per process (SO_REUSEPORT), as `cleanair serve --workers` binds.
        listening = slot_sockets("127.0.0.1", 0, processes)
        port = listening.port
        children = []
        for index in range(processes):
            pid = os.fork()
            if pid == 0:
                try:
                    listening.close_others(index)
                    sock, shared = listening.of_slot(index), not listening.per_slot
                    serve(database, key, sock, settings, shared_with_others=shared)
                finally:
                    stop_logging()
                    os._exit(0)
            children.append(pid)
        print(f"READY {port} {token.token}", flush=True)

        def stop(signum: int, _: object) -> None:
            for child in children:
                os.kill(child, signal.SIGINT)

        signal.signal(signal.SIGTERM, stop)
        for child in children:
            os.waitpid(child, 0)


# -- the client --------------------------------------------------------------------------------


def route_points() -> list[Point]:
    start, end, steps = ROUTE_START, ROUTE_END, ROUTE_WAYPOINTS - 1
    return [
        Point(
            start.lat + (end.lat - start.lat) * i / steps,
            start.lon + (end.lon - start.lon) * i / steps,
        )
        for i in range(ROUTE_WAYPOINTS)
    ]


def route_body() -> bytes:
    """The request body: bare waypoints leaving now; the server estimates each one's time."""
    waypoints = [{"lat": point.lat, "lon": point.lon} for point in route_points()]
    return json.dumps(
        {"waypoints": waypoints, "start_time": datetime.now(UTC).isoformat()}
    ).encode()


def median_round(rounds: list[Stats]) -> Stats:
    return sorted(rounds)[len(rounds) // 2]


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


def serving_processes(pid: int) -> list[int]:
    """The bench server's serving processes: the children of `pid` (Linux's /proc)."""
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return [int(child) for child in children]


def cpu_seconds(pids: list[int]) -> float:
    """User and system CPU seconds `pids` have used so far."""
    ticks = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks += int(fields[11]) + int(fields[12])  # utime, stime (proc(5))
    return ticks / os.sysconf("SC_CLK_TCK")


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


def post_request(path: str, token: str, body: bytes) -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nhost: bench\r\n"
        f"authorization: Bearer {token}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\n\r\n"
    ).encode() + body


class BenchServer:
    """A running bench server (`python -m bench.served ...`): its port, token and serving
    processes, and each request's figures over the rounds measured on it so far."""

    def __init__(
        self,
        process: subprocess.Popen[str],
        port: int,
        token: str,
        *,
        client: str = "python",
        database_processes: Callable[[], list[int]] | None = None,
    ) -> None:
        self.process = process
        self.port = port
        self.client = client
        self.database_processes = database_processes
        self.serving = serving_processes(process.pid)
        self.processes = len(self.serving)
        auth = {"authorization": f"Bearer {token}"}
        post = {**auth, "content-type": "application/json"}
        # Each request: its bytes, how many to send per round, and wrk's path and script.
        self.requests = {
            "bare": (
                b"GET /bare HTTP/1.1\r\nhost: bench\r\n\r\n",
                SERVED_REQUESTS,
                "/bare",
                lua_script("GET", {}, b""),
            ),
            "quota": (
                (
                    f"GET /v1/quota HTTP/1.1\r\nhost: bench\r\n"
                    f"authorization: Bearer {token}\r\n\r\n"
                ).encode(),
                SERVED_REQUESTS,
                "/v1/quota",
                lua_script("GET", auth, b""),
            ),
            "score": (
                post_request("/v1/airquality/score", token, SCORE_BODY),
                SERVED_REQUESTS,
                "/v1/airquality/score",
                lua_script("POST", post, SCORE_BODY),
            ),
            "route": (
                post_request("/v1/airquality/routes", token, route_body()),
                SERVED_ROUTE_REQUESTS,
                "/v1/airquality/routes",
                lua_script("POST", post, route_body()),
            ),
        }
        #: Each request's rounds: requests a second, p50 and p99 µs.
        self.rounds: dict[str, list[Stats]] = collections.defaultdict(list)
        #: Each request's serving processes' CPU µs a request, by round.
        self.spent: dict[str, list[float]] = collections.defaultdict(list)
        #: Each request's CPU seconds by who spent them over its rounds, and their wall time.
        self.shares: dict[str, Shares] = collections.defaultdict(
            lambda: dict.fromkeys(("client", "api", "database", "wall"), 0.0)
        )
        #: Each request's rounds' keep-alive connections by serving process, when sampled.
        self.splits: dict[str, list[list[int]]] = collections.defaultdict(list)

    async def warm_up(self, names: tuple[str, ...]) -> None:
        """A short round of each of `names`, not recorded."""
        for name in names:
            request, n, path, script = self.requests[name]
            if self.client == "wrk":
                url = f"http://127.0.0.1:{self.port}{path}"
                await asyncio.to_thread(wrk_round, url, script, CONNECTIONS, 1)
            else:
                await served_round(self.port, request, n // 3)

    async def measure(self, name: str, *, split: bool = False) -> None:
        """One round of `name`, recorded; `split`: sample its connections by process."""
        request, n, path, script = self.requests[name]
        before = cpu_seconds(self.serving)
        pg = self.database_processes() if self.database_processes is not None else []
        pg_before, wall = cpu_of(pg), time.perf_counter()
        sampler = None
        if split:
            sampler = asyncio.create_task(self._split_once_open(self.splits[name]))
        if self.client == "wrk":
            url = f"http://127.0.0.1:{self.port}{path}"
            r, done, client_cpu = await asyncio.to_thread(wrk_round, url, script, CONNECTIONS)
        else:
            started = time.process_time()
            r, done = await served_round(self.port, request, n), n
            client_cpu = time.process_time() - started
        wall = time.perf_counter() - wall
        if sampler is not None and not sampler.done():
            sampler.cancel()  # never all open at once: no split for this round
        api = cpu_seconds(self.serving) - before
        self.spent[name].append(api / done * 1e6)
        self.rounds[name].append((r[0], r[1], r[2]))
        by = self.shares[name]
        by["client"] += client_cpu
        by["api"] += api
        by["database"] += cpu_of(pg) - pg_before
        by["wall"] += wall

    async def _split_once_open(self, into: list[list[int]]) -> None:
        # Sampled while the round runs, once all its connections are served.
        while sum(split := connections_by_process(self.port, self.serving)) < CONNECTIONS:
            await asyncio.sleep(0.02)
        into.append(split)

    def median(self, name: str) -> Stats:
        """`name`'s median round."""
        return median_round(self.rounds[name])

    def cpu(self, name: str) -> float:
        """`name`'s median round's serving CPU µs a request."""
        spent = sorted(self.spent[name])
        return spent[len(spent) // 2]


@contextlib.asynccontextmanager
async def bench_server(
    database: str = "sqlite",
    processes: int = 1,
    *,
    access_log: str = "info",
    metrics: str = "on",
    client: str = "python",
    database_processes: Callable[[], list[int]] | None = None,
) -> AsyncIterator[BenchServer]:
    """A bench server (see the module) on `database` with `processes` serving processes,
    listening; stopped at the end. `client`: how its rounds are sent, this process's asyncio
    client (`python`) or `wrk` (`bench/wrk.py`); `database_processes` names the database's
    processes, whose CPU its shares count."""
    # The access log goes to a file, as a service manager's journal takes it: not the terminal.
    log_file = tempfile.TemporaryFile()  # noqa: SIM115 (closed once the server has ended)
    server = subprocess.Popen(
        [sys.executable, "-m", "bench.served", database, str(processes), access_log, metrics],
        stdout=subprocess.PIPE,
        stderr=log_file,
        text=True,
    )
    try:
        assert server.stdout is not None
        ready = server.stdout.readline().split()
        if not ready or ready[0] != "READY":
            raise SystemExit("the bench server did not start")
        port, token = int(ready[1]), ready[2]
        await wait_until_listening(port)
        yield BenchServer(server, port, token, client=client, database_processes=database_processes)
    finally:
        server.terminate()
        server.wait(timeout=10)
        log_file.close()


async def served(
    database: str = "sqlite",
    processes: int = 1,
    only: tuple[str, ...] | None = None,
    *,
    access_log: str = "info",
    metrics: str = "on",
    cpu: dict[str, float] | None = None,
    client: str = "python",
    shares: dict[str, Shares] | None = None,
    database_processes: Callable[[], list[int]] | None = None,
    splits: dict[str, list[list[int]]] | None = None,
) -> dict[str, Stats]:
    """Each request's figures against one bench server (see `bench/served.py`), with the
    shipped access log and metrics unless told; `only` limits the requests measured. `cpu`,
    when given, gets each request's server CPU time (µs a request, median round): the
    serving processes' user and system time, which the client on the same machine does not
    blur as it does throughput. `client`: this process's asyncio client (`python`) or `wrk`
    (`bench/wrk.py`). `shares`, when given, gets each request's CPU seconds over its rounds
    by who spent them (`client`, `api`, and `database`: the processes `database_processes`
    names) and the rounds' wall seconds. `splits`, when given, gets each request's rounds'
    keep-alive connections by serving process (`wrk.connections_by_process`)."""
    async with bench_server(
        database,
        processes,
        access_log=access_log,
        metrics=metrics,
        client=client,
        database_processes=database_processes,
    ) as server:
        names = tuple(name for name in server.requests if only is None or name in only)
        await server.warm_up(names)
        for _ in range(SERVED_ROUNDS):
            for name in names:
                await server.measure(name, split=splits is not None)
        if cpu is not None:
            cpu.update({name: server.cpu(name) for name in names})
        if shares is not None:
            shares.update({name: server.shares[name] for name in names})
        if splits is not None:
            splits.update({name: server.splits[name] for name in names})
        return {name: server.median(name) for name in names}


if __name__ == "__main__":
    main()

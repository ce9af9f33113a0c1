"""A benchmark server: the real app plus a bare JSON route, over a throw-away database.

Started by `bench/__main__.py` in a subprocess:

    python -m bench.served [sqlite | postgresql://...] [processes] [access log] [metrics]

As `cleanair serve` ships: the access log (`info`, or `off`) as JSON lines on stderr and
metrics (`on`, or `off`), both on unless told. It prints `READY <port> <token>` on stdout
once listening. Every serving process has both apps on one event loop and one HTTP stack:
`/bare` goes to a bare Litestar app, everything else to ours as served (access log and
metrics middleware included), so their ratio measures our endpoint's whole cost under real
HTTP. With several processes they share one listening socket (as `cleanair serve --workers`
does) and one database: a SQLite file, or the PostgreSQL database given.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import tempfile
from pathlib import Path

import uvicorn
from litestar import Litestar, get
from litestar.enums import ScopeType
from litestar.types import ASGIApp, Receive, Scope, Send

from cleanair_core import CleanAir, Policy, TokenKeys, generate_key
from cleanair_core.credits.ledger import CreditLimits
from cleanair_core.offload import Offload
from cleanair_core.ports import Store
from cleanair_http.app import create_app, with_access_log
from cleanair_http.offloading import here_or_in_thread, in_thread
from cleanair_runtime.composition.bootstrap import Deployment, build_sources
from cleanair_runtime.composition.settings import Settings
from cleanair_runtime.logs import configure_logging, stop_logging
from cleanair_runtime.processes.connection_deadlines import with_deadlines
from cleanair_runtime.processes.server import listening_socket
from cleanair_storage.postgres import PostgresStore
from cleanair_storage.sqlite import SqliteStore


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


def serve(database: str, key: bytes, sock: socket.socket, settings: Settings) -> None:
    """One serving process on `sock`."""
    store, store_calls = open_store(database)
    keys = TokenKeys(key)
    policy = Policy(requests_per_minute=10**9, credits=CreditLimits(monthly=10**9, daily=10**9))
    sources = build_sources(Settings(), store, keys, Deployment())
    core = CleanAir(
        store, keys, policy, sources=sources, offload=in_thread, store_calls=store_calls
    )
    app = create_app(core, settings)
    config = uvicorn.Config(
        beside_bare(with_access_log(app)),
        log_config=None,
        access_log=False,
        server_header=False,
        # The HTTP protocol `cleanair serve` runs, with its deadlines.
        http=with_deadlines(settings.header_timeout, settings.body_timeout, settings.send_timeout),
    )
    uvicorn.Server(config).run(sockets=[sock])  # as `cleanair serve --workers` does
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
        listening = listening_socket("127.0.0.1", 0)
        port = listening.getsockname()[1]
        children = []
        for _ in range(processes):
            pid = os.fork()
            if pid == 0:
                try:
                    serve(database, key, listening, settings)
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


if __name__ == "__main__":
    main()

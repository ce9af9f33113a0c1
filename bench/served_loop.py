"""What a served request costs the event loop: loop iterations, callbacks, timers, tasks and
`send` calls per request, the bare endpoint against a score, served as `bench.served` serves
them (uvicorn with `cleanair serve`'s protocol, access log and metrics on), on SQLite and
then PostgreSQL (a throwaway server with fsync and synchronous commits on, as PostgreSQL
ships: `bench.postgres.shipped_server`; `sqlite` or `postgres` for one alone).

    PYTHONPATH=. .venv/bin/python -m bench.served_loop [sqlite|postgres]

Counts, not times: they do not depend on the machine's load. Each pass of asyncio's Python
loop costs tens of µs of CPU, so these say why a score's "event loop and sockets" share
is larger than a bare request's whole CPU (docs/architecture.md).
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from bench.harness import SCORE_BODY
from bench.served import bench_core, beside_bare, post_request
from cleanair_core import generate_key
from cleanair_http.app import create_app, with_access_log
from cleanair_runtime.composition.settings import Settings
from cleanair_runtime.logs import configure_logging, stop_logging
from cleanair_runtime.processes.connection_deadlines import with_deadlines

sys.path.insert(0, str(Path(__file__).parents[1] / "tests"))
from support.loop_counts import counted_server, per_request

#: Requests counted per endpoint, one after another on one connection.
REQUESTS = 300
BARE = b"GET /bare HTTP/1.1\r\nhost: bench\r\n\r\n"


def main(stores: Sequence[str] = ("sqlite", "postgres")) -> dict[str, dict[str, float]]:
    """Print and return the per-request counts of the bare endpoint and of a score on each
    of `stores`, keyed `bare`, `score` (SQLite) and `score postgres`."""
    figures: dict[str, dict[str, float]] = {}
    for name in stores:
        if name == "postgres":
            from bench.postgres import shipped_server_url  # starts the server: only when asked

            figures["score postgres"] = served_counts(shipped_server_url())["score"]
        else:
            with tempfile.TemporaryDirectory() as tmp:
                figures.update(served_counts(str(Path(tmp) / "bench.db")))
    print(f"event loop per served request ({REQUESTS} on one kept-alive connection):")
    names = list(next(iter(figures.values())))
    print("  " + " " * 15 + "".join(f"{name:>18}" for name in names))
    for endpoint, counts in figures.items():
        print(f"  {endpoint:<15}" + "".join(f"{counts[name]:>18.2f}" for name in names))
    return figures


def served_counts(database: str) -> dict[str, dict[str, float]]:
    """The per-request counts of the bare endpoint and of a score served on `database`."""
    settings = Settings(plan_workers=0, access_log="info", metrics="on")
    # The access log's lines go nowhere: they would bury the figures.
    configure_logging(settings.log_level, settings.access_log, Path(os.devnull))
    try:
        store, requests, core = bench_core(database, generate_key())
        core.add_user("bench")
        token = core.redeem_pairing_code(core.create_pairing_code("bench"), "b", "127.0.0.1")
        app = beside_bare(with_access_log(create_app(core, settings)))
        protocol = with_deadlines(
            settings.header_timeout, settings.body_timeout, settings.send_timeout
        )
        score = post_request("/v1/airquality/score", token.token, SCORE_BODY)
        figures: dict[str, dict[str, float]] = {}
        with counted_server(app, http=protocol, server_header=False) as server:
            for name, request in (("bare", BARE), ("score", score)):
                figures[name] = per_request(server, request, REQUESTS)
        if requests is not None:
            requests.close()
        store.close()
    finally:
        stop_logging()
    return figures


if __name__ == "__main__":
    main(sys.argv[1:] or ("sqlite", "postgres"))

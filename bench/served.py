"""A benchmark server: the real app plus a bare JSON route, over a throw-away database.

Started by `bench/__main__.py` in a subprocess; prints `READY <port> <token>` on stdout once
listening. Both routes share one process, one event loop and one HTTP stack, so their ratio
measures our endpoint's own cost under real HTTP.
"""

from __future__ import annotations

import socket
import tempfile
from pathlib import Path

import uvicorn
from litestar import get

from cleanair_core import CleanAir, Policy, TokenKeys, generate_key
from cleanair_core.credits.ledger import CreditLimits
from cleanair_http.app import create_app
from cleanair_http.bootstrap import Deployment, build_sources
from cleanair_http.offloading import here_or_in_thread, in_thread
from cleanair_http.settings import Settings
from cleanair_storage.sqlite import SqliteStore


@get("/bare", exclude_from_auth=True)
async def bare() -> dict[str, bool]:
    return {"ok": True}


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = SqliteStore(Path(tmp) / "bench.db")
        keys = TokenKeys(generate_key())
        policy = Policy(requests_per_minute=10**9, credits=CreditLimits(monthly=10**9, daily=10**9))
        sources = build_sources(Settings(), store, keys, Deployment())
        core = CleanAir(
            store, keys, policy, sources=sources, offload=in_thread, store_calls=here_or_in_thread
        )
        core.add_user("bench")
        token = core.redeem_pairing_code(core.create_pairing_code("bench"), "b", "127.0.0.1")
        app = create_app(core, extra_route_handlers=[bare])
        with socket.socket() as probe:  # a free port; uvicorn binds it itself
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        config = uvicorn.Config(
            app, port=port, log_config=None, access_log=False, server_header=False
        )
        server = uvicorn.Server(config)
        print(f"READY {port} {token.token}", flush=True)
        server.run()
        store.close()


if __name__ == "__main__":
    main()

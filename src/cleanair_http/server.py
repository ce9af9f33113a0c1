"""`cleanair serve`: the API under uvicorn."""

from __future__ import annotations

import logging
import sys

import uvicorn

from cleanair_http.access_log import configure_logging
from cleanair_http.app import create_app, with_access_log
from cleanair_http.bootstrap import open_deployment
from cleanair_http.connection_deadlines import with_deadlines
from cleanair_http.settings import Settings, database_label
from cleanair_http.terminal import escape_nonprintable

log = logging.getLogger("cleanair")


def serve(settings: Settings, host: str, port: int) -> int:
    configure_logging(settings.log_level)
    deployment = open_deployment(settings)
    app = create_app(
        deployment.core,
        settings,
        on_shutdown=[deployment.aclose],
        plan_wakeups=deployment.plan_wakeups,
    )
    database = escape_nonprintable(database_label(settings.database))
    print(
        f"cleanair {settings.environment.value} API on http://{escape_nonprintable(host)}:{port} "
        f"(database {database}; OpenAPI at /schema/openapi.json)\n"
        "To pair a client, in another shell:\n"
        "  .venv/bin/cleanair users add alice\n"
        "  .venv/bin/cleanair pairing-code alice\n"
        'then POST {"code": "<code>", "name": "my app"} to /v1/connections/token '
        "within 60 seconds.",
        file=sys.stderr,
        flush=True,
    )
    try:
        uvicorn.run(
            with_access_log(app),
            host=host,
            port=port,
            access_log=False,  # ours is structured and never shows tokens or query strings
            log_config=None,
            server_header=False,
            # The client's address is decided in one place, client_address.py, from
            # CLEANAIR_TRUSTED_PROXIES. uvicorn's own X-Forwarded-For handling (on by default,
            # trusting 127.0.0.1 or $FORWARDED_ALLOW_IPS) would rewrite the peer first, so a
            # client behind a local proxy, or on loopback, could pick any address it liked.
            proxy_headers=False,
            forwarded_allow_ips=[],  # and, were it ever turned on, trust nobody
            http=with_deadlines(
                settings.header_timeout, settings.body_timeout, settings.send_timeout
            ),
        )
    finally:
        deployment.close()  # whatever the app's shutdown has not closed (it never started, say)
    return 0

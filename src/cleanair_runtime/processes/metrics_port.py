"""The metrics as the processes serve them: on a port of their own (`CLEANAIR_METRICS_PORT`),
and a serving process's live gauges forgotten when it ends. Imported only once metrics are on,
as `cleanair_http.metrics` is (prometheus_client reads the multiprocess directory at import).
"""

from __future__ import annotations

import os
from collections.abc import Callable

from prometheus_client import start_http_server

# Not `cleanair_http.metrics`: `cleanair worker` serves its metrics without Litestar.
from cleanair_http.domain_metrics import MULTIPROCESS_DIR, scrape_registry


def serve_metrics(host: str, port: int) -> Callable[[], None]:
    """Serve the metrics on `host:port` from a thread; the function that stops it. Raises
    OSError when it cannot listen there."""
    server, thread = start_http_server(port, addr=host, registry=scrape_registry())

    def stop() -> None:
        server.shutdown()
        server.server_close()
        thread.join()

    return stop


def mark_process_dead(pid: int) -> None:
    """Forget the live gauges (requests in progress) of a serving process that has ended."""
    if MULTIPROCESS_DIR in os.environ:
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(pid)  # type: ignore[no-untyped-call]

"""`cleanair worker`: route-plan workers with no HTTP, for machines that only plan.

API processes may then run with `CLEANAIR_PLAN_WORKERS=0`, so planning scales on machines of
its own. Every worker of every machine claims plans from the shared database (a PostgreSQL
URL, or a SQLite file on one machine). SIGTERM or SIGINT stops it: plans in progress are
handed back, so the next worker takes them at once, and the database is closed.

With `CLEANAIR_METRICS=on` and `CLEANAIR_METRICS_PORT` set, it serves its metrics (plans
finished and their planning time, credits refunded for failed plans, upstream requests) on
that port; it has no API port to serve them on otherwise.
"""

from __future__ import annotations

import logging
import signal

import anyio

from cleanair_http.access_log import configure_logging
from cleanair_http.bootstrap import open_deployment
from cleanair_http.plan_worker import PlanWorker
from cleanair_http.settings import Settings
from cleanair_http.terminal import cannot_listen

log = logging.getLogger("cleanair")


def work(settings: Settings, concurrency: int) -> int:
    """Run `concurrency` plan runners until SIGTERM or SIGINT; the exit status."""
    configure_logging(settings.log_level)
    stop_metrics = None
    if settings.metrics_enabled and settings.metrics_port is not None:
        from cleanair_http.metrics import serve_metrics

        try:
            stop_metrics = serve_metrics(settings.metrics_host, settings.metrics_port)
        except OSError as exc:
            return cannot_listen(settings.metrics_host, settings.metrics_port, exc)
    try:
        return _work(settings, concurrency)
    finally:
        if stop_metrics is not None:
            stop_metrics()


def _work(settings: Settings, concurrency: int) -> int:
    deployment = open_deployment(settings)

    async def main() -> None:
        worker = PlanWorker(
            deployment.core,
            runners=concurrency,
            idle_seconds=settings.plan_worker_idle_seconds,
            wakeups=deployment.plan_wakeups,
        )
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            log.info("plan worker started", extra={"runners": concurrency, **deployment.in_use()})
            async with anyio.create_task_group() as watching:
                for watch in deployment.watchers:  # networks imported meanwhile
                    watching.start_soon(watch)
                async with worker.running():
                    async for received in signals:
                        log.info("plan worker stopping", extra={"signal": received.name})
                        # Plans in progress are handed back now, without waiting for a path
                        # search still running in its thread.
                        await worker.stop()
                        break
                watching.cancel_scope.cancel()
        await deployment.aclose()

    try:
        anyio.run(main)
    finally:
        deployment.close()  # whatever aclose did not reach (it never ran, say)
    return 0

"""`cleanair worker`: route-plan workers with no HTTP, for machines that only plan.

API processes may then run with `CLEANAIR_PLAN_WORKERS=0`, so planning scales on machines of
its own. Every worker of every machine claims plans from the shared database (a PostgreSQL
URL, or a SQLite file on one machine). SIGTERM or SIGINT stops it: plans in progress are
handed back, so the next worker takes them at once, and the database is closed. A path search
still running is not waited for: it runs in a daemon thread (`in_abandoned_thread`), which
neither the stop nor the interpreter's exit waits for.

The plan processes `cleanair serve` starts run the same loop (`run_plans`), and both run the
alert loops beside the plan runners (`alert_worker`): evaluation rounds and webhook
deliveries, claimed from the shared database as plans are.

With `CLEANAIR_METRICS=on` and `CLEANAIR_METRICS_PORT` set, it serves its metrics (plans
finished and their planning time, credits refunded for failed plans, upstream requests) on
that port; it has no API port to serve them on otherwise.

Its malloc is tuned as plan processes' is (`plan_malloc.py`): one arena, a fixed mmap
threshold, unless the environment sets them.
"""

from __future__ import annotations

import functools
import logging
import os
import signal
from collections.abc import Callable, Sequence

import anyio

from cleanair_core import CleanAir
from cleanair_core.alerts.delivery import Delivery, Outcome, WebhookSender
from cleanair_core.routes.plans import PlanWakeups
from cleanair_http.offloading import in_abandoned_thread
from cleanair_http.plan_worker import PlanWorker
from cleanair_runtime.composition.bootstrap import open_deployment
from cleanair_runtime.composition.settings import Settings
from cleanair_runtime.logs import configure_logging, flush_logs
from cleanair_runtime.processes.alert_worker import AlertWorker
from cleanair_runtime.processes.plan_malloc import bound_malloc
from cleanair_runtime.terminal import cannot_listen

log = logging.getLogger("cleanair")


def work(settings: Settings, concurrency: int) -> int:
    """Run `concurrency` plan runners until SIGTERM or SIGINT; the exit status."""
    # Before any thread: its malloc tuned as a plan process's is (`plan_malloc.py`).
    bound_malloc(os.environ)
    configure_logging(settings.log_level, file=settings.log_file)
    stop_metrics = None
    if settings.metrics_enabled and settings.metrics_port is not None:
        from cleanair_runtime.processes.metrics_port import serve_metrics

        try:
            stop_metrics = serve_metrics(settings.metrics_host, settings.metrics_port)
        except OSError as exc:
            return cannot_listen(settings.metrics_host, settings.metrics_port, exc)
    try:
        return run_plans(settings, concurrency)
    finally:
        if stop_metrics is not None:
            stop_metrics()


class SenderAtFirstSend:
    """A `WebhookSender` that makes the real one (`make`, run in a worker thread) at its first
    delivery. Most plan processes never deliver a webhook: made at start, the HTTP sender's
    httpx, httpcore and TLS roots took memory in each one that most never use."""

    def __init__(self, make: Callable[[], WebhookSender]) -> None:
        self._make = make
        self._sender: WebhookSender | None = None
        self._making = anyio.Lock()

    async def send(self, delivery: Delivery) -> Outcome:
        """`delivery` sent by the real sender, made first if it is not yet."""
        async with self._making:
            if self._sender is None:
                # In a thread: the imports and the TLS roots take a while, the loop must not.
                self._sender = await anyio.to_thread.run_sync(self._make)
        return await self._sender.send(delivery)

    async def aclose(self) -> None:
        """Close the real sender, if one was made."""
        if self._sender is not None:
            await self._sender.aclose()


def http_webhook_sender(core: CleanAir) -> WebhookSender:
    """The HTTP webhook sender, within the operator's destination policy."""
    from cleanair_sources.webhook_sender import HttpWebhookSender

    return HttpWebhookSender(core.policy.webhook_destinations)


def alert_worker(core: CleanAir, settings: Settings) -> AlertWorker:
    """The alert loops of a plan process or `cleanair worker`, sending webhooks where the
    operator's destination policy allows."""
    sender = SenderAtFirstSend(functools.partial(http_webhook_sender, core))
    return AlertWorker(core, sender, idle_seconds=settings.alert_worker_idle_seconds)


def run_plans(
    settings: Settings,
    runners: int,
    *,
    wakeups: PlanWakeups | None = None,
    stop_signals: Sequence[signal.Signals] = (signal.SIGTERM, signal.SIGINT),
) -> int:
    """Work on plans with `runners` runners until one of `stop_signals` arrives; the exit
    status. `wakeups` tells of plans submitted elsewhere when the database cannot (SQLite)."""
    deployment = open_deployment(settings, offload=in_abandoned_thread)

    async def main() -> None:
        worker = PlanWorker(
            deployment.core,
            runners=runners,
            idle_seconds=settings.plan_worker_idle_seconds,
            wakeups=deployment.plan_wakeups or wakeups,
        )
        alerts = alert_worker(deployment.core, settings)
        with anyio.open_signal_receiver(*stop_signals) as signals:
            log.info("plan worker started", extra={"runners": runners, **deployment.in_use()})
            async with anyio.create_task_group() as watching:
                for watch in deployment.watchers:  # networks imported meanwhile
                    watching.start_soon(watch)
                async with worker.running(), alerts.running():
                    async for received in signals:
                        log.info("plan worker stopping", extra={"signal": received.name})
                        # Plans in progress are handed back now; a path search still running
                        # is abandoned in its daemon thread.
                        await worker.stop()
                        break
                watching.cancel_scope.cancel()
            # Still receiving: a second signal (a terminal's Ctrl-C and a service manager's
            # SIGTERM) must not end the process in the middle of closing the database.
            await deployment.aclose()
            # Nor take the last lines with it: once this block ends, a second signal ends the
            # process at once, before the log writer's next round.
            flush_logs()

    try:
        anyio.run(main)
    finally:
        deployment.close()  # whatever aclose did not reach (it never ran, say)
    return 0

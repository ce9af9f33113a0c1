"""The alert worker: evaluation rounds and webhook delivery passes, run beside the plan
runners of every plan process of `cleanair serve` and of `cleanair worker` (issue 32).

Two loops share one process: one claims the alert subscriptions due and stores what their
evaluation decided (`CleanAir.evaluate_alerts`), the other claims the webhooks owed and sends
them (`CleanAir.deliver_alerts`). Each goes on at once while it finds work and waits
`idle_seconds` when it found none. All claims are leased in the shared database, so any
number of workers on any number of machines share the work, and a killed worker's work is
taken over when its lease ends. A failure of one round is logged and the loop goes on: an
evaluation or delivery that failed halfway committed nothing (it is one transaction) and
is due again.
"""

from __future__ import annotations

import logging
import os
import socket
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta

import anyio

from cleanair_core import CleanAir
from cleanair_core.alerts.delivery import WebhookSender
from cleanair_core.alerts.dispatch import DeliverySettings

log = logging.getLogger("cleanair")


def claimant_name() -> str:
    """A name no other worker has, for the leases this one takes: readable in the database
    (host and process) and unique across restarts (a random suffix)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class AlertWorker:
    """Runs the alert loops of one process while `running` lasts; the sender is closed when
    it ends."""

    def __init__(
        self,
        core: CleanAir,
        sender: WebhookSender,
        *,
        idle_seconds: float,
        claimant: str | None = None,
    ) -> None:
        self._core = core
        self._sender = sender
        self._idle = idle_seconds
        self.claimant = claimant or claimant_name()
        self._delivery = DeliverySettings(
            claimant=self.claimant,
            lease=timedelta(seconds=core.policy.alert_lease_seconds),
        )

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Run both loops for as long as the context lasts, then close the sender."""
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(self._evaluate)
                group.start_soon(self._deliver)
                try:
                    yield
                finally:
                    group.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                await self._sender.aclose()

    async def _evaluate(self) -> None:
        while True:
            claimed = 0
            try:
                report = await self._core.evaluate_alerts(self.claimant)
                claimed = report.claimed
                if claimed:
                    # DEBUG: a busy round is not news, but what each worker did, and what
                    # it lost to another, is what a test or an operator debugging shares
                    # needs to see.
                    log.debug(
                        "alert round",
                        extra={
                            "claimant": self.claimant,
                            "claimed": claimed,
                            "recorded": report.recorded,
                            "withheld": report.withheld,
                            "lost": report.lost,
                        },
                    )
                if report.restarted:
                    log.warning(
                        "alert states unreadable, restarted",
                        extra={"subscriptions": report.restarted},
                    )
            except Exception:
                log.exception("alert evaluation failed; its subscriptions are due again")
            if not claimed:
                await anyio.sleep(self._idle)

    async def _deliver(self) -> None:
        while True:
            attempted = 0
            try:
                counts = await self._core.deliver_alerts(self._sender, self._delivery)
                attempted = counts.delivered + counts.retried + counts.failed + counts.lost
            except Exception:
                log.exception("webhook delivery pass failed; its deliveries are due again")
            if not attempted:
                await anyio.sleep(self._idle)

"""The background worker that runs route plans, inside the app's lifespan.

Plans live in the database, not in this process: each runner claims the oldest pending plan
under a lease (so several server processes share the work and no plan runs twice), keeps the
lease alive while it works, and stores the outcome. A runner stopped mid-plan (SIGTERM,
shutdown) hands its plan back, so the next worker takes it at once. Path searches run in
worker threads, off the event loop. A process that dies leaves its leases to expire and
another (or the restarted one) takes the plans again. Finished plans are pruned after the
retention period.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import anyio

from cleanair_core.errors import StoreUnavailable
from cleanair_core.routes.plans import Plan, PlanWakeups
from cleanair_core.service import CleanAir
from cleanair_http.offloading import in_thread

log = logging.getLogger("cleanair.plans")

PRUNE_SECONDS = 3600.0

#: Waits the given seconds; `anyio.sleep` unless a test drives the worker on a manual clock.
Sleep = Callable[[float], Awaitable[None]]


class PlanWorker:
    """Route plans worked on in the background by `runners` tasks, while `running` lasts."""

    def __init__(
        self,
        core: CleanAir,
        *,
        runners: int,
        idle_seconds: float,
        sleep: Sleep = anyio.sleep,
        wakeups: PlanWakeups | None = None,
    ) -> None:
        """`idle_seconds`: how long an idle runner waits before looking for plans again (a
        plan submitted to this process wakes it at once, as does one submitted anywhere
        when `wakeups` tells of it; the wait catches the rest). Every wait, that one
        included, is a call of `sleep`."""
        self._core = core
        self._wakeups = wakeups
        self._runners = runners
        self.idle_seconds = idle_seconds
        self._sleep = sleep
        self._wake = anyio.Event()
        self._store_down = False

    def notify(self) -> None:
        """A plan was submitted: wake the idle runners."""
        self._wake.set()

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Run the runners and the pruner for as long as the context lasts."""
        subscription = None
        if self._wakeups is not None:
            loop = asyncio.get_running_loop()

            def wake() -> None:  # on the wake-ups' thread: hand it to this loop
                loop.call_soon_threadsafe(self.notify)

            subscription = self._wakeups.subscribe(wake)
        try:
            async with anyio.create_task_group() as group:
                for _ in range(self._runners):
                    group.start_soon(self._runner)
                group.start_soon(self._pruner)
                try:
                    yield
                finally:
                    group.cancel_scope.cancel()
        finally:
            if subscription is not None:
                await in_thread(subscription.close)

    async def _runner(self) -> None:
        while True:
            try:
                plan = await in_thread(self._core.claim_next_plan)
            except StoreUnavailable:
                # An outage, not a bug: one line when it starts and one when it ends, rather
                # than a traceback per runner every second for as long as it lasts.
                if not self._store_down:
                    self._store_down = True
                    log.warning("the database is unavailable; plans wait until it is back")
                plan = None
            except Exception:
                log.exception("could not claim a plan")
                plan = None
            else:
                if self._store_down:
                    self._store_down = False
                    log.info("the database is available again; planning resumes")
            if plan is None:
                await self._rest()
                continue
            log.info("claimed a plan", extra={"plan": str(plan.id), "attempt": plan.attempts})
            try:
                async with anyio.create_task_group() as group:
                    group.start_soon(self._keep_lease, plan)
                    await self._run(plan)
                    group.cancel_scope.cancel()
            except anyio.get_cancelled_exc_class():
                # Stopping (SIGTERM, shutdown): hand the plan back, so the next worker takes
                # it at once rather than after the lease.
                with anyio.CancelScope(shield=True):
                    await self._hand_back(plan)
                raise

    async def _run(self, plan: Plan) -> None:
        try:
            await self._core.run_plan(plan)
        except Exception:
            log.exception("a plan failed with an internal error", extra={"plan": str(plan.id)})

    async def _hand_back(self, plan: Plan) -> None:
        try:
            if await in_thread(lambda: self._core.release_plan(plan)):
                log.info("handed a plan back", extra={"plan": str(plan.id)})
        except Exception:  # its lease then runs out, and the plan is taken again after it
            log.exception("could not hand a plan back", extra={"plan": str(plan.id)})

    async def _keep_lease(self, plan: Plan) -> None:
        every = max(1.0, self._core.policy.plan_lease_seconds / 3)
        while True:
            await self._sleep(every)
            try:
                if not await in_thread(lambda: self._core.renew_plan_lease(plan)):
                    return
            except Exception:  # a busy database must not end the worker; try again soon
                log.exception("could not renew a plan's lease", extra={"plan": str(plan.id)})

    async def _rest(self) -> None:
        """Wait until a plan is submitted to this process or the idle wait is over."""
        wake = self._wake
        async with anyio.create_task_group() as group:

            async def alarm() -> None:
                await self._sleep(self.idle_seconds)
                group.cancel_scope.cancel()

            group.start_soon(alarm)
            await wake.wait()
            group.cancel_scope.cancel()
        if self._wake.is_set():
            self._wake = anyio.Event()

    async def _pruner(self) -> None:
        while True:
            try:
                pruned = await in_thread(self._core.prune_plans)
                if pruned:
                    log.info("pruned finished plans", extra={"count": pruned})
            except Exception:
                log.exception("could not prune plans")
            await self._sleep(PRUNE_SECONDS)

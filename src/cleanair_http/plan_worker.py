"""The background worker that runs route plans, inside the app's lifespan.

Plans live in the database, not in this process: each runner claims the oldest pending plan
under a lease (so several server processes share the work and no plan runs twice), keeps the
lease alive while it works, and stores the outcome. `stop` (SIGTERM, shutdown) hands every
plan being worked on back at once, so the next worker takes it at once: even one whose path
search is still running in its thread, which is then left to end on its own and whose result
is never stored (the runner is cancelled before it can store it, and a later claim of the plan
fences it out). Path searches run in worker threads, off the event loop. A process that dies
leaves its leases to expire and another (or the restarted one) takes the plans again.
Finished plans are pruned after the retention period, and shortly before each hour turns the
next hours' air is computed at every node of the loaded networks.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import anyio

from cleanair_core.errors import StoreUnavailable
from cleanair_core.routes.plans import Plan, PlanStatus, PlanWakeups, failure_reason
from cleanair_core.service import CleanAir
from cleanair_http.offloading import in_thread

log = logging.getLogger("cleanair.plans")

PRUNE_SECONDS = 3600.0
#: After the next hours' air is prepared, a rest that outlasts the lead it was prepared with
#: (`cleanair_core.use_cases.routes.AIR_PREPARATION_LEAD`), so the hour has turned.
AIR_PREPARED_REST_SECONDS = 15 * 60.0

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
        #: The plans claimed and neither finished nor handed back yet, for `stop`.
        self._working: dict[uuid.UUID, Plan] = {}
        self._scope: anyio.CancelScope | None = None
        self._stopping = False

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
                group.start_soon(self._work)
                try:
                    yield
                finally:
                    group.cancel_scope.cancel()
        finally:
            if subscription is not None:
                await in_thread(subscription.close)

    async def _work(self) -> None:
        # A scope of their own: `stop` cancels the runners, never the code `running` wraps.
        with anyio.CancelScope() as scope:
            self._scope = scope
            if self._stopping:  # stopped before it ever started
                scope.cancel()
            async with anyio.create_task_group() as group:
                for _ in range(self._runners):
                    group.start_soon(self._runner)
                group.start_soon(self._pruner)
                group.start_soon(self._air_preparer)

    async def stop(self) -> None:
        """Stop claiming plans and hand back every plan being worked on, now.

        Call it as soon as the process is told to stop, before anything else it waits for
        (the HTTP server's open connections, say): a process its service manager kills
        later then has nothing left under a lease. A path search still running in its thread
        is not waited for; its plan is handed back all the same."""
        self._stopping = True
        if self._scope is not None:
            self._scope.cancel()
        with anyio.CancelScope(shield=True):
            for plan in list(self._working.values()):
                await self._hand_back(plan)

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
            self._working[plan.id] = plan
            try:
                log.info("claimed a plan", extra={"plan": str(plan.id), "attempt": plan.attempts})
                async with anyio.create_task_group() as group:
                    group.start_soon(self._keep_lease, plan)
                    await self._run(plan)
                    group.cancel_scope.cancel()
            except anyio.get_cancelled_exc_class():
                # Stopping (SIGTERM, shutdown) before `stop` could: hand the plan back, so
                # the next worker takes it at once rather than after the lease.
                with anyio.CancelScope(shield=True):
                    await self._hand_back(plan)
                raise
            finally:
                self._working.pop(plan.id, None)

    async def _run(self, plan: Plan) -> None:
        try:
            finished = await self._core.run_plan(plan)
        except Exception as error:
            log.exception(
                "a plan failed with an internal error",
                extra={"plan": str(plan.id), "reason": failure_reason(error)},
            )
            return
        if finished is None:
            # Its lease ran out and another worker took it (or it was handed back and
            # taken again): that worker's outcome stands.
            log.warning("a plan was taken by another worker first", extra={"plan": str(plan.id)})
        elif finished.status is PlanStatus.COMPLETED:
            log.info("completed a plan", extra={"plan": str(plan.id)})
        else:
            log.info("a plan failed", extra={"plan": str(plan.id), "reason": finished.error})

    async def _hand_back(self, plan: Plan) -> None:
        """Hand `plan` back unless it is already (by `stop` or its runner, whichever came
        first: a second hand-back would give back an attempt that was never spent)."""
        if self._working.pop(plan.id, None) is None:
            return
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

    async def _air_preparer(self) -> None:
        """Shortly before each hour turns, the next hours' node air (issue 25): the first
        plans of an hour then wait on none. A failure is logged and tried the next hour."""
        while True:
            wait = self._core.seconds_until_air_preparation()
            if wait > 0:
                await self._sleep(wait)
                continue  # the clock is asked again: a sleep may end early or late
            started = time.perf_counter()
            try:
                prepared = await self._core.prepare_network_air()
            except Exception:
                log.exception("could not prepare the next hour's air")
            else:
                if prepared:
                    log.info(
                        "prepared the next hour's air",
                        extra={
                            "network_hours": prepared,
                            "seconds": round(time.perf_counter() - started, 3),
                        },
                    )
            await self._sleep(AIR_PREPARED_REST_SECONDS)

    async def _pruner(self) -> None:
        while True:
            try:
                pruned = await in_thread(self._core.prune_plans)
                if pruned:
                    log.info("pruned finished plans", extra={"count": pruned})
            except Exception:
                log.exception("could not prune plans")
            try:
                pruned = await in_thread(self._core.prune_alert_history)
                if pruned:
                    log.info("pruned alert feed entries and deliveries", extra={"count": pruned})
            except Exception:
                log.exception("could not prune the alert feed and deliveries")
            await self._sleep(PRUNE_SECONDS)

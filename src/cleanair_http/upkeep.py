"""Background upkeep of every API process: keep its calls' charges held, refund dead ones,
and prune station observations past their retention.

A charge is held until its answer goes out (`cleanair_core.credits.charging`). While a call runs,
this process renews its hold; every process also sweeps holds that ended unrenewed, because
the process that took them died before answering: their credits go back to the pool. Store
calls run in a worker thread, off the event loop.

Observations older than `CLEANAIR_OBSERVATION_RETENTION_DAYS` are deleted at start and then
hourly: they age by the hour, so a tighter round would only add write transactions.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import anyio

from cleanair_core.credits.charging import hold_renewal_every
from cleanair_core.errors import StoreUnavailable
from cleanair_core.service import CleanAir
from cleanair_http.offloading import in_thread

log = logging.getLogger("cleanair.charges")
observations_log = logging.getLogger("cleanair.observations")

#: Seconds between two rounds of observation pruning.
PRUNE_OBSERVATIONS_EVERY = 3600.0


def tend_charges(core: CleanAir) -> None:
    """Renew this process's holds, then refund the ones that ended (one round)."""
    core.renew_charge_holds()
    refunded = core.sweep_charge_holds()
    if refunded:
        log.info("refunded charges whose calls were never answered", extra={"count": refunded})


@asynccontextmanager
async def charge_upkeep(core: CleanAir) -> AsyncIterator[None]:
    """Tend the charges at start (a restarted process refunds what its predecessor left, as
    soon as those holds end) and then every third of a hold, for as long as the context
    lasts."""
    every = hold_renewal_every(core.policy.charge_hold)

    async def loop() -> None:
        while True:
            try:
                await in_thread(lambda: tend_charges(core))
            except StoreUnavailable:  # an outage: the next round tries again, no traceback
                log.warning("could not tend the held charges: the database is unavailable")
            except Exception:  # nor may anything else end the upkeep
                log.exception("could not tend the held charges")
            await anyio.sleep(every)

    async with anyio.create_task_group() as group:
        group.start_soon(loop)
        try:
            yield
        finally:
            group.cancel_scope.cancel()


def prune_observations(core: CleanAir) -> int:
    """Delete the observations past their retention (one round); how many."""
    pruned = core.prune_observations()
    if pruned:
        observations_log.info("pruned observations past their retention", extra={"count": pruned})
    return pruned


@asynccontextmanager
async def observation_upkeep(
    core: CleanAir,
    *,
    every: float = PRUNE_OBSERVATIONS_EVERY,
    sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
) -> AsyncIterator[None]:
    """Prune observations past their retention at start and then every `every` seconds, for
    as long as the context lasts; nothing when the retention is 0 (for ever)."""

    async def loop() -> None:
        while True:
            try:
                await in_thread(lambda: prune_observations(core))
            except StoreUnavailable:  # the next round tries again
                observations_log.warning(
                    "could not prune observations: the database is unavailable"
                )
            except Exception:  # nor may anything else end the upkeep
                observations_log.exception("could not prune observations")
            await sleep(every)

    if not core.policy.observation_retention_seconds:
        yield
        return
    async with anyio.create_task_group() as group:
        group.start_soon(loop)
        try:
            yield
        finally:
            group.cancel_scope.cancel()

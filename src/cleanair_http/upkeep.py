"""Background upkeep of every API process: keep its calls' charges held, refund dead ones.

A charge is held until its answer goes out (`cleanair_core.credits.charging`). While a call runs,
this process renews its hold; every process also sweeps holds that ended unrenewed, because
the process that took them died before answering: their credits go back to the pool. Store
calls run in a worker thread, off the event loop.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio

from cleanair_core.credits.charging import hold_renewal_every
from cleanair_core.errors import StoreUnavailable
from cleanair_core.service import CleanAir
from cleanair_http.offloading import in_thread

log = logging.getLogger("cleanair.charges")


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

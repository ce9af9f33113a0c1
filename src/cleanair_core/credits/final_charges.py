"""Final charges: an answer computed first, then charged in one write, with no hold.

For calls that depend on no upstream (the embedded model, stored observations, local place
data), the answer is computed before anything is written; then the request's rate-limit hit
and the debit are one conditional write (`CreditLedger.settle_charges`). Nothing is held, so
nothing needs confirming or refunding: a call that fails before its answer wrote nothing,
and one that loses a race for the last credits (or the last requests of its rate-limit
window) answers 429 with nothing charged.

    async with core.charge(..., final=True):   # a pool already spent: 429 before any work
        result = compute()                       # an exception: nothing written
    # leaving the block settled the charge, or raised RateLimited / CreditsExhausted

Writes from concurrent requests are committed together (`GroupCommit`): one transaction and
one commit for whatever is queued, each request answered after the commit that holds its
own charge. A deployment whose store settles on the event loop (`RequestStore`) hands each
batch to it; any other runs the ledger's sync `settle_charges` on its offload.
"""

from __future__ import annotations

import asyncio
import functools
import math
import weakref
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from types import TracebackType

from cleanair_core.clock import Clock
from cleanair_core.credits.ledger import (
    CreditLedger,
    CreditLimits,
    Debit,
    FinalCharge,
    OverRateLimit,
    Settlement,
    Usage,
    check_fits,
)
from cleanair_core.credits.rate_limits import RateHit
from cleanair_core.errors import CreditsExhausted, RateLimited
from cleanair_core.metrics import NO_METRICS, Metrics
from cleanair_core.offload import Offload, inline

#: A batch's settlement, awaited: `RequestStore.settle_charges`.
SettleCharges = Callable[[Sequence[FinalCharge], CreditLimits], Awaitable[list[Settlement]]]


def retry_after(hit: RateHit, at: datetime) -> int:
    """Whole seconds from `at` until `hit`'s window resets, at least 1."""
    return max(1, math.ceil(hit.window_start + hit.window_seconds - at.timestamp()))


class _Queue:
    """One event loop's charges waiting for the next batch."""

    def __init__(self) -> None:
        self.waiting: list[tuple[Callable[[], FinalCharge], asyncio.Future[Settlement]]] = []
        self.draining = False
        self.task: asyncio.Task[None] | None = None


class GroupCommit:
    """Settles final charges a batch at a time: a charge waits for the batch under way to
    commit, then goes with every charge queued meanwhile in one `settle_charges` call (one
    transaction, one commit; on PostgreSQL one round trip). A request whose task is cancelled
    before its batch starts is left out of it, charged nothing."""

    def __init__(
        self,
        ledger: CreditLedger,
        limits: CreditLimits,
        offload: Offload = inline,
        *,
        settle: SettleCharges | None = None,
    ):
        """`settle`, when given, settles each batch instead of `ledger.settle_charges` on
        `offload`; the batch's charges are then built on the event loop, so their builders
        must not call the store."""
        self._ledger = ledger
        self._limits = limits
        self._offload = offload
        self._settle = settle
        # One queue per event loop: futures belong to the loop that made them.
        self._queues: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Queue] = (
            weakref.WeakKeyDictionary()
        )

    async def settle(self, charge: Callable[[], FinalCharge]) -> Settlement:
        """Settle the charge `charge` builds (called where the store calls run: building it
        may read the store) with whatever else is queued; what it came to."""
        loop = asyncio.get_running_loop()
        queue = self._queues.get(loop)
        if queue is None:
            queue = self._queues[loop] = _Queue()
        settled: asyncio.Future[Settlement] = loop.create_future()
        queue.waiting.append((charge, settled))
        if not queue.draining:
            queue.draining = True
            queue.task = loop.create_task(self._drain(queue))
        return await settled

    async def _drain(self, queue: _Queue) -> None:
        try:
            while queue.waiting:
                batch = [(c, f) for c, f in queue.waiting if not f.done()]
                queue.waiting = []
                if batch:
                    await self._settle_batch(batch)
        except BaseException as exc:
            # This task ends (cancelled as its loop shuts down, or the process exiting):
            # charges queued meanwhile have no batch to go in, and must not wait for ever.
            waiting, queue.waiting = queue.waiting, []
            _fail([settled for _, settled in waiting], exc)
            raise
        finally:
            queue.draining = False

    async def _settle_batch(
        self, batch: list[tuple[Callable[[], FinalCharge], asyncio.Future[Settlement]]]
    ) -> None:
        builders = [charge for charge, _ in batch]
        try:
            if self._settle is not None:
                outcomes = await self._settle([build() for build in builders], self._limits)
            else:
                outcomes = await self._offload(functools.partial(self._settle_now, builders))
        except BaseException as exc:
            # The store failed: every charge of the batch hears of it, and the next batch
            # goes on. Anything else ends this task, but first its callers hear of it too.
            _fail([settled for _, settled in batch], exc)
            if not isinstance(exc, Exception):
                raise
            return
        for (_, settled), outcome in zip(batch, outcomes, strict=True):
            if not settled.done():
                settled.set_result(outcome)

    def _settle_now(self, builders: list[Callable[[], FinalCharge]]) -> list[Settlement]:
        return self._ledger.settle_charges([build() for build in builders], self._limits)


def _fail(charges: list[asyncio.Future[Settlement]], exc: BaseException) -> None:
    """Tell every charge not settled yet that `exc` ended its batch (cancelled, if it did)."""
    for settled in charges:
        if settled.done():
            continue
        if isinstance(exc, asyncio.CancelledError):
            settled.cancel()
        else:
            settled.set_exception(exc)


class ChargeOnAnswer:
    """A final charge as an async context manager: its block computes the answer, and
    leaving it without an error charges the call (see the module's docstring)."""

    def __init__(
        self,
        commits: GroupCommit,
        debit: Callable[[], Awaitable[Debit]],
        amount: int,
        limits: CreditLimits,
        clock: Clock,
        *,
        hit: Callable[[], RateHit | None] = lambda: None,
        usage: Usage | None = None,
        metrics: Metrics = NO_METRICS,
        endpoint: str = "",
    ) -> None:
        """`debit` builds the call's debit (it may read the store: a client label); `hit`
        takes the request's rate-limit hit when it is not counted yet; `usage` is the pool's
        usage as read at the request's admission, checked before any work."""
        self._commits = commits
        self._debit = debit
        self._amount = amount
        self._limits = limits
        self._clock = clock
        self._hit = hit
        self._usage = usage
        self._metrics = metrics
        self._endpoint = endpoint

    async def __aenter__(self) -> ChargeOnAnswer:
        if self._usage is not None:  # a pool already spent is told so before any work
            check_fits(self._usage, self._amount, self._limits, self._clock.now())
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is not None:
            return  # no answer: nothing written, nothing to undo
        debit = await self._debit()  # first: a store that fails it leaves the hit pending
        hit = self._hit()
        outcome = await self._commits.settle(lambda: FinalCharge(debit, hit))
        if isinstance(outcome, OverRateLimit):
            assert hit is not None  # only a charge counting a hit can go over its limit
            raise RateLimited(retry_after(hit, self._clock.now()))
        if isinstance(outcome, CreditsExhausted):
            raise outcome
        self._metrics.credits_charged(self._endpoint, outcome.amount)

"""One charging mechanism for every credit-drawing call: reserve, run, confirm or refund.

    with core.charge(caller, Billable.SCORE, client=label):
        result = compute()          # any exception refunds the reservation

Validation must happen before the charge is reserved, so a 400/422 never charges. Any
exception inside the block refunds: a call that fails before delivering a result costs
nothing (a 503, a rejected plan, or an unexpected error).

A reservation is a held debit: it counts against the pool at once (so concurrent calls can
never overspend), but it becomes final only when the block ends without an error, that is
when the answer is on its way. A process killed in between cannot refund, so the hold has an
end: while the call runs, the process renews it (`HeldCharges` tracks which holds it owns),
and once it has ended unrenewed any process sweeps it: the debit is refunded, as the contract
wants for a call that never delivered. A confirmed charge is in the database before the
answer leaves, so an answered call stays charged through any crash.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from datetime import timedelta
from types import TracebackType

from cleanair_core.clock import Clock
from cleanair_core.credits.ledger import CreditLedger, CreditLimits, Debit, LedgerEntry
from cleanair_core.metrics import NO_METRICS, Metrics
from cleanair_core.offload import Offload, inline


class HeldCharges:
    """The holds this process has taken and not yet confirmed or refunded: the ones its
    upkeep renews. A hold whose call lost track of it (its confirm or refund failed) is not
    renewed, so it ends and is swept: refunded, as an answer that did not go out."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ids: set[int] = set()

    def add(self, entry_id: int) -> None:
        with self._lock:
            self._ids.add(entry_id)

    def discard(self, entry_id: int) -> None:
        with self._lock:
            self._ids.discard(entry_id)

    def ids(self) -> list[int]:
        with self._lock:
            return sorted(self._ids)


class Charge:
    """A credit reservation usable as a sync or async context manager.

    Used with `async with`, the ledger's calls (which may wait for a database lock) run on
    `offload`, away from the event loop.
    """

    def __init__(
        self,
        ledger: CreditLedger,
        debit: Debit | Callable[[], Debit],
        limits: CreditLimits,
        clock: Clock,
        held: HeldCharges | None = None,
        offload: Offload = inline,
        *,
        metrics: Metrics = NO_METRICS,
        endpoint: str = "",
    ) -> None:
        """`metrics` hears of the credits debited and refunded, under `endpoint` (a
        `Billable` value)."""
        self._ledger = ledger
        # A callable is called once, when the debit is first needed: building it may read
        # the store (a client label), which belongs on the offload too.
        self._debit_of = debit if callable(debit) else (lambda: debit)
        self._debit: Debit | None = None
        self._limits = limits
        self._clock = clock
        self._held = held if held is not None else HeldCharges()
        self._offload = offload
        self._metrics = metrics
        self._endpoint = endpoint
        self.entry: LedgerEntry | None = None
        #: False when the hold was gone at confirmation (swept): the answer went out free.
        self.confirmed: bool | None = None
        # Set when the awaiting task gave up (cancelled) while the offload may still be
        # reserving in a thread: such a charge is never renewed, so the sweep refunds it.
        self._abandoned = False
        self._state = threading.Lock()

    @property
    def debit(self) -> Debit:
        """What this charge debits (for stores that debit inside a larger transaction)."""
        if self._debit is None:
            self._debit = self._debit_of()
        return self._debit

    def reserve(self) -> LedgerEntry:
        """Debit now, held; raises CreditsExhausted when it does not fit."""
        if self.entry is not None:
            return self.entry
        entry = self._ledger.debit(self.debit, self._limits)
        with self._state:
            self.entry = entry
            if self.debit.hold_until is not None and not self._abandoned:
                self._held.add(entry.id)
        self._metrics.credits_charged(self._endpoint, entry.amount)
        return entry

    def abandon(self) -> None:
        """The call was given up before its charge could be settled (its task cancelled): stop
        renewing the hold, so the sweep refunds the charge once the hold ends. Never waits,
        so it is safe on the event loop; a reservation still running elsewhere sees it."""
        with self._state:
            self._abandoned = True
            if self.entry is not None:
                self._held.discard(self.entry.id)

    def confirm(self) -> bool:
        """Make the reservation final (the answer is on its way)."""
        if self.entry is None:
            return False
        if self.confirmed is None:
            try:
                self.confirmed = (
                    self._ledger.confirm_charge(self.entry.id)
                    if self.debit.hold_until is not None
                    else True
                )
            finally:
                self._held.discard(self.entry.id)
        return self.confirmed

    def refund(self) -> None:
        """Reverse the reservation (idempotent; a no-op when nothing was reserved)."""
        if self.entry is not None:
            try:
                refunded = self._ledger.refund(self.entry.id, self._clock.now())
            finally:
                self._held.discard(self.entry.id)
            if refunded is not None:  # not already refunded (by this call or a sweep)
                self._metrics.credits_refunded(self._endpoint, self.entry.amount)

    def __enter__(self) -> Charge:
        self.reserve()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is not None:
            self.refund()
        else:
            self.confirm()

    async def __aenter__(self) -> Charge:
        try:
            await self._offload(self.reserve)
        except BaseException:
            # Cancelled, perhaps while the debit still runs in a thread: whatever it reserves
            # is left to the sweep rather than renewed for as long as the process lives.
            self.abandon()
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            await self._offload(functools.partial(self.__exit__, exc_type, exc, tb))
        except BaseException:
            # The offload failed to settle (the task was cancelled, so no answer goes out):
            # refunding right here could wait on the store with the event loop held, so
            # the charge is abandoned to the sweep instead, refunded when its hold ends.
            if self.confirmed is None:
                self.abandon()
            raise


def hold_renewal_every(hold: timedelta) -> float:
    """Seconds between renewals (and sweeps): a third of the hold, so two may fail in a row
    before a live call's hold runs out."""
    return max(0.1, hold.total_seconds() / 3)

"""One charging mechanism for every credit-drawing call: reserve, run, keep or refund.

    with core.charge(caller, Billable.SCORE, client=label):
        result = compute()          # any exception refunds the reservation

Validation must happen before the charge is reserved, so a 400/422 never charges. Any
exception inside the block refunds: a call that fails before delivering a result costs
nothing (a 503, a rejected plan, or an unexpected error). Work that continues after the
request (a route plan) calls `reserve()` and later `refund()` if the work is rejected.
"""

from __future__ import annotations

from types import TracebackType

from cleanair_core.clock import Clock
from cleanair_core.credits import CreditLedger, CreditLimits, Debit, LedgerEntry


class Charge:
    """A credit reservation usable as a sync or async context manager."""

    def __init__(
        self, ledger: CreditLedger, debit: Debit, limits: CreditLimits, clock: Clock
    ) -> None:
        self._ledger = ledger
        self._debit = debit
        self._limits = limits
        self._clock = clock
        self.entry: LedgerEntry | None = None

    @property
    def debit(self) -> Debit:
        """What this charge debits (for stores that debit inside a larger transaction)."""
        return self._debit

    def reserve(self) -> LedgerEntry:
        """Debit now; raises CreditsExhausted when it does not fit."""
        if self.entry is None:
            self.entry = self._ledger.debit(self._debit, self._limits)
        return self.entry

    def refund(self) -> None:
        """Reverse the reservation (idempotent; a no-op when nothing was reserved)."""
        if self.entry is not None:
            self._ledger.refund(self.entry.id, self._clock.now())

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

    async def __aenter__(self) -> Charge:
        return self.__enter__()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.__exit__(exc_type, exc, tb)

"""`here_unless_blocked`: work runs right here unless a port says it would have to wait."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import TypeVar

import pytest

from cleanair_core.clock import ManualClock
from cleanair_core.credits.charging import Charge, HeldCharges
from cleanair_core.credits.ledger import CreditLimits, Debit, LedgerEntry
from cleanair_core.offload import WouldBlock, here_unless_blocked, waiting_allowed
from cleanair_storage.memory import MemoryStore

T = TypeVar("T")
AT = datetime(2026, 2, 10, 12, 0, tzinfo=UTC)


class Elsewhere:
    """A fallback offload that records what it ran and whether waiting was allowed there."""

    def __init__(self) -> None:
        self.ran: list[bool] = []

    async def __call__(self, work: Callable[[], T], /) -> T:
        self.ran.append(waiting_allowed())
        return work()


def test_free_work_runs_here_without_waiting_and_never_elsewhere() -> None:
    elsewhere = Elsewhere()
    seen: list[bool] = []

    def work() -> int:
        seen.append(waiting_allowed())
        return 7

    assert asyncio.run(here_unless_blocked(elsewhere)(work)) == 7
    assert (seen, elsewhere.ran) == ([False], [])
    assert waiting_allowed()  # restored afterwards


def test_work_that_would_block_runs_again_elsewhere_where_waiting_is_allowed() -> None:
    elsewhere = Elsewhere()
    tries: list[bool] = []

    def work() -> str:
        tries.append(waiting_allowed())
        if not waiting_allowed():
            raise WouldBlock
        return "done"

    assert asyncio.run(here_unless_blocked(elsewhere)(work)) == "done"
    assert (tries, elsewhere.ran) == ([False, True], [True])
    assert waiting_allowed()


def test_other_errors_are_not_retried() -> None:
    elsewhere = Elsewhere()

    def work() -> None:
        raise ValueError("bad")

    with pytest.raises(ValueError, match="bad"):
        asyncio.run(here_unless_blocked(elsewhere)(work))
    assert elsewhere.ran == []


class BusyOnce(MemoryStore):
    """A ledger whose first debit and first confirmation find the store busy."""

    def __init__(self) -> None:
        super().__init__()
        self.busy = {"debit", "confirm"}

    def debit(self, debit: Debit, limits: CreditLimits) -> LedgerEntry:
        if not waiting_allowed() and "debit" in self.busy:
            self.busy.discard("debit")
            raise WouldBlock
        return super().debit(debit, limits)

    def confirm_charge(self, entry_id: int) -> bool:
        if not waiting_allowed() and "confirm" in self.busy:
            self.busy.discard("confirm")
            raise WouldBlock
        return super().confirm_charge(entry_id)


def test_a_charge_whose_store_is_busy_is_made_once_elsewhere() -> None:
    store = BusyOnce()
    elsewhere = Elsewhere()
    debit = Debit("user:alice", "conn-1", "score", 2, AT, hold_until=AT)
    charge = Charge(
        store, debit, CreditLimits(), ManualClock(AT), offload=here_unless_blocked(elsewhere)
    )

    async def call() -> None:
        async with charge:
            pass

    asyncio.run(call())
    assert elsewhere.ran == [True, True]  # the debit and the confirmation, once each
    assert [entry.amount for entry in store.entries("user:alice")] == [2]
    assert charge.confirmed is True
    assert store.sweep_holds(AT, "unused") == 0  # confirmed: nothing left to refund


class SlowDebits(MemoryStore):
    """A ledger whose debits wait until the test lets them through."""

    def __init__(self) -> None:
        super().__init__()
        self.entered, self.go = threading.Event(), threading.Event()

    def debit(self, debit: Debit, limits: CreditLimits) -> LedgerEntry:
        self.entered.set()
        assert self.go.wait(timeout=30)
        return super().debit(debit, limits)


def test_a_charge_given_up_while_its_debit_runs_elsewhere_is_left_to_the_sweep() -> None:
    """Natively cancelled, the awaiting task leaves at once while the debit goes on in its
    thread; the charge it makes must not be renewed for ever, but refunded by the sweep."""
    store = SlowDebits()
    held = HeldCharges()
    clock = ManualClock(AT)
    pool = ThreadPoolExecutor(max_workers=1)

    async def in_pool(work: Callable[[], T], /) -> T:
        return await asyncio.get_running_loop().run_in_executor(pool, work)

    debit = Debit("user:alice", "conn-1", "score", 2, AT, hold_until=AT + timedelta(seconds=60))
    charge = Charge(store, debit, CreditLimits(), clock, held, offload=in_pool)

    async def call() -> None:
        async with charge:
            raise AssertionError("the block never runs")

    async def scenario() -> None:
        task = asyncio.create_task(call())
        await asyncio.get_running_loop().run_in_executor(None, store.entered.wait, 30)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(scenario())
    store.go.set()
    pool.shutdown(wait=True)  # the debit has now been made, after its task gave up
    assert [entry.amount for entry in store.entries("user:alice")] == [2]
    assert held.ids() == []  # never renewed
    clock.advance(60)
    assert store.sweep_holds(clock.now(), "unused") == 1
    assert store.usage("user:alice", AT).month == 0

"""One state machine drives the in-memory and the SQLite ledger with the same operations.

The test keeps its own model of the ledger (amounts and the instants they count at) and
computes window keys and resets with its own calendar arithmetic, so it checks the adapters
against the contract rather than against `cleanair_core.credits.ledger`.
"""

from __future__ import annotations

import math
import shutil
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import attrs
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    invariant,
    multiple,
    rule,
)

from cleanair_core.clock import ManualClock
from cleanair_core.credits.ledger import (
    CreditLimits,
    Debit,
    FinalCharge,
    LedgerEntry,
    OverRateLimit,
)
from cleanair_core.credits.rate_limits import RateHit
from cleanair_core.errors import CreditsExhausted
from cleanair_core.ports import Store
from cleanair_storage.memory import MemoryStore
from cleanair_storage.postgres import PostgresStore
from cleanair_storage.sqlite import SqliteStore
from support.postgres import shared_server

MONTHLY = 60
DAILY = 25
LIMITS = CreditLimits(monthly=MONTHLY, daily=DAILY)
POOLS = ("user:alice", "partner:acme")
START = datetime(2026, 1, 30, 20, 0, tzinfo=UTC)
#: Final charges' rate limit: this many requests per connection a minute.
PER_MINUTE = 3


def month_of(at: datetime) -> tuple[int, int]:
    at = at.astimezone(UTC)
    return (at.year, at.month)


def day_of(at: datetime) -> tuple[int, int, int]:
    at = at.astimezone(UTC)
    return (at.year, at.month, at.day)


def next_month_start(at: datetime) -> datetime:
    year, month = month_of(at)
    return datetime(year + month // 12, month % 12 + 1, 1, tzinfo=UTC)


def next_day_start(at: datetime) -> datetime:
    year, month, day = day_of(at)
    return datetime(year, month, day, tzinfo=UTC) + timedelta(days=1)


def whole_seconds_until(at: datetime, reset: datetime) -> int:
    return max(1, math.ceil((reset - at).total_seconds()))


@attrs.define
class ModelEntry:
    """The test's own record of a granted debit."""

    pool: str
    amount: int
    at: datetime
    label: str
    refunded: bool = False
    #: When its hold ends; None once confirmed, refunded, or for a debit taken final.
    hold_until: datetime | None = None

    @property
    def held(self) -> bool:
        return self.hold_until is not None and not self.refunded


@attrs.frozen
class Granted:
    """A debit granted by both adapters; their ids need not be equal."""

    key: int
    memory_id: int
    durable_id: int


def window_instant(entry: LedgerEntry, by_id: dict[int, LedgerEntry]) -> datetime:
    """The instant whose windows `entry` counts in: a refund counts where its debit did."""
    return entry.at if entry.reverses is None else by_id[entry.reverses].at


class CreditLedgerMachine(RuleBasedStateMachine):
    granted = Bundle("granted")
    refunds = Bundle("refunds")

    @staticmethod
    def open_durable(directory: Path) -> Store:
        """The durable adapter checked against memory and the model (SQLite here)."""
        return SqliteStore(directory / "ledger.db")

    def __init__(self) -> None:
        super().__init__()
        self.clock = ManualClock(START)
        self.memory = MemoryStore()
        self.directory = Path(tempfile.mkdtemp(prefix="cleanair-ledger-"))
        self.durable = self.open_durable(self.directory)
        self.model: dict[int, ModelEntry] = {}
        #: Operators' grants: (pool, credits, when).
        self.grants: list[tuple[str, int, datetime]] = []
        #: Operators' day grants (of the UTC day's burst cap only): (pool, credits, when).
        self.day_grants: list[tuple[str, int, datetime]] = []
        #: Final charges' rate-limit hits: (key, minute) -> count.
        self.hits: dict[tuple[str, int], int] = {}

    def teardown(self) -> None:
        self.memory.close()
        self.durable.close()
        shutil.rmtree(self.directory, ignore_errors=True)

    # -- the model --------------------------------------------------------------------------

    def model_usage(self, pool: str, at: datetime) -> tuple[int, int]:
        live = [e for e in self.model.values() if e.pool == pool and not e.refunded]
        month = sum(e.amount for e in live if month_of(e.at) == month_of(at))
        day = sum(e.amount for e in live if day_of(e.at) == day_of(at))
        return month, day

    def model_granted(self, pool: str, at: datetime) -> int:
        return sum(n for p, n, when in self.grants if p == pool and month_of(when) == month_of(at))

    def model_day_granted(self, pool: str, at: datetime) -> int:
        return sum(n for p, n, when in self.day_grants if p == pool and day_of(when) == day_of(at))

    # -- rules ------------------------------------------------------------------------------

    @initialize(minutes=st.integers(min_value=0, max_value=3 * 24 * 60))
    def start_somewhere_near_the_month_end(self, minutes: int) -> None:
        self.clock.advance(minutes=minutes)

    @rule(
        target=granted,
        pool=st.sampled_from(POOLS),
        amount=st.integers(min_value=1, max_value=30),
        label=st.sampled_from(["score", "forecast", "client:app"]),
        hold=st.sampled_from([None, 1, 60, 3600]),
    )
    def debit(self, pool: str, amount: int, label: str, hold: int | None) -> object:
        now = self.clock.now()
        month_used, day_used = self.model_usage(pool, now)
        hold_until = None if hold is None else now + timedelta(seconds=hold)
        request = Debit(pool, "conn", label, amount, now, hold_until)

        outcomes: list[LedgerEntry | CreditsExhausted] = []
        for store in (self.memory, self.durable):
            try:
                outcomes.append(store.debit(request, LIMITS))
            except CreditsExhausted as exc:
                outcomes.append(exc)
        from_memory, from_durable = outcomes

        if month_used + amount > MONTHLY + self.model_granted(pool, now):
            expected_retry: int | None = whole_seconds_until(now, next_month_start(now))
        elif day_used + amount > DAILY + self.model_day_granted(pool, now):
            expected_retry = whole_seconds_until(now, next_day_start(now))
        else:
            expected_retry = None

        if expected_retry is not None:
            assert isinstance(from_memory, CreditsExhausted), from_memory
            assert isinstance(from_durable, CreditsExhausted), from_durable
            assert from_memory.retry_after == from_durable.retry_after == expected_retry
            return multiple()

        assert isinstance(from_memory, LedgerEntry), from_memory
        assert isinstance(from_durable, LedgerEntry), from_durable
        for entry in (from_memory, from_durable):
            assert (entry.pool, entry.amount, entry.label, entry.at) == (pool, amount, label, now)
            assert entry.reverses is None
            usage = (self.memory if entry is from_memory else self.durable).usage(pool, now)
            assert usage.month <= MONTHLY + usage.granted
            assert usage.day <= DAILY + usage.day_granted
        key = len(self.model)
        self.model[key] = ModelEntry(pool, amount, now, label, hold_until=hold_until)
        return Granted(key, from_memory.id, from_durable.id)

    @rule(
        target=granted,
        charges=st.lists(
            st.tuples(
                st.sampled_from(POOLS),
                st.integers(min_value=1, max_value=12),
                st.sampled_from([None, "conn-a", "conn-b"]),
            ),
            min_size=1,
            max_size=5,
        ),
    )
    def settle_final_charges(self, charges: list[tuple[str, int, str | None]]) -> object:
        """A batch of final charges (a group commit): each counts its request's hit, then
        debits at once, or is refused whole, in order, seeing the ones before it."""
        now = self.clock.now()
        minute = int(now.timestamp()) // 60 * 60
        batch = [
            FinalCharge(
                Debit(pool, "conn", "score", amount, now),
                # A connection draws from its owner's pool only: its key names the pool.
                None if key is None else RateHit(f"{pool}/{key}", minute, 60, PER_MINUTE),
            )
            for pool, amount, key in charges
        ]
        from_memory = self.memory.settle_charges(batch, LIMITS)
        from_durable = self.durable.settle_charges(batch, LIMITS)
        assert len(from_memory) == len(from_durable) == len(batch)
        made = []
        for (pool, amount, key), memory, durable in zip(
            charges, from_memory, from_durable, strict=True
        ):
            if key is not None:
                count = self.hits.get((f"{pool}/{key}", minute), 0) + 1
                self.hits[(f"{pool}/{key}", minute)] = count
                if count > PER_MINUTE:
                    assert isinstance(memory, OverRateLimit), memory
                    assert isinstance(durable, OverRateLimit), durable
                    continue
            month_used, day_used = self.model_usage(pool, now)
            if month_used + amount > MONTHLY + self.model_granted(pool, now):
                expected_retry: int | None = whole_seconds_until(now, next_month_start(now))
            elif day_used + amount > DAILY + self.model_day_granted(pool, now):
                expected_retry = whole_seconds_until(now, next_day_start(now))
            else:
                expected_retry = None
            if expected_retry is not None:
                assert isinstance(memory, CreditsExhausted), memory
                assert isinstance(durable, CreditsExhausted), durable
                assert memory.retry_after == durable.retry_after == expected_retry
                continue
            assert isinstance(memory, LedgerEntry), memory
            assert isinstance(durable, LedgerEntry), durable
            for entry in (memory, durable):
                assert (entry.pool, entry.amount, entry.at, entry.reverses) == (
                    pool,
                    amount,
                    now,
                    None,
                )
            model_key = len(self.model)
            self.model[model_key] = ModelEntry(pool, amount, now, "score")
            made.append(Granted(model_key, memory.id, durable.id))
        return multiple(*made)

    @rule(
        pool=st.sampled_from(POOLS),
        amount=st.integers(min_value=1, max_value=40),
        day_only=st.booleans(),
    )
    def grant(self, pool: str, amount: int, day_only: bool) -> None:
        now = self.clock.now()
        for store in (self.memory, self.durable):
            entry = store.grant(pool, amount, "support ticket", now, day_only=day_only)
            assert (entry.amount, entry.reason, entry.at, entry.is_grant, entry.is_day_grant) == (
                amount,
                "support ticket",
                now,
                True,
                day_only,
            )
            # A grant is never reversed.
            assert store.refund(entry.id, now) is None
        (self.day_grants if day_only else self.grants).append((pool, amount, now))

    @rule(granted=granted)
    def confirm(self, granted: Granted) -> None:
        entry = self.model[granted.key]
        expected = entry.held
        assert self.memory.confirm_charge(granted.memory_id) is expected
        assert self.durable.confirm_charge(granted.durable_id) is expected
        entry.hold_until = None

    @rule(granted=granted, seconds=st.sampled_from([1, 30, 120]))
    def renew(self, granted: Granted, seconds: int) -> None:
        entry = self.model[granted.key]
        until = self.clock.now() + timedelta(seconds=seconds)
        expected = 1 if entry.held else 0
        assert self.memory.renew_holds([granted.memory_id], until) == expected
        assert self.durable.renew_holds([granted.durable_id], until) == expected
        if entry.held:
            entry.hold_until = until

    @rule()
    def sweep(self) -> None:
        now = self.clock.now()
        ended = [
            e
            for e in self.model.values()
            if e.held and e.hold_until is not None and e.hold_until <= now
        ]
        assert self.memory.sweep_holds(now, "lost") == len(ended)
        assert self.durable.sweep_holds(now, "lost") == len(ended)
        for entry in ended:
            entry.refunded = True

    @rule(target=refunds, granted=granted)
    def refund(self, granted: Granted) -> object:
        now = self.clock.now()
        original = self.model[granted.key]
        before = [s.usage(original.pool, original.at) for s in (self.memory, self.durable)]

        from_memory = self.memory.refund(granted.memory_id, now)
        from_durable = self.durable.refund(granted.durable_id, now)

        if original.refunded:
            assert from_memory is None
            assert from_durable is None
            return multiple()

        original.refunded = True
        assert from_memory is not None
        assert from_durable is not None
        for entry, reversed_id in (
            (from_memory, granted.memory_id),
            (from_durable, granted.durable_id),
        ):
            assert entry.amount == -original.amount
            assert entry.reverses == reversed_id
            assert (entry.pool, entry.label, entry.at) == (original.pool, original.label, now)
        after = [s.usage(original.pool, original.at) for s in (self.memory, self.durable)]
        for was, now_is in zip(before, after, strict=True):
            assert now_is.month == was.month - original.amount
            assert now_is.day == was.day - original.amount
        return Granted(-1, from_memory.id, from_durable.id)

    @rule(refund=refunds)
    def refund_of_a_refund(self, refund: Granted) -> None:
        now = self.clock.now()
        assert self.memory.refund(refund.memory_id, now) is None
        assert self.durable.refund(refund.durable_id, now) is None

    @rule(
        step=st.one_of(
            st.builds(timedelta, seconds=st.integers(1, 59)),
            st.builds(timedelta, minutes=st.integers(1, 59)),
            st.builds(timedelta, hours=st.integers(1, 23)),
            st.builds(timedelta, days=st.integers(1, 35)),
        )
    )
    def advance(self, step: timedelta) -> None:
        self.clock.advance(step.total_seconds())

    @rule(before=st.sampled_from([0.5, 1.0, 1.5, 59.0]), to_month_end=st.booleans())
    def advance_to_just_before_a_reset(self, before: float, to_month_end: bool) -> None:
        now = self.clock.now()
        reset = next_month_start(now) if to_month_end else next_day_start(now)
        self.clock.set(reset - timedelta(seconds=before))

    # -- invariants -------------------------------------------------------------------------

    @invariant()
    def usage_is_the_sum_of_the_entries(self) -> None:
        now = self.clock.now()
        for store in (self.memory, self.durable):
            for pool in POOLS:
                entries = store.entries(pool)
                by_id = {e.id: e for e in entries}
                month = day = granted = day_granted = 0
                for entry in entries:
                    if entry.is_day_grant:
                        if day_of(entry.at) == day_of(now):
                            day_granted += entry.amount
                        continue
                    if entry.is_grant:
                        if month_of(entry.at) == month_of(now):
                            granted += entry.amount
                        continue
                    counted_at = window_instant(entry, by_id)
                    assert entry.month == f"{counted_at.year:04d}-{counted_at.month:02d}"
                    assert entry.day == counted_at.date().isoformat()
                    if month_of(counted_at) == month_of(now):
                        month += entry.amount
                        if day_of(counted_at) == day_of(now):
                            day += entry.amount
                usage = store.usage(pool, now)
                assert (usage.month, usage.day, usage.granted, usage.day_granted) == (
                    month,
                    day,
                    granted,
                    day_granted,
                )
                assert (usage.month, usage.day) == self.model_usage(pool, now)
                assert usage.granted == self.model_granted(pool, now)
                # A day grant lapses with its day and never raises the month.
                assert usage.day_granted == self.model_day_granted(pool, now)
                assert 0 <= usage.day <= usage.month <= MONTHLY + usage.granted
                assert usage.day <= DAILY + usage.day_granted

    @invariant()
    def adapters_hold_the_same_ledger(self) -> None:
        for pool in POOLS:
            memory = self.memory.entries(pool)
            sqlite = self.durable.entries(pool)
            assert [(e.amount, e.at, e.label, e.month, e.day, e.reason) for e in memory] == [
                (e.amount, e.at, e.label, e.month, e.day, e.reason) for e in sqlite
            ]
            for month in {e.month for e in memory}:
                assert self.memory.usage_by_label(pool, month) == self.durable.usage_by_label(
                    pool, month
                )


CreditLedgerMachine.TestCase.settings = settings(
    max_examples=50, stateful_step_count=30, deadline=None
)
TestCreditLedger = CreditLedgerMachine.TestCase


class PostgresCreditLedgerMachine(CreditLedgerMachine):
    """The same machine with PostgreSQL as the durable adapter (a fresh database each run)."""

    @staticmethod
    def open_durable(directory: Path) -> Store:
        return PostgresStore(shared_server().database())


PostgresCreditLedgerMachine.TestCase.settings = CreditLedgerMachine.TestCase.settings
TestCreditLedgerOnPostgres = PostgresCreditLedgerMachine.TestCase

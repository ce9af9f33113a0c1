"""Charges (reserve, run, keep or refund) and the label a charge is booked under."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime

import pytest

from cleanair_core.access.accounts import Owner, OwnerKind
from cleanair_core.access.connections import Caller
from cleanair_core.access.scopes import USER_SCOPES
from cleanair_core.clock import ManualClock
from cleanair_core.credits.attribution import attribution_label, validate_client_label
from cleanair_core.credits.ledger import Billable, CreditLimits, Usage
from cleanair_core.errors import CreditsExhausted, OperatorError
from cleanair_core.keys import TokenKeys
from cleanair_core.policy import Policy
from cleanair_core.ports import Store
from cleanair_core.service import CleanAir
from cleanair_storage.memory import MemoryStore

KEYS = TokenKeys(b"charging-tests-server-key-32-bytes")
NOW = datetime(2026, 5, 20, 9, 0, tzinfo=UTC)
ALICE = Caller(uuid.uuid4(), Owner(OwnerKind.USER, "alice"), USER_SCOPES)


class Boom(Exception):
    """Raised inside a charge to stand for a failed computation."""


DEFAULT_LIMITS = CreditLimits()


def make_core(store: Store, limits: CreditLimits = DEFAULT_LIMITS) -> tuple[CleanAir, ManualClock]:
    clock = ManualClock(NOW)
    return CleanAir(store, KEYS, Policy(credits=limits), clock), clock


def usage(core: CleanAir, at: datetime = NOW) -> Usage:
    return core.store.usage(ALICE.owner.key, at)


# -- keep or refund ---------------------------------------------------------------------------


def test_success_keeps_the_charge(store: Store) -> None:
    core, _ = make_core(store)
    with core.charge(ALICE, Billable.FORECAST) as charge:
        pass
    assert charge.entry is not None
    assert charge.entry.amount == 2
    assert usage(core) == Usage(month=2, day=2)
    assert [e.amount for e in store.entries(ALICE.owner.key)] == [2]


def test_the_charge_is_taken_before_the_block_runs(store: Store) -> None:
    core, _ = make_core(store)
    with core.charge(ALICE, Billable.ROUTE_PLAN):
        assert usage(core) == Usage(month=25, day=25)


def test_an_exception_refunds(store: Store) -> None:
    core, _ = make_core(store)
    with pytest.raises(Boom), core.charge(ALICE, Billable.SCORE):
        raise Boom
    assert usage(core) == Usage(month=0, day=0)
    entries = store.entries(ALICE.owner.key)
    assert [e.amount for e in entries] == [1, -1]
    assert entries[1].reverses == entries[0].id


def test_async_success_keeps_and_exception_refunds(store: Store) -> None:
    core, _ = make_core(store)

    async def succeed() -> None:
        async with core.charge(ALICE, Billable.ROUTE_ENRICHMENT, units=4):
            await asyncio.sleep(0)

    async def fail() -> None:
        async with core.charge(ALICE, Billable.FORECAST):
            await asyncio.sleep(0)
            raise Boom

    asyncio.run(succeed())
    assert usage(core) == Usage(month=4, day=4)
    with pytest.raises(Boom):
        asyncio.run(fail())
    assert usage(core) == Usage(month=4, day=4)
    assert [e.amount for e in store.entries(ALICE.owner.key)] == [4, 2, -2]


def test_async_cancellation_refunds(store: Store) -> None:
    core, _ = make_core(store)

    async def cancelled() -> None:
        async with core.charge(ALICE, Billable.SCORE):
            raise asyncio.CancelledError

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(cancelled())
    assert usage(core) == Usage(month=0, day=0)


def test_refund_is_idempotent(store: Store) -> None:
    core, _ = make_core(store)
    charge = core.charge(ALICE, Billable.FORECAST)
    first = charge.reserve()
    assert charge.reserve() == first  # reserving again takes nothing more
    charge.refund()
    charge.refund()
    with pytest.raises(Boom), charge:
        raise Boom
    assert usage(core) == Usage(month=0, day=0)
    assert [e.amount for e in store.entries(ALICE.owner.key)] == [2, -2]


def test_refund_without_a_reservation_does_nothing(store: Store) -> None:
    core, _ = make_core(store)
    core.charge(ALICE, Billable.SCORE).refund()
    assert store.entries(ALICE.owner.key) == []


def test_kept_charge_can_be_refunded_later_in_its_own_windows(store: Store) -> None:
    core, clock = make_core(store)
    clock.set(datetime(2026, 5, 31, 23, 59, 30, tzinfo=UTC))
    debited_at = clock.now()
    with core.charge(ALICE, Billable.ROUTE_PLAN) as charge:
        pass
    clock.advance(minutes=5)  # a new day and a new month
    charge.refund()
    assert usage(core, debited_at) == Usage(month=0, day=0)
    assert usage(core, clock.now()) == Usage(month=0, day=0)
    refund = store.entries(ALICE.owner.key)[-1]
    assert refund.at == clock.now()


def test_exhausted_credits_on_enter_leave_nothing(store: Store) -> None:
    core, _ = make_core(store, CreditLimits(monthly=1000, daily=26))
    with core.charge(ALICE, Billable.ROUTE_PLAN):
        pass
    ran = False
    charge = core.charge(ALICE, Billable.FORECAST)
    with pytest.raises(CreditsExhausted) as raised, charge:
        ran = True
    assert not ran
    assert charge.entry is None
    assert raised.value.retry_after == 15 * 3600
    assert [e.amount for e in store.entries(ALICE.owner.key)] == [25]
    assert usage(core) == Usage(month=25, day=25)
    with core.charge(ALICE, Billable.SCORE):  # what still fits is still granted
        pass
    assert usage(core) == Usage(month=26, day=26)


def test_async_exhausted_credits_on_enter_leave_nothing(store: Store) -> None:
    core, _ = make_core(store, CreditLimits(monthly=1000, daily=0))

    async def call() -> None:
        async with core.charge(ALICE, Billable.SCORE):
            pytest.fail("the block must not run")

    with pytest.raises(CreditsExhausted):
        asyncio.run(call())
    assert store.entries(ALICE.owner.key) == []


def test_charges_draw_from_the_owner_pool_and_record_the_connection(store: Store) -> None:
    core, _ = make_core(store)
    other = Caller(uuid.uuid4(), ALICE.owner, USER_SCOPES)
    with core.charge(ALICE, Billable.SCORE), core.charge(other, Billable.SCORE):
        pass
    entries = store.entries("user:alice")
    assert sorted(e.connection_id for e in entries) == sorted(
        [str(ALICE.connection_id), str(other.connection_id)]
    )
    assert core.quota(ALICE).daily_used == 2


# -- attribution ------------------------------------------------------------------------------


def test_recognised_client_label_is_booked_as_client(store: Store) -> None:
    core, _ = make_core(store)
    core.add_client_label("ios-app")
    assert attribution_label("ios-app", Billable.SCORE, store) == "client:ios-app"
    with core.charge(ALICE, Billable.SCORE, client="ios-app"):
        pass
    core.add_user("alice")
    assert core.usage_by_label("alice") == {"client:ios-app": 1}


@pytest.mark.parametrize(
    "client",
    [
        None,
        "unknown",  # well-formed but not recognised
        "IOS-APP",  # recognised only in lower case
        "ios-app ",
        "ios-app\n",
        "",
        "a" * 33,
        "client:ios-app",
    ],
)
@pytest.mark.parametrize("billable", list(Billable))
def test_other_labels_are_booked_under_the_endpoint(
    store: Store, client: str | None, billable: Billable
) -> None:
    core, _ = make_core(store)
    core.add_client_label("ios-app")
    assert attribution_label(client, billable, store) == billable.value


def test_endpoint_labels() -> None:
    labels = MemoryStore()
    assert [attribution_label(None, b, labels) for b in Billable] == [
        "score",
        "forecast",
        "route_enrichment",
        "route_plan",
        "conditions",
        "route_departures",
        "history",
    ]


def test_usage_by_label_nets_refunds(store: Store) -> None:
    core, _ = make_core(store)
    core.add_user("alice")
    core.add_client_label("web")
    with core.charge(ALICE, Billable.FORECAST, client="web"):
        pass
    with pytest.raises(Boom), core.charge(ALICE, Billable.ROUTE_PLAN, client="nope"):
        raise Boom
    with core.charge(ALICE, Billable.SCORE, client="nope"):
        pass
    assert core.usage_by_label("alice") == {"client:web": 2, "route_plan": 0, "score": 1}


@pytest.mark.parametrize("label", ["", "Upper", "with space", "a" * 33, "dot.ted", "x\n"])
def test_invalid_client_labels_cannot_be_registered(label: str) -> None:
    with pytest.raises(ValueError, match="client label"):
        validate_client_label(label)
    core, _ = make_core(MemoryStore())
    with pytest.raises(ValueError, match="client label"):
        core.add_client_label(label)


def test_valid_client_labels_register_once() -> None:
    core, _ = make_core(MemoryStore())
    for label in ["a", "z" * 32, "my_app-2"]:
        core.add_client_label(label)
    with pytest.raises(OperatorError):
        core.add_client_label("a")

"""Held charges: final when the answer goes out, refunded when the process died before."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from cleanair_core.access.accounts import Owner, OwnerKind
from cleanair_core.access.connections import Caller
from cleanair_core.access.scopes import USER_SCOPES, Scope
from cleanair_core.clock import ManualClock
from cleanair_core.credits.ledger import Billable, Usage
from cleanair_core.geo import Point
from cleanair_core.keys import TokenKeys
from cleanair_core.policy import Policy
from cleanair_core.ports import Store
from cleanair_core.routes.network import PlanActivityType
from cleanair_core.routes.plans import UNDELIVERED_PLAN_ERROR, PlanStatus
from cleanair_core.service import CleanAir
from cleanair_storage.memory import MemoryStore

KEYS = TokenKeys(b"charge-hold-tests-server-key-32-b")
NOW = datetime(2026, 5, 20, 9, 0, tzinfo=UTC)
HOLD = 60


class Crash(Exception):
    """The store failing at the worst moment."""


class FailingConfirms:
    """A store whose confirmations fail, as when the database goes away mid-request."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def confirm_charge(self, entry_id: int) -> bool:
        raise Crash

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def make_core(store: Store | FailingConfirms) -> tuple[CleanAir, ManualClock]:
    clock = ManualClock(NOW)
    policy = Policy(charge_hold_seconds=HOLD)
    return CleanAir(store, KEYS, policy, clock), clock


def alice(core: CleanAir) -> Caller:
    if core.store.get_user("alice") is None:
        core.add_user("alice")
    return Caller(uuid.uuid4(), Owner(OwnerKind.USER, "alice"), USER_SCOPES)


def used(core: CleanAir) -> Usage:
    return core.store.usage("user:alice", NOW)


def test_an_answered_call_stays_charged(store: Store) -> None:
    core, clock = make_core(store)
    with core.charge(alice(core), Billable.FORECAST) as charge:
        pass
    assert charge.confirmed is True
    assert core.held_charges.ids() == []
    clock.advance(10 * HOLD)
    assert core.sweep_charge_holds() == 0
    assert used(core) == Usage(month=2, day=2)


def test_a_call_whose_process_died_is_refunded_once_its_hold_ends(store: Store) -> None:
    core, clock = make_core(store)
    core.charge(alice(core), Billable.FORECAST).reserve()  # and then the process is killed
    # Another process (a new core over the same store) sweeps.
    survivor = CleanAir(store, KEYS, core.policy, clock)
    clock.advance(HOLD - 0.5)
    assert survivor.sweep_charge_holds() == 0
    assert used(core) == Usage(month=2, day=2)
    clock.advance(0.5)
    assert survivor.sweep_charge_holds() == 1
    assert used(core) == Usage(month=0, day=0)


def test_a_long_call_is_renewed_and_never_swept(store: Store) -> None:
    core, clock = make_core(store)
    charge = core.charge(alice(core), Billable.SCORE)
    charge.reserve()
    for _ in range(6):  # three hold lengths, renewed every half hold
        clock.advance(HOLD / 2)
        assert core.renew_charge_holds() == 1
        assert core.sweep_charge_holds() == 0
    assert charge.confirm() is True
    assert used(core) == Usage(month=1, day=1)
    assert core.renew_charge_holds() == 0


def test_a_call_swept_before_it_answered_goes_out_free(store: Store) -> None:
    core, clock = make_core(store)
    charge = core.charge(alice(core), Billable.SCORE)
    charge.reserve()
    clock.advance(HOLD)  # not renewed: the process looked dead (a blocked event loop, say)
    assert core.sweep_charge_holds() == 1
    assert charge.confirm() is False
    assert used(core) == Usage(month=0, day=0)


def test_a_charge_that_lost_its_confirmation_is_not_renewed_and_is_refunded() -> None:
    store = MemoryStore()
    core, clock = make_core(FailingConfirms(store))
    with pytest.raises(Crash), core.charge(alice(core), Billable.SCORE):
        pass  # the answer is ready, but confirming it fails: it is never sent
    assert core.renew_charge_holds() == 0
    clock.advance(HOLD)
    assert core.sweep_charge_holds() == 1
    assert used(core) == Usage(month=0, day=0)


def submit(core: CleanAir) -> uuid.UUID:
    return core.submit_plan(
        core.authorize(alice(core), Scope.ROUTES_PLAN, user_owned=True),
        start=Point(60.17, 24.94),
        end=Point(60.18, 24.95),
        activity=PlanActivityType.WALKING,
    )


def test_a_submitted_plan_is_charged_for_good(store: Store) -> None:
    core, clock = make_core(store)
    plan_id = submit(core)
    clock.advance(10 * HOLD)
    assert core.sweep_charge_holds() == 0
    plan = core.store.get_plan(plan_id)
    assert plan is not None
    assert plan.status is PlanStatus.PENDING
    assert used(core) == Usage(month=25, day=25)


def test_a_plan_whose_submission_was_never_answered_fails_refunded() -> None:
    store = MemoryStore()
    core, clock = make_core(FailingConfirms(store))
    with pytest.raises(Crash):
        submit(core)
    plan = store.claim_plan(clock.now(), timedelta(seconds=1))  # nobody has its id but us
    assert plan is not None
    clock.advance(HOLD)
    assert core.sweep_charge_holds() == 1
    failed = store.get_plan(plan.id)
    assert failed is not None
    assert (failed.status, failed.error) == (PlanStatus.FAILED, UNDELIVERED_PLAN_ERROR)
    assert used(core) == Usage(month=0, day=0)


def test_a_hold_below_one_second_is_refused() -> None:
    with pytest.raises(ValueError, match="charge_hold_seconds"):
        Policy(charge_hold_seconds=0)

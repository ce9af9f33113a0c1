"""Contract of `PlanStore` (the `store` fixture runs it on every adapter), and a state machine
that drives the in-memory and the SQLite adapter with the same plan operations."""

from __future__ import annotations

import math
import shutil
import tempfile
import uuid
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import attrs
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, invariant, multiple, rule

from cleanair_core.credits.ledger import CreditLimits, Debit, LedgerEntry, Usage
from cleanair_core.errors import CreditsExhausted, DuplicateEntry
from cleanair_core.geo import Point
from cleanair_core.ports import Store
from cleanair_core.routes import plans as plan_rules
from cleanair_core.routes.network import PlanActivityType
from cleanair_core.routes.plans import (
    AnyPlanRequest,
    AnyPlanResult,
    DeparturesRequest,
    Plan,
    PlanKind,
    PlanRequest,
    PlanStatus,
    Refunded,
)
from cleanair_storage.memory import MemoryStore
from cleanair_storage.postgres import PostgresStore
from cleanair_storage.sqlite import SqliteStore
from support.plan_results import departures_result, plan_result
from support.postgres import shared_server

# Microseconds on purpose: timestamps must survive the round trip through each adapter.
T0 = datetime(2026, 3, 10, 9, 30, 15, 250_000, tzinfo=UTC)
POOL = "user:alice"
COST = 25
LIMITS = CreditLimits(monthly=1000, daily=100)
LEASE = timedelta(minutes=2)
RESULT = plan_result()
EMPTY_RESULT = plan_result(alternatives=0)
FIRST, SECOND = plan_result("first"), plan_result("second")
REQUEST = PlanRequest(
    start=Point(52.520008, 13.404954),
    end=Point(52.516275, 13.377704),
    activity=PlanActivityType.WALKING,
    start_time=T0,
)
DEPARTURES = DeparturesRequest(
    start=REQUEST.start,
    end=REQUEST.end,
    activity=PlanActivityType.CYCLING,
    earliest=T0,
    latest=T0 + timedelta(hours=24),
    step=timedelta(minutes=7),
)
DEPARTURES_RESULT = departures_result()


def make_plan(
    created_at: datetime = T0,
    *,
    plan_id: uuid.UUID | None = None,
    request: AnyPlanRequest = REQUEST,
    owner: str = "alice",
    connection_id: str = "conn-1",
) -> Plan:
    return Plan(
        id=plan_id or uuid.uuid4(),
        owner=owner,
        connection_id=connection_id,
        request=request,
        status=PlanStatus.PENDING,
        created_at=created_at,
    )


def submit(
    store: Store,
    plan: Plan | None = None,
    *,
    amount: int = COST,
    limits: CreditLimits = LIMITS,
) -> Plan:
    plan = plan or make_plan()
    debit = Debit(POOL, plan.connection_id, "route_plan", amount, plan.created_at)
    return plan_rules.submit(store, plan, debit, limits)


# -- submission -------------------------------------------------------------------------------


def test_submit_debits_and_stores_a_pending_plan(store: Store) -> None:
    plan = make_plan()
    stored = submit(store, plan)

    [entry] = store.entries(POOL)
    assert (entry.amount, entry.label, entry.connection_id, entry.at) == (
        COST,
        "route_plan",
        "conn-1",
        T0,
    )
    assert entry.reverses is None
    assert stored == attrs.evolve(plan, ledger_entry=entry.id)
    assert store.get_plan(plan.id) == stored
    assert store.usage(POOL, T0) == Usage(month=COST, day=COST)


def test_a_plan_whose_submission_was_never_confirmed_fails_refunded(store: Store) -> None:
    end = T0 + timedelta(seconds=60)
    lost = make_plan()
    debit = Debit(POOL, lost.connection_id, "route_plan", COST, T0, hold_until=end)
    plan_rules.submit(store, lost, debit, LIMITS)
    answered = make_plan()
    debit = Debit(POOL, answered.connection_id, "route_plan", COST, T0, hold_until=end)
    stored = plan_rules.submit(store, answered, debit, LIMITS)
    assert stored.ledger_entry is not None
    assert store.confirm_charge(stored.ledger_entry)

    assert store.sweep_holds(end, "never answered") == 1
    failed = store.get_plan(lost.id)
    assert failed is not None
    assert (failed.status, failed.error, failed.finished_at) == (
        PlanStatus.FAILED,
        "never answered",
        end,
    )
    assert store.get_plan(answered.id) == stored
    assert store.usage(POOL, T0) == Usage(month=COST, day=COST)


def test_a_swept_plan_that_already_finished_keeps_its_outcome(store: Store) -> None:
    end = T0 + timedelta(seconds=60)
    plan = make_plan()
    plan_rules.submit(
        store, plan, Debit(POOL, "conn-1", "route_plan", COST, T0, hold_until=end), LIMITS
    )
    assert store.complete_plan(plan.id, RESULT, T0 + timedelta(seconds=5))
    assert store.sweep_holds(end, "never answered") == 1
    completed = store.get_plan(plan.id)
    assert completed is not None
    assert completed.status is PlanStatus.COMPLETED
    assert store.usage(POOL, T0) == Usage(month=0, day=0)


def test_each_plan_carries_its_own_debit(store: Store) -> None:
    first = submit(store, make_plan())
    store.debit(Debit(POOL, "conn-1", "score", 1, T0), LIMITS)  # an unrelated entry between
    second = submit(store, make_plan())
    plan_entries = [e.id for e in store.entries(POOL) if e.label == "route_plan"]
    assert [first.ledger_entry, second.ledger_entry] == plan_entries
    assert first.ledger_entry != second.ledger_entry


def test_submit_over_the_daily_cap_raises_and_stores_nothing(store: Store) -> None:
    limits = CreditLimits(monthly=1000, daily=2 * COST + 10)
    kept = [submit(store, limits=limits), submit(store, limits=limits)]
    refused = make_plan()
    with pytest.raises(CreditsExhausted) as raised:
        submit(store, refused, limits=limits)

    until_midnight = (datetime(2026, 3, 11, tzinfo=UTC) - T0).total_seconds()
    assert raised.value.retry_after == math.ceil(until_midnight)
    assert store.get_plan(refused.id) is None
    assert len(store.entries(POOL)) == 2
    assert store.usage(POOL, T0) == Usage(month=2 * COST, day=2 * COST)
    # Only the plans that were paid for can be claimed.
    claimed = {store.claim_plan(T0, LEASE), store.claim_plan(T0, LEASE)}
    assert {p.id for p in claimed if p is not None} == {p.id for p in kept}
    assert store.claim_plan(T0, LEASE) is None


def test_a_duplicate_plan_id_is_refused_and_charges_nothing(store: Store) -> None:
    plan = submit(store)
    with pytest.raises(DuplicateEntry):
        submit(store, attrs.evolve(plan, owner="bob", ledger_entry=None))
    assert store.get_plan(plan.id) == plan
    assert len(store.entries(POOL)) == 1
    assert store.usage(POOL, T0) == Usage(month=COST, day=COST)


@pytest.mark.parametrize(
    "change",
    [
        {"status": PlanStatus.COMPLETED},
        {"status": PlanStatus.FAILED},
        {"result": plan_result()},
        {"error": "no route"},
        {"finished_at": T0},
        {"attempts": 1},
        {"claims": 1},
        {"lease_until": T0 + LEASE},
    ],
)
def test_only_a_new_plan_can_be_submitted(store: Store, change: dict[str, object]) -> None:
    plan = attrs.evolve(make_plan(), **change)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="new"):
        submit(store, plan)
    assert store.get_plan(plan.id) is None
    assert store.entries(POOL) == []


def test_get_unknown_plan(store: Store) -> None:
    submit(store)
    assert store.get_plan(uuid.uuid4()) is None


# -- the lifecycle ----------------------------------------------------------------------------


def test_full_lifecycle(store: Store) -> None:
    plan = submit(store)
    claimed = store.claim_plan(T0, LEASE)
    assert claimed == attrs.evolve(plan, attempts=1, claims=1, lease_until=T0 + LEASE)
    assert store.get_plan(plan.id) == claimed

    renewed_until = T0 + LEASE + timedelta(minutes=1, microseconds=7)
    assert store.renew_lease(plan.id, renewed_until) is True
    assert store.get_plan(plan.id) == attrs.evolve(claimed, lease_until=renewed_until)

    finished = T0 + timedelta(minutes=3, microseconds=1)
    assert store.complete_plan(plan.id, EMPTY_RESULT, finished) is True
    assert store.get_plan(plan.id) == attrs.evolve(
        plan,
        status=PlanStatus.COMPLETED,
        result=EMPTY_RESULT,
        finished_at=finished,
        attempts=1,
        claims=1,
        lease_until=None,
    )
    # Finished: no lease to renew, nothing to claim, the charge stays.
    assert store.renew_lease(plan.id, renewed_until + LEASE) is False
    assert store.claim_plan(finished + timedelta(days=1), LEASE) is None
    assert store.usage(POOL, T0) == Usage(month=COST, day=COST)


def test_claim_returns_the_plan_as_leased(store: Store) -> None:
    plan = submit(store)
    now = T0 + timedelta(seconds=5, microseconds=3)
    claimed = store.claim_plan(now, LEASE)
    assert claimed == attrs.evolve(plan, attempts=1, claims=1, lease_until=now + LEASE)
    assert store.get_plan(plan.id) == claimed


def test_claim_with_nothing_pending(store: Store) -> None:
    assert store.claim_plan(T0, LEASE) is None
    done = submit(store)
    failed = submit(store)
    assert store.complete_plan(done.id, RESULT, T0)
    assert plan_rules.fail(store, failed.id, "no route", T0, refund=False)
    assert store.claim_plan(T0 + timedelta(days=1), LEASE) is None


def test_claim_takes_the_oldest_first_then_the_lowest_id(store: Store) -> None:
    low = uuid.UUID("00000000-0000-4000-8000-000000000001")
    high = uuid.UUID("ffffffff-0000-4000-8000-000000000001")
    # Submitted in an order that matches neither creation nor id.
    plans = {
        "newest": make_plan(T0 + timedelta(hours=1)),
        "tie-high": make_plan(T0 + timedelta(microseconds=1), plan_id=high),
        "oldest": make_plan(T0),
        "tie-low": make_plan(T0 + timedelta(microseconds=1), plan_id=low),
    }
    for plan in plans.values():
        submit(store, plan)
    names = {plan.id: name for name, plan in plans.items()}

    order = []
    while (claimed := store.claim_plan(T0 + timedelta(hours=2), LEASE)) is not None:
        order.append(names[claimed.id])
    assert order == ["oldest", "tie-low", "tie-high", "newest"]


def test_a_leased_plan_is_not_claimed_again_until_its_lease_expires(store: Store) -> None:
    plan = submit(store)
    first = store.claim_plan(T0, LEASE)
    assert first is not None
    assert first.attempts == 1

    assert store.claim_plan(T0, LEASE) is None
    assert store.claim_plan(T0 + LEASE - timedelta(microseconds=1), LEASE) is None

    expiry = T0 + LEASE
    again = store.claim_plan(expiry, LEASE)
    assert again == attrs.evolve(plan, attempts=2, claims=2, lease_until=expiry + LEASE)
    assert store.claim_plan(expiry, LEASE) is None

    third = store.claim_plan(expiry + timedelta(hours=1), timedelta(seconds=1))
    assert third is not None
    assert (third.attempts, third.claims) == (3, 3)


def test_a_leased_plan_lets_the_next_one_be_claimed(store: Store) -> None:
    older = submit(store, make_plan(T0))
    newer = submit(store, make_plan(T0 + timedelta(seconds=1)))
    now = T0 + timedelta(seconds=2)
    first = store.claim_plan(now, LEASE)
    second = store.claim_plan(now, LEASE)
    assert (first and first.id, second and second.id) == (older.id, newer.id)
    assert store.claim_plan(now, LEASE) is None


def test_a_renewed_lease_postpones_the_next_claim(store: Store) -> None:
    plan = submit(store)
    assert store.claim_plan(T0, LEASE) is not None
    assert store.renew_lease(plan.id, T0 + 3 * LEASE) is True
    assert store.claim_plan(T0 + 2 * LEASE, LEASE) is None
    reclaimed = store.claim_plan(T0 + 3 * LEASE, LEASE)
    assert reclaimed is not None
    assert reclaimed.attempts == 2


def test_a_handed_back_plan_is_claimed_again_at_once_without_a_spent_attempt(
    store: Store,
) -> None:
    plan = submit(store)
    first = store.claim_plan(T0, LEASE)
    assert first is not None
    assert store.release_plan(plan.id) is True
    # No lease, no attempt counted; the claim stays counted, for a fresh token next time.
    assert store.get_plan(plan.id) == attrs.evolve(plan, claims=1)
    again = store.claim_plan(T0, LEASE)  # within what was the first lease
    assert again is not None
    assert (again.attempts, again.claims) == (1, 2)


def test_a_stale_claim_can_no_longer_renew_hand_back_complete_or_fail(store: Store) -> None:
    plan = submit(store)
    stale = store.claim_plan(T0, LEASE)
    assert stale is not None
    current = store.claim_plan(T0 + LEASE, LEASE)  # the lease ran out; a new claim
    assert current is not None
    old, now = stale.claims, current.claims
    assert store.renew_lease(plan.id, T0 + 3 * LEASE, old) is False
    assert store.release_plan(plan.id, old) is False
    assert store.complete_plan(plan.id, RESULT, T0 + LEASE, old) is False
    assert store.fail_plan(plan.id, "late", T0 + LEASE, old) is None
    assert store.get_plan(plan.id) == current  # untouched by the stale claim
    assert store.renew_lease(plan.id, T0 + 3 * LEASE, now) is True
    assert store.complete_plan(plan.id, RESULT, T0 + LEASE, now) is True


def test_a_stale_claim_stays_stale_after_the_plan_is_handed_back(store: Store) -> None:
    """A hand-back must not bring an earlier claim's fencing token round again."""
    plan = submit(store)
    stale = store.claim_plan(T0, LEASE)  # worker A, whose lease then runs out
    assert stale is not None
    current = store.claim_plan(T0 + LEASE, LEASE)  # worker B
    assert current is not None
    assert store.release_plan(plan.id, current.claims) is True  # B stops: handed back
    handed_back = store.get_plan(plan.id)
    assert handed_back is not None
    assert (handed_back.attempts, handed_back.lease_until) == (1, None)  # B's not counted

    old = stale.claims
    assert store.renew_lease(plan.id, T0 + 3 * LEASE, old) is False
    assert store.release_plan(plan.id, old) is False
    assert store.complete_plan(plan.id, RESULT, T0 + LEASE, old) is False
    assert store.fail_plan(plan.id, "late", T0 + LEASE, old) is None
    assert store.get_plan(plan.id) == handed_back  # untouched by A

    # The next claim is fenced apart from both earlier ones.
    latest = store.claim_plan(T0 + LEASE, LEASE)
    assert latest is not None
    assert (latest.attempts, latest.claims) == (2, 3)
    assert store.complete_plan(plan.id, RESULT, T0 + LEASE, old) is False
    assert store.complete_plan(plan.id, RESULT, T0 + LEASE, current.claims) is False
    assert store.complete_plan(plan.id, RESULT, T0 + LEASE, latest.claims) is True


def test_only_a_pending_plan_can_be_handed_back(store: Store) -> None:
    assert store.release_plan(uuid.uuid4()) is False
    plan = submit(store)
    assert plan_rules.fail(store, plan.id, "bad", T0, refund=False)
    assert store.release_plan(plan.id) is False
    never_claimed = submit(store)
    assert store.release_plan(never_claimed.id) is True  # a no-op: attempts stay at 0
    assert store.get_plan(never_claimed.id) == never_claimed


def test_renewing_an_unknown_or_finished_plan(store: Store) -> None:
    assert store.renew_lease(uuid.uuid4(), T0) is False
    plan = submit(store)
    assert plan_rules.fail(store, plan.id, "bad", T0, refund=False)
    assert store.renew_lease(plan.id, T0 + LEASE) is False
    assert store.get_plan(plan.id) == attrs.evolve(
        plan, status=PlanStatus.FAILED, error="bad", finished_at=T0
    )


def test_complete_only_from_pending(store: Store) -> None:
    plan = submit(store)
    other = submit(store)
    first_at = T0 + timedelta(seconds=1)
    assert store.complete_plan(plan.id, FIRST, first_at) is True
    assert store.complete_plan(plan.id, SECOND, first_at + timedelta(seconds=1)) is False
    assert (
        plan_rules.fail(store, plan.id, "late", first_at + timedelta(seconds=2), refund=True)
        is None
    )
    assert store.complete_plan(uuid.uuid4(), RESULT, first_at) is False

    assert store.get_plan(plan.id) == attrs.evolve(
        plan, status=PlanStatus.COMPLETED, result=FIRST, finished_at=first_at
    )
    assert store.get_plan(other.id) == other  # untouched
    assert store.usage(POOL, T0) == Usage(month=2 * COST, day=2 * COST)  # no refund


def test_fail_only_from_pending(store: Store) -> None:
    plan = submit(store)
    first_at = T0 + timedelta(seconds=1)
    assert plan_rules.fail(store, plan.id, "first", first_at, refund=False) == Refunded(0)
    assert plan_rules.fail(store, plan.id, "second", first_at, refund=True) is None
    assert store.complete_plan(plan.id, RESULT, first_at) is False
    assert plan_rules.fail(store, uuid.uuid4(), "nobody", first_at, refund=True) is None

    assert store.get_plan(plan.id) == attrs.evolve(
        plan, status=PlanStatus.FAILED, error="first", finished_at=first_at
    )
    # The refused second failure did not refund either.
    assert store.usage(POOL, T0) == Usage(month=COST, day=COST)
    assert len(store.entries(POOL)) == 1


def test_a_claimed_plan_fails_and_drops_its_lease(store: Store) -> None:
    plan = submit(store)
    assert store.claim_plan(T0, LEASE) is not None
    assert plan_rules.fail(
        store, plan.id, "planner crashed", T0 + timedelta(seconds=1), refund=False
    )
    assert store.get_plan(plan.id) == attrs.evolve(
        plan,
        status=PlanStatus.FAILED,
        error="planner crashed",
        finished_at=T0 + timedelta(seconds=1),
        attempts=1,
        claims=1,
    )


# -- refunds ----------------------------------------------------------------------------------


def test_fail_with_refund_restores_usage_exactly(store: Store) -> None:
    store.debit(Debit(POOL, "conn-1", "score", 3, T0), LIMITS)
    before = store.usage(POOL, T0)
    plan = submit(store)
    assert store.usage(POOL, T0) == Usage(month=before.month + COST, day=before.day + COST)

    # Failed on the next day: the refund still counts in the windows of the debit.
    failed_at = T0 + timedelta(days=1)
    assert plan_rules.fail(store, plan.id, "no route", failed_at, refund=True) == Refunded(COST)
    assert store.usage(POOL, T0) == before
    assert store.usage(POOL, failed_at) == Usage(month=before.month, day=0)

    debit, refund = store.entries(POOL)[-2:]
    assert debit.id == plan.ledger_entry
    assert refund == LedgerEntry(
        refund.id,
        POOL,
        "conn-1",
        "route_plan",
        -COST,
        failed_at,
        debit.month,
        debit.day,
        reverses=plan.ledger_entry,
    )
    assert store.usage_by_label(POOL, debit.month) == {"score": 3, "route_plan": 0}


def test_a_plan_refund_happens_at_most_once(store: Store) -> None:
    plan = submit(store)
    assert plan.ledger_entry is not None
    assert plan_rules.fail(store, plan.id, "no route", T0, refund=True)
    entries = store.entries(POOL)

    # Neither a direct refund nor a second failure reverses the debit again.
    assert store.refund(plan.ledger_entry, T0) is None
    assert plan_rules.fail(store, plan.id, "no route", T0, refund=True) is None
    assert store.entries(POOL) == entries
    assert store.usage(POOL, T0) == Usage(month=0, day=0)


def test_failing_a_plan_whose_debit_was_already_refunded(store: Store) -> None:
    plan = submit(store)
    assert plan.ledger_entry is not None
    assert store.refund(plan.ledger_entry, T0) is not None
    entries = store.entries(POOL)

    # Failed, with nothing left to give back.
    assert plan_rules.fail(store, plan.id, "no route", T0, refund=True) == Refunded(0)
    assert store.entries(POOL) == entries
    assert store.usage(POOL, T0) == Usage(month=0, day=0)
    failed = store.get_plan(plan.id)
    assert failed is not None
    assert failed.status is PlanStatus.FAILED


def test_fail_without_refund_keeps_the_charge(store: Store) -> None:
    plan = submit(store)
    assert plan_rules.fail(store, plan.id, "worker gave up", T0, refund=False) == Refunded(0)
    assert store.usage(POOL, T0) == Usage(month=COST, day=COST)
    assert [e.amount for e in store.entries(POOL)] == [COST]


# -- pruning ----------------------------------------------------------------------------------


def test_prune_deletes_only_plans_finished_before_the_cutoff(store: Store) -> None:
    t1, t2 = T0 + timedelta(hours=1), T0 + timedelta(hours=2)
    completed = submit(store)
    failed = submit(store)
    pending = submit(store)
    leased = submit(store, make_plan(T0 + timedelta(seconds=1)))
    assert store.complete_plan(completed.id, RESULT, t1)
    assert plan_rules.fail(store, failed.id, "no route", t2, refund=True)
    assert store.claim_plan(T0, LEASE) is not None  # leases `pending`, the oldest
    assert store.claim_plan(T0, LEASE) is not None  # and `leased`

    assert store.prune_plans(t1) == 0  # strictly before
    assert store.prune_plans(t2) == 1
    assert store.get_plan(completed.id) is None
    assert store.get_plan(failed.id) is not None

    assert store.prune_plans(t2 + timedelta(microseconds=1)) == 1
    assert store.get_plan(failed.id) is None
    # Pending plans are never pruned, however old; pruning keeps the ledger.
    assert store.prune_plans(T0 + timedelta(days=365)) == 0
    assert store.get_plan(pending.id) is not None
    assert store.get_plan(leased.id) is not None
    assert len(store.entries(POOL)) == 5


# -- round trip -------------------------------------------------------------------------------


def test_every_field_round_trips(store: Store) -> None:
    plus_two = timezone(timedelta(hours=2))
    request = PlanRequest(
        start=Point(-33.868800123456789, 151.209295987654321),
        end=Point(-89.999999999, -179.999999999),
        activity=PlanActivityType.WALKING,
        start_time=datetime(2026, 3, 10, 22, 59, 59, 999_999, tzinfo=plus_two),
    )
    leased_plan, done_plan, failed_plan = (
        make_plan(
            T0 + timedelta(microseconds=index),
            request=attrs.evolve(request, activity=activity),
            owner="zoë",
            connection_id=str(uuid.uuid4()),
        )
        for index, activity in enumerate(PlanActivityType)
    )
    leased, done, failed = (submit(store, p) for p in (leased_plan, done_plan, failed_plan))
    assert [p.ledger_entry for p in (leased, done, failed)] == [e.id for e in store.entries(POOL)]

    leased_at = T0 + timedelta(seconds=1, microseconds=999_999)
    claimed = [store.claim_plan(leased_at, LEASE) for _ in range(3)]
    assert [p.id for p in claimed if p is not None] == [leased.id, done.id, failed.id]
    finished = datetime(2026, 3, 10, 12, 0, 0, 1, tzinfo=plus_two)
    result = plan_result("ü \u0000", alternatives=2)
    error = "Kein Weg über 15 km gefunden"
    assert store.complete_plan(done.id, result, finished)
    assert plan_rules.fail(store, failed.id, error, finished, refund=False)

    assert store.get_plan(leased.id) == attrs.evolve(
        leased, attempts=1, claims=1, lease_until=leased_at + LEASE
    )
    assert store.get_plan(done.id) == attrs.evolve(
        done,
        status=PlanStatus.COMPLETED,
        result=result,
        finished_at=finished,
        attempts=1,
        claims=1,
    )
    assert store.get_plan(failed.id) == attrs.evolve(
        failed,
        status=PlanStatus.FAILED,
        error=error,
        finished_at=finished,
        attempts=1,
        claims=1,
    )
    for plan in (store.get_plan(p.id) for p in (leased, done, failed)):
        assert plan is not None
        assert isinstance(plan.request, PlanRequest)
        for at in (plan.created_at, plan.request.start_time, plan.finished_at, plan.lease_until):
            assert at is None or at.utcoffset() is not None  # aware, never naive


def test_a_departures_plan_keeps_its_window_and_result(store: Store) -> None:
    """A departures plan shares the table with route plans: its window (times with an
    offset, microseconds) and its result come back as stored, and it is claimed in turn."""
    plus_two = timezone(timedelta(hours=2))
    window = attrs.evolve(
        DEPARTURES,
        earliest=datetime(2026, 3, 10, 22, 59, 59, 999_999, tzinfo=plus_two),
        latest=datetime(2026, 3, 11, 6, 0, 0, 1, tzinfo=plus_two),
        step=timedelta(minutes=240),
    )
    route_plan = submit(store, make_plan(T0))
    departures = submit(store, make_plan(T0 + timedelta(microseconds=1), request=window))
    assert departures.kind is PlanKind.DEPARTURES
    assert route_plan.kind is PlanKind.ROUTES
    assert store.get_plan(departures.id) == departures
    first, second = store.claim_plan(T0, LEASE), store.claim_plan(T0, LEASE)
    assert first is not None
    assert second is not None
    assert [first.id, second.id] == [route_plan.id, departures.id]  # oldest first, any kind
    assert second.request == window
    finished = T0 + timedelta(minutes=1)
    assert store.complete_plan(departures.id, DEPARTURES_RESULT, finished)
    assert store.get_plan(departures.id) == attrs.evolve(
        second,
        status=PlanStatus.COMPLETED,
        result=DEPARTURES_RESULT,
        finished_at=finished,
        lease_until=None,
    )


def test_a_failed_departures_plan_is_refunded_as_a_route_plan(store: Store) -> None:
    plan = submit(store, make_plan(request=DEPARTURES))
    refunded = plan_rules.fail(store, plan.id, "no route", T0, refund=True)
    assert refunded == Refunded(COST)
    assert store.usage(POOL, T0) == Usage(month=0, day=0)
    failed = store.get_plan(plan.id)
    assert failed is not None
    assert failed.status is PlanStatus.FAILED
    assert failed.request == DEPARTURES


# -- both adapters agree ----------------------------------------------------------------------

MONTHLY = 150
DAILY = 80
MACHINE_LIMITS = CreditLimits(monthly=MONTHLY, daily=DAILY)
MACHINE_START = datetime(2026, 1, 31, 23, 0, tzinfo=UTC)


@attrs.define
class Charge:
    """The test's own record of a plan's debit."""

    amount: int
    at: datetime
    refunded: bool = False


class PlanStoreMachine(RuleBasedStateMachine):
    """Each rule runs on both adapters, which must agree with each other and with a model."""

    plans = Bundle("plans")

    @staticmethod
    def open_durable(directory: Path) -> Store:
        """The durable adapter checked against memory and the model (SQLite here)."""
        return SqliteStore(directory / "plans.db")

    def __init__(self) -> None:
        super().__init__()
        self.now = MACHINE_START
        self.memory = MemoryStore()
        self.directory = Path(tempfile.mkdtemp(prefix="cleanair-plans-"))
        self.durable = self.open_durable(self.directory)
        self.model: dict[uuid.UUID, Plan] = {}
        self.pruned: set[uuid.UUID] = set()
        self.charges: dict[uuid.UUID, Charge] = {}

    def teardown(self) -> None:
        self.memory.close()
        self.durable.close()
        shutil.rmtree(self.directory, ignore_errors=True)

    def model_usage(self, at: datetime) -> tuple[int, int]:
        live = [c for c in self.charges.values() if not c.refunded]
        month = sum(c.amount for c in live if (c.at.year, c.at.month) == (at.year, at.month))
        day = sum(c.amount for c in live if c.at.date() == at.date())
        return month, day

    @rule(
        target=plans,
        plan_id=st.uuids(version=4),
        amount=st.integers(min_value=10, max_value=40),
        activity=st.sampled_from(PlanActivityType),
        kind=st.sampled_from(PlanKind),
    )
    def submit(
        self, plan_id: uuid.UUID, amount: int, activity: PlanActivityType, kind: PlanKind
    ) -> object:
        request: AnyPlanRequest = attrs.evolve(
            REQUEST if kind is PlanKind.ROUTES else DEPARTURES, activity=activity
        )
        plan = make_plan(self.now, plan_id=plan_id, request=request)
        debit = Debit(POOL, "conn-1", "route_plan", amount, self.now)
        outcomes: list[Plan | Exception] = []
        for store in (self.memory, self.durable):
            try:
                outcomes.append(plan_rules.submit(store, plan, debit, MACHINE_LIMITS))
            except (CreditsExhausted, ValueError) as exc:
                outcomes.append(exc)
        from_memory, from_durable = outcomes

        if plan_id in self.model or plan_id in self.pruned:
            assert isinstance(from_memory, ValueError)
            assert isinstance(from_durable, ValueError)
            return multiple()
        month, day = self.model_usage(self.now)
        if month + amount > MONTHLY or day + amount > DAILY:
            assert isinstance(from_memory, CreditsExhausted), from_memory
            assert isinstance(from_durable, CreditsExhausted), from_durable
            assert from_memory.retry_after == from_durable.retry_after
            return multiple()
        assert isinstance(from_memory, Plan), from_memory
        assert from_memory == from_durable
        assert from_memory.ledger_entry is not None
        assert attrs.evolve(from_memory, ledger_entry=None) == plan
        self.model[plan_id] = from_memory
        self.charges[plan_id] = Charge(amount, self.now)
        return plan_id

    @rule(lease_s=st.integers(min_value=1, max_value=600))
    def claim(self, lease_s: int) -> None:
        lease = timedelta(seconds=lease_s)
        from_memory = self.memory.claim_plan(self.now, lease)
        from_durable = self.durable.claim_plan(self.now, lease)
        assert from_memory == from_durable
        claimable = [
            p
            for p in self.model.values()
            if p.status is PlanStatus.PENDING
            and (p.lease_until is None or p.lease_until <= self.now)
        ]
        if not claimable:
            assert from_memory is None
            return
        oldest = min(claimable, key=lambda p: (p.created_at, p.id.int))
        expected = attrs.evolve(
            oldest,
            attempts=oldest.attempts + 1,
            claims=oldest.claims + 1,
            lease_until=self.now + lease,
        )
        assert from_memory == expected
        self.model[oldest.id] = expected

    @rule(plan_id=plans, extra_s=st.integers(min_value=0, max_value=600))
    def renew(self, plan_id: uuid.UUID, extra_s: int) -> None:
        until = self.now + timedelta(seconds=extra_s)
        renewed = self.memory.renew_lease(plan_id, until)
        assert renewed == self.durable.renew_lease(plan_id, until)
        plan = self.model.get(plan_id)
        assert renewed == (plan is not None and plan.status is PlanStatus.PENDING)
        if renewed and plan is not None:
            self.model[plan_id] = attrs.evolve(plan, lease_until=until)

    @rule(plan_id=plans)
    def hand_back(self, plan_id: uuid.UUID) -> None:
        released = self.memory.release_plan(plan_id)
        assert released == self.durable.release_plan(plan_id)
        plan = self.model.get(plan_id)
        assert released == (plan is not None and plan.status is PlanStatus.PENDING)
        if released and plan is not None:
            self.model[plan_id] = attrs.evolve(
                plan, lease_until=None, attempts=max(0, plan.attempts - 1)
            )

    @rule(plan_id=plans, behind=st.integers(min_value=0, max_value=2))
    def renew_as_claim(self, plan_id: uuid.UUID, behind: int) -> None:
        """A worker holding the latest claim (`behind` 0) or an earlier one renews."""
        plan = self.model.get(plan_id)
        if plan is None:
            return
        claim, until = plan.claims - behind, self.now + LEASE
        renewed = self.memory.renew_lease(plan_id, until, claim)
        assert renewed == self.durable.renew_lease(plan_id, until, claim)
        assert renewed == (plan.status is PlanStatus.PENDING and behind == 0)
        if renewed:
            self.model[plan_id] = attrs.evolve(plan, lease_until=until)

    @rule(plan_id=plans, variant=st.booleans())
    def complete(self, plan_id: uuid.UUID, variant: bool) -> None:
        known = self.model.get(plan_id)
        result: AnyPlanResult
        if known is not None and known.kind is PlanKind.DEPARTURES:
            result = DEPARTURES_RESULT if variant else departures_result(1)
        else:
            result = RESULT if variant else EMPTY_RESULT
        done = self.memory.complete_plan(plan_id, result, self.now)
        assert done == self.durable.complete_plan(plan_id, result, self.now)
        plan = self.model.get(plan_id)
        assert done == (plan is not None and plan.status is PlanStatus.PENDING)
        if done and plan is not None:
            self.model[plan_id] = attrs.evolve(
                plan,
                status=PlanStatus.COMPLETED,
                result=result,
                finished_at=self.now,
                lease_until=None,
            )

    @rule(plan_id=plans, refund=st.booleans())
    def fail(self, plan_id: uuid.UUID, refund: bool) -> None:
        failed = plan_rules.fail(self.memory, plan_id, "no route", self.now, refund=refund)
        assert failed == plan_rules.fail(self.durable, plan_id, "no route", self.now, refund=refund)
        plan = self.model.get(plan_id)
        assert (failed is not None) == (plan is not None and plan.status is PlanStatus.PENDING)
        if failed is not None and plan is not None:
            self.model[plan_id] = attrs.evolve(
                plan,
                status=PlanStatus.FAILED,
                error="no route",
                finished_at=self.now,
                lease_until=None,
            )
            if refund:
                self.charges[plan_id].refunded = True

    @rule(plan_id=plans)
    def refund_directly(self, plan_id: uuid.UUID) -> None:
        plan = self.model.get(plan_id)
        if plan is None or plan.ledger_entry is None:
            return
        from_memory = self.memory.refund(plan.ledger_entry, self.now)
        from_durable = self.durable.refund(plan.ledger_entry, self.now)
        charge = self.charges[plan_id]
        assert (from_memory is None) == (from_durable is None) == charge.refunded
        charge.refunded = True

    @rule(back_s=st.integers(min_value=0, max_value=3600))
    def prune(self, back_s: int) -> None:
        cutoff = self.now - timedelta(seconds=back_s)
        pruned = self.memory.prune_plans(cutoff)
        assert pruned == self.durable.prune_plans(cutoff)
        gone = [
            p.id
            for p in self.model.values()
            if p.status is not PlanStatus.PENDING
            and p.finished_at is not None
            and p.finished_at < cutoff
        ]
        assert pruned == len(gone)
        for plan_id in gone:
            del self.model[plan_id]
            self.pruned.add(plan_id)

    @rule(
        step=st.one_of(
            st.just(timedelta(0)),
            st.builds(timedelta, microseconds=st.integers(1, 999_999)),
            st.builds(timedelta, seconds=st.integers(1, 600)),
            st.builds(timedelta, hours=st.integers(1, 30)),
        )
    )
    def advance(self, step: timedelta) -> None:
        self.now += step

    @invariant()
    def adapters_and_model_agree_on_every_plan(self) -> None:
        for plan_id in [*self.model, *self.pruned]:
            expected = self.model.get(plan_id)
            assert self.memory.get_plan(plan_id) == expected
            assert self.durable.get_plan(plan_id) == expected

    @invariant()
    def every_claim_is_counted_and_no_hand_back_is(self) -> None:
        for plan in self.model.values():
            assert plan.claims >= plan.attempts >= 0

    @invariant()
    def adapters_and_model_agree_on_credits(self) -> None:
        month, day = self.model_usage(self.now)
        for store in (self.memory, self.durable):
            assert store.usage(POOL, self.now) == Usage(month=month, day=day)
        assert [(e.id, e.amount, e.at, e.reverses) for e in self.memory.entries(POOL)] == [
            (e.id, e.amount, e.at, e.reverses) for e in self.durable.entries(POOL)
        ]


PlanStoreMachine.TestCase.settings = settings(
    max_examples=60, stateful_step_count=40, deadline=None
)
TestPlanStoreMachine = PlanStoreMachine.TestCase


class PostgresPlanStoreMachine(PlanStoreMachine):
    """The same machine with PostgreSQL as the durable adapter (a fresh database each run)."""

    @staticmethod
    def open_durable(directory: Path) -> Store:
        return PostgresStore(shared_server().database())


PostgresPlanStoreMachine.TestCase.settings = PlanStoreMachine.TestCase.settings
TestPlanStoreOnPostgres = PostgresPlanStoreMachine.TestCase

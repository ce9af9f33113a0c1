"""The route-plan lifecycle in the core, on every store: leases, crash recovery, the attempt
limit, refunds and pruning (contract 3.1; Policy.plan_lease_seconds, max_plan_attempts and
plan_retention_seconds)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import pytest

from cleanair_core import CleanAir, ManualClock, Policy, TokenKeys, generate_key
from cleanair_core.access.connections import Authorized, Caller
from cleanair_core.access.scopes import Scope
from cleanair_core.air.pollutants import Concentrations, Pollutant
from cleanair_core.air.quality_source import Sample
from cleanair_core.credits.ledger import CreditLimits
from cleanair_core.errors import (
    MissingScope,
    NotFound,
    PartnerConnectionRefused,
    SourceUnavailable,
    Unprocessable,
)
from cleanair_core.geo import Point
from cleanair_core.ports import Sources, Store
from cleanair_core.routes.network import PlanActivityType
from cleanair_core.routes.plans import Plan, PlanStatus
from cleanair_sources.street_router import LoadedNetworks
from support.networks import DLAT, DLON, ORIGIN, grid

NOW = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
PLAN_COST = 25
LEASE = 60
ATTEMPTS = 3
RETENTION = 7 * 24 * 3600


def at(i: int, j: int) -> Point:
    return Point(ORIGIN.lat + i * DLAT, ORIGIN.lon + j * DLON)


class CountingAir:
    """Uniform air; counts the calls, so a test can tell whether the planner ran."""

    update_interval = 3600

    def __init__(self) -> None:
        self.calls = 0
        self.fail = False

    async def concentrations(self, samples: Sequence[Sample]) -> list[Concentrations]:
        self.calls += 1
        if self.fail:
            raise SourceUnavailable()
        return [{Pollutant.NO2: 20.0, Pollutant.PM25: 5.0} for _ in samples]


def make_core(
    store: Store,
    clock: ManualClock,
    air: CountingAir,
    *,
    lease: int = LEASE,
    attempts: int = ATTEMPTS,
    retention: int = RETENTION,
) -> CleanAir:
    policy = Policy(
        credits=CreditLimits(monthly=1000, daily=100),
        plan_lease_seconds=lease,
        max_plan_attempts=attempts,
        plan_retention_seconds=retention,
    )
    sources = Sources(air, networks=LoadedNetworks([grid(3, 6)]))
    return CleanAir(store, TokenKeys(generate_key()), policy, clock, sources=sources)


def paired(core: CleanAir, user: str = "alice") -> Caller:
    core.add_user(user)
    code = core.create_pairing_code(user)
    issued = core.redeem_pairing_code(code, "app", "127.0.0.1")
    return core.authenticate(issued.token)


def submit(core: CleanAir, caller: Caller, start: Point | None = None) -> uuid.UUID:
    return core.submit_plan(
        core.authorize(caller, Scope.ROUTES_PLAN, user_owned=True),
        start=start or at(0, 0),
        end=at(0, 5),
        activity=PlanActivityType.WALKING,
    )


def poller(core: CleanAir, caller: Caller) -> Authorized:
    return core.authorize(caller, Scope.ROUTES_PLAN, premium=False)


def run(core: CleanAir) -> Plan | None:
    return asyncio.run(core.work_on_next_plan())


def status(core: CleanAir, plan_id: uuid.UUID) -> PlanStatus:
    plan = core.store.get_plan(plan_id)
    assert plan is not None
    return plan.status


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(NOW)


@pytest.fixture
def air() -> CountingAir:
    return CountingAir()


@pytest.fixture
def core(store: Store, clock: ManualClock, air: CountingAir) -> CleanAir:
    return make_core(store, clock, air)


@pytest.fixture
def alice(core: CleanAir) -> Caller:
    return paired(core)


# -- claiming and leases ----------------------------------------------------------------------


def test_a_claimed_plan_is_leased_to_one_worker(core: CleanAir, alice: Caller) -> None:
    plan_id = submit(core, alice)
    claimed = core.claim_next_plan()
    assert claimed is not None
    assert claimed.id == plan_id
    assert claimed.attempts == 1
    assert claimed.lease_until == NOW + timedelta(seconds=LEASE)
    assert claimed.status is PlanStatus.PENDING
    # Nobody else gets it while the lease runs.
    assert core.claim_next_plan() is None
    assert run(core) is None


def test_plans_are_taken_oldest_first(core: CleanAir, alice: Caller, clock: ManualClock) -> None:
    ids = []
    for _ in range(3):
        ids.append(submit(core, alice))
        clock.advance(1)
    taken = [run(core) for _ in range(3)]
    assert [plan.id for plan in taken if plan is not None] == ids
    assert run(core) is None


def test_a_dead_workers_plan_is_taken_again_after_the_lease(
    core: CleanAir, alice: Caller, clock: ManualClock, air: CountingAir
) -> None:
    plan_id = submit(core, alice)
    died = core.claim_next_plan()  # ... and the worker dies: nothing is stored
    assert died is not None
    clock.advance(LEASE - 1)
    assert run(core) is None  # the lease still runs
    assert status(core, plan_id) is PlanStatus.PENDING
    clock.advance(1)  # the lease has run out
    taken = run(core)
    assert taken is not None
    assert taken.id == plan_id
    assert taken.attempts == 2
    assert air.calls > 0
    assert status(core, plan_id) is PlanStatus.COMPLETED
    assert core.poll_plan(poller(core, alice), plan_id).result is not None
    assert core.quota(alice).used == PLAN_COST  # charged once, kept


def test_the_lease_length_is_the_policys(
    store: Store, clock: ManualClock, air: CountingAir
) -> None:
    core = make_core(store, clock, air, lease=5)
    alice = paired(core)
    plan_id = submit(core, alice)
    assert core.claim_next_plan() is not None
    clock.advance(4)
    assert core.claim_next_plan() is None
    clock.advance(1)
    again = core.claim_next_plan()
    assert again is not None
    assert again.id == plan_id


def test_a_renewed_lease_keeps_the_plan(core: CleanAir, alice: Caller, clock: ManualClock) -> None:
    submit(core, alice)
    claimed = core.claim_next_plan()
    assert claimed is not None
    clock.advance(LEASE - 10)
    assert core.renew_plan_lease(claimed)  # the worker is still at it
    clock.advance(20)  # past the first lease, inside the renewed one
    assert core.claim_next_plan() is None
    clock.advance(LEASE)
    assert core.claim_next_plan() is not None


def test_a_finished_plan_cannot_be_renewed_or_taken_again(core: CleanAir, alice: Caller) -> None:
    plan_id = submit(core, alice)
    worked = run(core)
    assert worked is not None
    assert status(core, plan_id) is PlanStatus.COMPLETED
    assert not core.renew_plan_lease(worked)
    assert not core.release_plan(worked)
    assert core.claim_next_plan() is None


def test_a_late_worker_cannot_overwrite_a_finished_plan(
    core: CleanAir, alice: Caller, clock: ManualClock
) -> None:
    plan_id = submit(core, alice)
    slow = core.claim_next_plan()
    assert slow is not None
    clock.advance(LEASE)
    assert run(core) is not None  # another worker takes over and completes it
    # The first worker wakes up and finishes too: the plan stays completed, charged once.
    asyncio.run(core.run_plan(slow))
    plan = core.store.get_plan(plan_id)
    assert plan is not None
    assert plan.status is PlanStatus.COMPLETED
    assert core.quota(alice).used == PLAN_COST


def test_a_worker_whose_lease_ran_out_cannot_touch_the_plan_another_now_holds(
    core: CleanAir, alice: Caller, clock: ManualClock
) -> None:
    """The claim's number is a fencing token: only the current claim counts."""
    plan_id = submit(core, alice)
    stale = core.claim_next_plan()
    assert stale is not None
    clock.advance(LEASE)
    current = core.claim_next_plan()  # the lease ran out: another worker takes the plan
    assert current is not None
    assert current.attempts == stale.attempts + 1
    assert not core.renew_plan_lease(stale)
    assert not core.release_plan(stale)
    # The stale worker finishes its planning, cannot store it, and is told so.
    assert asyncio.run(core.run_plan(stale)) is None
    assert status(core, plan_id) is PlanStatus.PENDING
    assert core.renew_plan_lease(current)
    finished = asyncio.run(core.run_plan(current))
    assert finished is not None
    assert finished.status is PlanStatus.COMPLETED
    assert finished.result == core.store.get_plan(plan_id).result  # type: ignore[union-attr]
    assert status(core, plan_id) is PlanStatus.COMPLETED
    assert core.quota(alice).used == PLAN_COST


def test_a_stale_worker_stays_locked_out_after_the_current_one_hands_the_plan_back(
    core: CleanAir, alice: Caller, clock: ManualClock
) -> None:
    """A hand-back gives the attempt back, never the fencing token."""
    plan_id = submit(core, alice)
    stale = core.claim_next_plan()  # worker A
    assert stale is not None
    clock.advance(LEASE)
    current = core.claim_next_plan()  # worker B, once A's lease ran out
    assert current is not None
    assert core.release_plan(current)  # B is stopping
    assert not core.renew_plan_lease(stale)
    assert not core.release_plan(stale)
    asyncio.run(core.run_plan(stale))  # A finishes its planning ...
    assert status(core, plan_id) is PlanStatus.PENDING  # ... and cannot store it
    latest = core.claim_next_plan()  # taken again at once, B's attempt not counted
    assert latest is not None
    assert latest.attempts == 2
    asyncio.run(core.run_plan(latest))
    assert status(core, plan_id) is PlanStatus.COMPLETED
    assert core.quota(alice).used == PLAN_COST


# -- the attempt limit ------------------------------------------------------------------------


def die(core: CleanAir, clock: ManualClock, times: int) -> None:
    """`times` workers take the plan and die without a word."""
    for _ in range(times):
        assert core.claim_next_plan() is not None
        clock.advance(core.policy.plan_lease_seconds)


def test_a_plan_whose_workers_died_max_attempts_times_fails_and_is_refunded(
    core: CleanAir, alice: Caller, clock: ManualClock, air: CountingAir
) -> None:
    plan_id = submit(core, alice)
    assert core.quota(alice).used == PLAN_COST
    die(core, clock, ATTEMPTS)
    taken = run(core)
    assert taken is not None
    assert taken.attempts == ATTEMPTS + 1
    assert air.calls == 0  # it was not planned again
    plan = core.poll_plan(poller(core, alice), plan_id)
    assert plan.status is PlanStatus.FAILED
    assert plan.error == "Planning failed repeatedly; the plan was refunded"
    assert plan.result is None
    assert core.quota(alice).used == 0
    assert core.quota(alice).daily_used == 0
    assert run(core) is None


def test_one_death_fewer_still_completes(core: CleanAir, alice: Caller, clock: ManualClock) -> None:
    plan_id = submit(core, alice)
    die(core, clock, ATTEMPTS - 1)
    taken = run(core)
    assert taken is not None
    assert taken.attempts == ATTEMPTS
    assert status(core, plan_id) is PlanStatus.COMPLETED
    assert core.quota(alice).used == PLAN_COST


@pytest.mark.parametrize("attempts", [1, 5])
def test_the_attempt_limit_is_the_policys(
    store: Store, clock: ManualClock, air: CountingAir, attempts: int
) -> None:
    core = make_core(store, clock, air, attempts=attempts)
    alice = paired(core)
    plan_id = submit(core, alice)
    die(core, clock, attempts - 1)
    assert run(core) is not None
    assert status(core, plan_id) is PlanStatus.COMPLETED

    other = submit(core, alice)
    die(core, clock, attempts)
    assert run(core) is not None
    assert status(core, other) is PlanStatus.FAILED
    assert core.quota(alice).used == PLAN_COST  # only the failed plan was refunded


# -- rejections -------------------------------------------------------------------------------


def test_a_rejected_plan_fails_with_the_planners_reason_and_is_refunded(
    core: CleanAir, alice: Caller
) -> None:
    plan_id = submit(core, alice, start=Point(ORIGIN.lat - 0.01, ORIGIN.lon))
    assert run(core) is not None
    plan = core.poll_plan(poller(core, alice), plan_id)
    assert plan.status is PlanStatus.FAILED
    assert plan.error == "No street network covers the start and the end"
    assert core.quota(alice).used == 0


def test_without_networks_every_plan_fails_and_is_refunded(
    store: Store, clock: ManualClock, air: CountingAir
) -> None:
    policy = Policy(credits=CreditLimits(monthly=1000, daily=100))
    core = CleanAir(store, TokenKeys(generate_key()), policy, clock, sources=Sources(air))
    alice = paired(core)
    plan_id = submit(core, alice)
    assert run(core) is not None
    plan = core.poll_plan(poller(core, alice), plan_id)
    assert plan.status is PlanStatus.FAILED
    assert plan.error == "No street network is loaded"
    assert core.quota(alice).used == 0


def test_an_air_quality_outage_fails_the_plan_and_refunds_it(
    core: CleanAir, alice: Caller, air: CountingAir
) -> None:
    plan_id = submit(core, alice)
    air.fail = True
    assert run(core) is not None
    assert air.calls > 0
    plan = core.poll_plan(poller(core, alice), plan_id)
    assert plan.status is PlanStatus.FAILED
    assert plan.error
    assert "unavailable" in plan.error
    assert core.quota(alice).used == 0


def test_a_plan_is_refunded_only_once(core: CleanAir, alice: Caller) -> None:
    failing = submit(core, alice, start=Point(ORIGIN.lat - 0.01, ORIGIN.lon))
    kept = submit(core, alice)
    plan = core.store.get_plan(failing)
    assert plan is not None
    failed = asyncio.run(core.run_plan(plan))
    assert failed is not None
    assert (failed.status, failed.error) == (
        PlanStatus.FAILED,
        "No street network covers the start and the end",
    )
    # A second worker with the same plan in hand: nothing stored, and it is told so.
    assert asyncio.run(core.run_plan(plan)) is None
    assert core.quota(alice).used == PLAN_COST
    assert status(core, kept) is PlanStatus.PENDING


# -- pruning ----------------------------------------------------------------------------------


def test_finished_plans_are_pruned_after_the_retention_period(
    core: CleanAir, alice: Caller, clock: ManualClock
) -> None:
    old = submit(core, alice)
    old_failed = submit(core, alice, start=Point(ORIGIN.lat - 0.01, ORIGIN.lon))
    run(core)
    run(core)
    clock.advance(RETENTION - 100)
    recent = submit(core, alice)
    run(core)
    clock.advance(101)  # the old ones finished RETENTION + 1 s ago, the recent one 101 s ago
    assert core.prune_plans() == 2
    for plan_id in (old, old_failed):
        assert core.store.get_plan(plan_id) is None
        with pytest.raises(NotFound):
            core.poll_plan(poller(core, alice), plan_id)
    assert core.poll_plan(poller(core, alice), recent).status is PlanStatus.COMPLETED
    assert core.prune_plans() == 0


def test_a_plan_is_kept_for_exactly_the_retention_period(
    core: CleanAir, alice: Caller, clock: ManualClock
) -> None:
    plan_id = submit(core, alice)
    run(core)
    clock.advance(RETENTION)
    assert core.prune_plans() == 0
    assert core.poll_plan(poller(core, alice), plan_id).status is PlanStatus.COMPLETED
    clock.advance(1)
    assert core.prune_plans() == 1


def test_pending_plans_are_never_pruned(core: CleanAir, alice: Caller, clock: ManualClock) -> None:
    leased = submit(core, alice)
    clock.advance(1)
    waiting = submit(core, alice)
    claimed = core.claim_next_plan()  # the older one is being worked on
    assert claimed is not None
    assert claimed.id == leased
    clock.advance(RETENTION * 3)
    assert core.prune_plans() == 0
    assert status(core, waiting) is PlanStatus.PENDING
    assert status(core, leased) is PlanStatus.PENDING


def test_the_retention_period_is_the_policys(
    store: Store, clock: ManualClock, air: CountingAir
) -> None:
    core = make_core(store, clock, air, retention=60)
    alice = paired(core)
    plan_id = submit(core, alice)
    run(core)
    clock.advance(61)
    assert core.prune_plans() == 1
    assert core.store.get_plan(plan_id) is None


def test_pruning_keeps_the_charge(core: CleanAir, alice: Caller, clock: ManualClock) -> None:
    submit(core, alice)
    run(core)
    clock.advance(RETENTION + 1)
    core.prune_plans()
    assert core.quota(alice).used == PLAN_COST


# -- ownership in the core --------------------------------------------------------------------


def test_partner_connections_cannot_submit_plans_to_the_core(core: CleanAir) -> None:
    core.add_partner("acme")
    issued = core.issue_partner_token("acme", "integration", [Scope.ROUTES_PLAN])
    partner = core.authenticate(issued.token)
    with pytest.raises(PartnerConnectionRefused):
        submit(core, partner)
    assert core.claim_next_plan() is None
    assert core.quota(partner).used == 0


def test_polling_in_the_core_needs_the_scope(core: CleanAir, alice: Caller) -> None:
    plan_id = submit(core, alice)
    limited = Caller(uuid.uuid4(), alice.owner, frozenset({Scope.AQ_READ}))
    with pytest.raises(MissingScope):
        core.poll_plan(poller(core, limited), plan_id)


def test_plan_use_cases_refuse_a_proof_made_for_other_checks(core: CleanAir, alice: Caller) -> None:
    plan_id = submit(core, alice)
    not_user_checked = core.authorize(alice, Scope.ROUTES_PLAN)
    with pytest.raises(TypeError, match="user_owned=True"):
        core.submit_plan(
            not_user_checked, start=at(0, 0), end=at(0, 5), activity=PlanActivityType.WALKING
        )
    with pytest.raises(TypeError, match="ROUTES_PLAN"):
        core.poll_plan(core.authorize(alice, Scope.AQ_READ), plan_id)
    assert core.quota(alice).used == PLAN_COST


def test_only_the_owning_user_may_poll(core: CleanAir, alice: Caller) -> None:
    plan_id = submit(core, alice)
    bob = paired(core, "bob")
    with pytest.raises(NotFound):
        core.poll_plan(poller(core, bob), plan_id)
    with pytest.raises(NotFound):
        core.poll_plan(poller(core, alice), uuid.uuid4())
    assert core.poll_plan(poller(core, alice), plan_id).id == plan_id


# -- the facade for embedders -----------------------------------------------------------------


def test_working_on_a_plan_returns_it_as_it_ended(core: CleanAir, alice: Caller) -> None:
    plan_id = submit(core, alice)

    ended = run(core)

    assert ended is not None
    assert ended.id == plan_id
    assert ended.status is PlanStatus.COMPLETED
    assert ended.result is not None
    assert ended.finished_at == NOW
    assert ended == core.poll_plan(poller(core, alice), plan_id)


def test_a_failed_plan_is_returned_failed(core: CleanAir, alice: Caller, air: CountingAir) -> None:
    plan_id = submit(core, alice)
    air.fail = True

    ended = run(core)

    assert ended is not None
    assert ended.id == plan_id
    assert ended.status is PlanStatus.FAILED
    assert ended.error
    assert ended == core.poll_plan(poller(core, alice), plan_id)


def test_a_plan_taken_over_meanwhile_is_returned_as_the_store_holds_it(
    store: Store, clock: ManualClock
) -> None:
    """This worker's claim goes stale while it plans (its lease ran out, another worker took
    the plan and finished it): it stores nothing, and answers with the plan as it ended."""

    other_worker: list[CleanAir] = []  # the same service, standing in for another worker

    class TakenOverOnce(CountingAir):
        async def concentrations(self, samples: Sequence[Sample]) -> list[Concentrations]:
            if self.calls == 0:
                self.calls += 1
                clock.advance(LEASE + 1)
                other = other_worker[0].claim_next_plan()
                assert other is not None
                await other_worker[0].run_plan(other)
            return await super().concentrations(samples)

    core = make_core(store, clock, TakenOverOnce())
    other_worker.append(core)
    plan_id = submit(core, paired(core))

    ended = run(core)

    assert ended is not None
    assert ended.id == plan_id
    assert (ended.status, ended.claims) == (PlanStatus.COMPLETED, 2)  # the other's claim
    assert ended == core.store.get_plan(plan_id)


@pytest.mark.parametrize("activity", ["walking", "cycling", "running"])
def test_a_plan_takes_the_contracts_activity_string(
    core: CleanAir, alice: Caller, activity: str
) -> None:
    plan_id = core.submit_plan(
        core.authorize(alice, Scope.ROUTES_PLAN, user_owned=True),
        start=at(0, 0),
        end=at(0, 5),
        activity=activity,
    )
    ended = run(core)
    assert ended is not None
    assert ended.status is PlanStatus.COMPLETED
    stored = core.store.get_plan(plan_id)
    assert stored is not None
    assert stored.request.activity is PlanActivityType(activity)


@pytest.mark.parametrize("activity", ["Walking", "swimming", ""])
def test_an_activity_outside_the_contract_is_unprocessable_and_free(
    core: CleanAir, alice: Caller, activity: str
) -> None:
    with pytest.raises(Unprocessable):
        core.submit_plan(
            core.authorize(alice, Scope.ROUTES_PLAN, user_owned=True),
            start=at(0, 0),
            end=at(0, 5),
            activity=activity,
        )
    assert core.quota(alice).used == 0
    assert core.claim_next_plan() is None

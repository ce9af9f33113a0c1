"""Route plans as stored work: their lifecycle (contract 3.1) and the storage port.

Two kinds of plan share the lifecycle, the store and the workers: a route plan (contract
4.5) and a departures plan (the extension's best time to go: the same trip planned at every
start time of a window, `cleanair_core.routes.departures`).

A plan is submitted `pending` (its 25 credits debited in the same transaction), then taken by
one worker at a time under a lease, and ends `completed` with its result or `failed` with a
readable error; a plan the planner rejects is refunded in the same transaction that fails it.
A worker that dies leaves its lease to expire, and the plan is taken again: nothing is lost on
a crash. Finished plans are pruned after a retention period.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Protocol, TypeAlias

import attrs

from cleanair_core.credits.ledger import Billable, CreditLedger, CreditLimits, Debit
from cleanair_core.errors import PlanRejected, SourceUnavailable, Unprocessable, Violation
from cleanair_core.geo import Point
from cleanair_core.routes.network import PlanActivityType
from cleanair_core.routes.results import DeparturesResult, PlanResult
from cleanair_core.routes.times import as_utc

#: The longest straight-line distance between start and end (contract section 8).
MAX_PLAN_DISTANCE_M = 15_000.0
#: Plan polls per minute per connection (contract section 8).
POLLS_PER_MINUTE = 60
#: The error of a plan whose submission was never answered (its process died after storing
#: it): nobody knows its id, so it is failed and refunded rather than planned for nobody.
UNDELIVERED_PLAN_ERROR = "The submission was never answered; the plan was refunded"
REPEATED_FAILURE_ERROR = "Planning failed repeatedly; the plan was refunded"
NO_NETWORK_ERROR = "No street network is loaded"
SOURCE_OUTAGE_ERROR = "Air-quality data is unavailable; the plan was refunded"
INTERNAL_FAILURE_ERROR = "Planning failed because of an internal error; refunded"


class PlanStatus(StrEnum):
    PENDING = "pending"
    COMPLETED = "completed"
    FAILED = "failed"


@attrs.frozen
class PlanRequest:
    """What was asked: `start_time` is resolved at submission (UTC; now when not given)."""

    start: Point
    end: Point
    activity: PlanActivityType
    start_time: datetime


#: Candidate start times are this far apart unless the request says otherwise.
DEFAULT_STEP = timedelta(minutes=30)
#: The shortest and longest step: under 5 minutes the air barely changes between
#: candidates (the sources' values are hourly); over 4 hours whole rush hours are skipped.
MIN_STEP = timedelta(minutes=5)
MAX_STEP = timedelta(minutes=240)
#: The widest window of start times: at most 289 plans (24 h at 5 minute steps).
MAX_SPAN = timedelta(hours=24)


def _aware_utc(at: datetime) -> datetime:
    if at.tzinfo is None or at.utcoffset() is None:
        # A start time without a zone is ambiguous.
        raise Unprocessable(violations=[Violation("", "format", "times must have a UTC offset")])
    return as_utc(at)


_LATEST_BEFORE = Violation("latest", "minimum", "must not be before earliest")
_LATEST_TOO_FAR = Violation(
    "latest", "maximum", f"must be at most {MAX_SPAN // timedelta(hours=1)} hours after earliest"
)
_STEP_SHORT = Violation(
    "step", "minimum", f"must be at least {MIN_STEP // timedelta(minutes=1)} minutes"
)
_STEP_LONG = Violation(
    "step", "maximum", f"must be at most {MAX_STEP // timedelta(minutes=1)} minutes"
)


@attrs.frozen
class DeparturesRequest:
    """A trip and the window of start times to choose from (timezone-aware, kept in UTC).

    Raises Unprocessable on construction when a time has no timezone, `earliest` is after
    `latest`, they are over MAX_SPAN apart, or `step` is outside MIN_STEP..MAX_STEP.
    """

    start: Point
    end: Point
    activity: PlanActivityType
    earliest: datetime = attrs.field(converter=_aware_utc)
    latest: datetime = attrs.field(converter=_aware_utc)
    step: timedelta = DEFAULT_STEP

    def __attrs_post_init__(self) -> None:
        # The span, not `earliest + MAX_SPAN`: that overflows for an `earliest` in year 9999.
        if self.latest < self.earliest:
            raise Unprocessable(violations=[_LATEST_BEFORE])
        if self.latest - self.earliest > MAX_SPAN:
            raise Unprocessable(violations=[_LATEST_TOO_FAR])
        if self.step < MIN_STEP:
            raise Unprocessable(violations=[_STEP_SHORT])
        if self.step > MAX_STEP:
            raise Unprocessable(violations=[_STEP_LONG])

    @property
    def start_times(self) -> list[datetime]:
        """`earliest`, then every `step` after it up to `latest` (included when on a step)."""
        count = (self.latest - self.earliest) // self.step + 1
        return [self.earliest + k * self.step for k in range(count)]


class PlanKind(StrEnum):
    """What a plan computes: cleaner routes, or the best time to go."""

    ROUTES = "routes"
    DEPARTURES = "departures"


#: What a plan's kind is charged as (both 25 credits; the label tells them apart in metrics).
BILLABLES = {PlanKind.ROUTES: Billable.ROUTE_PLAN, PlanKind.DEPARTURES: Billable.ROUTE_DEPARTURES}

AnyPlanRequest: TypeAlias = PlanRequest | DeparturesRequest
AnyPlanResult: TypeAlias = PlanResult | DeparturesResult


def kind_of(request: AnyPlanRequest) -> PlanKind:
    """The kind of plan `request` asks for."""
    return PlanKind.DEPARTURES if isinstance(request, DeparturesRequest) else PlanKind.ROUTES


@attrs.frozen
class Plan:
    """One stored plan; `result` is set once it is completed."""

    id: uuid.UUID
    owner: str  # the user's name: plans are user-owned only
    connection_id: str
    request: AnyPlanRequest
    status: PlanStatus
    created_at: datetime
    ledger_entry: int | None = None  # the debit to refund if the plan is rejected
    result: AnyPlanResult | None = None
    error: str | None = None
    finished_at: datetime | None = None
    #: Claims that count against `Policy.max_plan_attempts`: a hand-back gives its one back.
    attempts: int = 0
    lease_until: datetime | None = None
    #: Times a worker has taken it, hand-backs included: it only ever grows, so it is the
    #: fencing token of the latest claim (see `on_claim`). `attempts` cannot be: a hand-back
    #: lowers it, and an old claim's number would come round again.
    claims: int = 0

    @property
    def kind(self) -> PlanKind:
        return kind_of(self.request)


def check_new_plan(plan: Plan) -> None:
    """Raise ValueError unless `plan` is as submitted: pending, never claimed or finished."""
    state = (plan.status, plan.result, plan.error, plan.finished_at, plan.attempts, plan.claims)
    if state != (PlanStatus.PENDING, None, None, None, 0, 0) or plan.lease_until is not None:
        raise ValueError("a submitted plan is new: pending, never claimed, never finished")


# The lifecycle's transitions. The in-memory adapter applies these functions; an SQL adapter
# states the same rules in its statements (the state machines in the storage tests hold the
# adapters to the same outcomes).


def is_claimable(plan: Plan, now: datetime) -> bool:
    """Pending, and no live worker holds it (its lease is absent or has run out)."""
    return plan.status is PlanStatus.PENDING and (
        plan.lease_until is None or plan.lease_until <= now
    )


def claim_order(plan: Plan) -> tuple[datetime, str]:
    """Workers take the oldest claimable plan first; ties go by the id's text."""
    return plan.created_at, str(plan.id)


def claimed(plan: Plan, now: datetime, lease: timedelta) -> Plan:
    """A plan taken by a worker: leased until `now + lease`, one more attempt counted and a
    new fencing token (`claims`)."""
    return attrs.evolve(
        plan, lease_until=now + lease, attempts=plan.attempts + 1, claims=plan.claims + 1
    )


def on_claim(plan: Plan, claim: int | None) -> bool:
    """Whether a worker holding claim number `claim` may still change `plan` (None: no claim
    is checked, as for the API and the sweeps)."""
    return plan.status is PlanStatus.PENDING and (claim is None or plan.claims == claim)


def handed_back(plan: Plan) -> Plan:
    """A claimed plan its worker gives up without failing (it is stopping): free for the next
    worker at once, and the attempt not counted against it. `claims` stays: the next claim
    gets a number no earlier claim had."""
    return attrs.evolve(plan, lease_until=None, attempts=max(0, plan.attempts - 1))


def completed(plan: Plan, result: AnyPlanResult, now: datetime) -> Plan:
    """A pending plan finished with its result; its lease is released."""
    return attrs.evolve(
        plan, status=PlanStatus.COMPLETED, result=result, finished_at=now, lease_until=None
    )


def failed(plan: Plan, error: str, now: datetime) -> Plan:
    """A pending plan finished as failed with a readable error; its lease is released."""
    return attrs.evolve(
        plan, status=PlanStatus.FAILED, error=error, finished_at=now, lease_until=None
    )


class PlanStore(Protocol):
    """Plans shared by every process on one database."""

    def add_plan(self, plan: Plan) -> None:
        """Store a new plan (see `check_new_plan`); DuplicateEntry when its id is taken."""
        ...

    def get_plan(self, plan_id: uuid.UUID) -> Plan | None: ...

    def claim_plan(self, now: datetime, lease: timedelta) -> Plan | None:
        """Take the oldest pending plan whose lease is absent or expired, leasing it until
        `now + lease`, counting the attempt and the claim (`claimed`); None when there is
        none. Two callers never get the same plan while its lease runs."""
        ...

    # `claim`, where a worker passes it, is its claim's fencing token (the plan's `claims`
    # when it was claimed): the change is made only while the plan is still on that claim,
    # so a worker whose lease ran out, and whose plan another worker took since (and maybe
    # handed back), can no longer extend, hand back or finish it (`on_claim`).

    def renew_lease(self, plan_id: uuid.UUID, until: datetime, claim: int | None = None) -> bool:
        """Extend a pending plan's lease (a worker still at it); False once it is finished
        or, with `claim`, taken by another claim."""
        ...

    def release_plan(self, plan_id: uuid.UUID, claim: int | None = None) -> bool:
        """Hand a pending plan back (`handed_back`): its worker is stopping; False if it is
        not pending or, with `claim`, taken by another claim."""
        ...

    def complete_plan(
        self, plan_id: uuid.UUID, result: AnyPlanResult, now: datetime, claim: int | None = None
    ) -> bool:
        """Finish a pending plan with its result (of the plan's kind); False if it was not
        pending or, with `claim`, taken by another claim."""
        ...

    def fail_plan(
        self, plan_id: uuid.UUID, error: str, now: datetime, claim: int | None = None
    ) -> Plan | None:
        """Finish a pending plan as failed; the failed plan, or None if it was not pending
        or, with `claim`, taken by another claim."""
        ...

    def prune_plans(self, finished_before: datetime) -> int:
        """Delete plans finished before `finished_before`; returns how many."""
        ...


class Subscription(Protocol):
    """A running subscription; `close()` ends it and frees what it holds."""

    def close(self) -> None: ...


class PlanWakeups(Protocol):
    """Tells idle workers at once that a plan can be claimed (submitted or handed back), in
    whichever process or machine that happened. Without it, idle workers look again after
    their idle wait."""

    def subscribe(self, wake: Callable[[], None]) -> Subscription:
        """Call `wake` (from any thread) whenever a plan becomes claimable, until the
        subscription is closed."""
        ...


class PlanBook(PlanStore, CreditLedger, Protocol):
    """The plans and the ledger their debits live in, with one unit of work over both."""

    def transaction(self) -> AbstractContextManager[PlanBook]:
        """A unit of work: every call made on the store it yields, until the block ends, is
        one atomic transaction across every process sharing the store; an exception leaving
        the block undoes all of them."""
        ...


def submit(book: PlanBook, plan: Plan, debit: Debit, limits: CreditLimits) -> Plan:
    """Debit `debit` and store `plan` (pending) as one unit of work; the plan returned
    carries the ledger entry. Raises CreditsExhausted (nothing stored) when the debit does
    not fit, DuplicateEntry (nothing debited) when the plan's id is taken."""
    check_new_plan(plan)
    with book.transaction() as work:
        entry = work.debit(debit, limits)
        stored = attrs.evolve(plan, ledger_entry=entry.id)
        work.add_plan(stored)
    return stored


def fail(
    book: PlanBook,
    plan_id: uuid.UUID,
    error: str,
    now: datetime,
    *,
    refund: bool,
    claim: int | None = None,
) -> Refunded | None:
    """Finish a pending plan as failed and, when `refund`, refund its debit, as one unit of
    work; None (nothing changed) when it was not pending (or not on claim `claim`)."""
    with book.transaction() as work:
        failed = work.fail_plan(plan_id, error, now, claim)
        if failed is None:
            return None
        reversal = None
        if refund and failed.ledger_entry is not None:
            reversal = work.refund(failed.ledger_entry, now)
    return Refunded(0 if reversal is None else -reversal.amount)


@attrs.frozen
class Refunded:
    """What failing a plan gave back: `credits` (0 when it had no debit to refund)."""

    credits: int


def gives_up(plan: Plan, max_attempts: int) -> bool:
    """Whether a claimed plan has been tried too often: its workers died `max_attempts`
    times, so it fails (refunded) instead of killing another worker."""
    return plan.attempts > max_attempts


def is_expected_failure(error: Exception) -> bool:
    """A rejected plan or a source outage: part of planning's life, not a bug to log."""
    return isinstance(error, PlanRejected | SourceUnavailable)


def failure_reason(error: Exception) -> str:
    """The reason a poll shows for a plan that raised `error` (every failure is refunded).

    A rejected plan says why in its own words; an outage and an internal error say only
    that, never the exception's text.
    """
    if isinstance(error, PlanRejected):
        return error.detail
    if isinstance(error, SourceUnavailable):
        return SOURCE_OUTAGE_ERROR
    return INTERNAL_FAILURE_ERROR

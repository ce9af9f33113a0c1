"""Route use cases: the air along a route (contract 4.4) and route plans (3.1), worker side too."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta

from cleanair_core.access.accounts import OwnerKind
from cleanair_core.access.connections import Authorized
from cleanair_core.access.scopes import Scope
from cleanair_core.air.activities import ActivityType, speed_m_s
from cleanair_core.air.exposure import EnvironmentType
from cleanair_core.air.point_score import current_hour
from cleanair_core.air.quality_source import AirQualitySource, GriddedAir
from cleanair_core.credits.ledger import Billable
from cleanair_core.errors import NotFound, OperatorError, PlanRejected, PlanTooLong, Unprocessable
from cleanair_core.geo import Point, distance_m
from cleanair_core.routes import plans
from cleanair_core.routes.departures import check_departures, plan_departures
from cleanair_core.routes.enrichment import MAX_WAYPOINTS, EnrichedRoute, Waypoint
from cleanair_core.routes.enrichment import enrich_route as enrich_route_at
from cleanair_core.routes.network import (
    NetworkSummary,
    PlanActivityType,
    StreetNetwork,
    StreetNetworks,
)
from cleanair_core.routes.planner import plan_routes
from cleanair_core.routes.plans import (
    BILLABLES,
    DEFAULT_STEP,
    MAX_PLAN_DISTANCE_M,
    NO_NETWORK_ERROR,
    REPEATED_FAILURE_ERROR,
    AnyPlanRequest,
    AnyPlanResult,
    DeparturesRequest,
    Plan,
    PlanKind,
    PlanRequest,
    PlanStatus,
    failure_reason,
    gives_up,
    is_expected_failure,
)
from cleanair_core.routes.times import as_utc, check_data_window, waypoint_times
from cleanair_core.use_cases.context import Context, needs_upstream
from cleanair_core.use_cases.credits import PendingHit, charge, charged


async def enrich_route(
    ctx: Context,
    proof: Authorized,
    *,
    waypoints: Sequence[Waypoint],
    start_time: datetime | None = None,
    activity: ActivityType = ActivityType.OTHER,
    environment: EnvironmentType = EnvironmentType.OUTDOOR,
    pending: PendingHit | None = None,
) -> EnrichedRoute:
    """Measures at every waypoint at its own time and the route's summary (1 credit each).

    Times are the waypoints' own (a recorded track) or estimated from `start_time` at the
    activity's speed. Raises Unprocessable for 0 or over 100 waypoints, mixed times, no
    times and no `start_time`, or times going backwards; OutsideDataWindow when a time
    (or `start_time`) is over 30 days ago or beyond 84 hours ahead; neither is charged.
    SourceUnavailable (refunded) when no waypoint has data.
    """
    caller = proof.caller_for(Scope.AQ_ROUTES)
    if not 1 <= len(waypoints) <= MAX_WAYPOINTS:
        raise Unprocessable()
    points = [waypoint.point for waypoint in waypoints]
    times = waypoint_times(points, [w.time for w in waypoints], start_time, speed_m_s(activity))
    given = [as_utc(start_time)] if start_time is not None else []
    check_data_window(given + times, ctx.now())
    sources = ctx.require_sources()
    async with charged(
        ctx,
        caller,
        Billable.ROUTE_ENRICHMENT,
        upstream=needs_upstream(sources),
        units=len(waypoints),
        pending=pending,
    ):
        return await enrich_route_at(sources.air_quality, points, times, activity, environment)


def submit_plan(
    ctx: Context,
    proof: Authorized,
    *,
    start: Point,
    end: Point,
    activity: PlanActivityType,
    start_time: datetime | None = None,
) -> uuid.UUID:
    """Store a route plan as pending and charge 25 credits; returns its request id.

    Takes a proof from `authorize(caller, Scope.ROUTES_PLAN, user_owned=True)`. Raises
    PlanTooLong (not charged) when start and end are over 15 km apart, OutsideDataWindow
    (not charged) for a start time outside the window air data exists for, CreditsExhausted
    when it does not fit.
    """
    proof.caller_for(Scope.ROUTES_PLAN, user_owned=True)
    if distance_m(start, end) > MAX_PLAN_DISTANCE_M:
        raise PlanTooLong()
    now = ctx.now()
    when = now if start_time is None else as_utc(start_time)
    check_data_window([when], now)
    return _submit(ctx, proof, PlanRequest(start, end, activity, when))


def submit_departures(
    ctx: Context,
    proof: Authorized,
    *,
    start: Point,
    end: Point,
    activity: PlanActivityType,
    earliest: datetime,
    latest: datetime,
    step: timedelta = DEFAULT_STEP,
) -> uuid.UUID:
    """Store a departures plan (the trip at every start time from `earliest` to `latest`,
    `step` apart) as pending and charge 25 credits, as a route plan; returns its request id.

    Takes the proof a route plan takes. Raises Unprocessable for a window `DeparturesRequest`
    refuses (a time without a zone, `latest` before `earliest` or over 24 hours after it, a
    step outside 5 to 240 minutes); PlanTooLong and OutsideDataWindow (for any start time of
    the window) as a route plan does; none of them charged. CreditsExhausted when it does
    not fit.
    """
    proof.caller_for(Scope.ROUTES_PLAN, user_owned=True)
    request = DeparturesRequest(start, end, activity, earliest, latest, step)
    check_departures(request, ctx.now())
    return _submit(ctx, proof, request)


def _submit(ctx: Context, proof: Authorized, request: AnyPlanRequest) -> uuid.UUID:
    caller = proof.caller_for(Scope.ROUTES_PLAN, user_owned=True)
    plan = Plan(
        id=uuid.uuid4(),
        owner=caller.owner.name,
        connection_id=caller.connection_key,
        request=request,
        status=PlanStatus.PENDING,
        created_at=ctx.now(),
    )
    billable = BILLABLES[plan.kind]
    held = charge(ctx, caller, billable)
    stored = plans.submit(ctx.store, plan, held.debit, ctx.policy.credits)
    if stored.ledger_entry is not None:  # final now that the answer is on its way
        ctx.store.confirm_charge(stored.ledger_entry)
    ctx.metrics.credits_charged(billable, held.debit.amount)
    return stored.id


def poll_plan(
    ctx: Context, proof: Authorized, plan_id: uuid.UUID, kind: PlanKind = PlanKind.ROUTES
) -> Plan:
    """The plan `plan_id` of `kind` if it belongs to the caller's user (free; not
    premium-gated: takes a proof from `authorize(caller, Scope.ROUTES_PLAN, premium=False)`).
    Raises NotFound for an unknown plan, another user's, or one of another kind (each kind
    is polled at its own endpoint)."""
    caller = proof.caller_for(Scope.ROUTES_PLAN, premium=False)
    plan = ctx.store.get_plan(plan_id)
    if plan is None or caller.owner.kind is not OwnerKind.USER:
        raise NotFound()
    if plan.owner != caller.owner.name or plan.kind is not kind:
        raise NotFound()  # indistinguishable from unknown, on purpose
    return plan


def claim_next_plan(ctx: Context) -> Plan | None:
    """Take the oldest pending plan no live worker holds (None when there is none)."""
    return ctx.store.claim_plan(ctx.now(), ctx.policy.plan_lease)


async def run_plan(ctx: Context, plan: Plan) -> Plan | None:
    """Plan a claimed plan and store its outcome; the plan as finished (completed, or failed
    with the reason a poll shows), or None when nothing was stored because its claim had gone
    stale (another worker took it since).

    Every failure is refunded, with the reason `failure_reason` gives; so is a plan whose
    worker died `max_plan_attempts` times. An unexpected error propagates afterwards for the
    caller to log. The path searches and the store's writes run on the context's offload.
    """
    started = ctx.now()
    if gives_up(plan, ctx.policy.max_plan_attempts):
        return await ctx.offload(lambda: _fail(ctx, plan, REPEATED_FAILURE_ERROR, started))
    sources = ctx.sources
    try:
        if sources is None or sources.networks is None:
            raise PlanRejected(NO_NETWORK_ERROR)
        result = await _planned(ctx, plan.request, sources.networks, sources.air_quality)
    except Exception as error:
        reason = failure_reason(error)
        outcome = await ctx.offload(lambda: _fail(ctx, plan, reason, started))
        if not is_expected_failure(error):
            raise
        return outcome
    return await ctx.offload(lambda: _complete(ctx, plan, result, started))


async def _planned(
    ctx: Context, request: AnyPlanRequest, networks: StreetNetworks, source: AirQualitySource
) -> AnyPlanResult:
    if isinstance(request, DeparturesRequest):
        return await plan_departures(request, networks, source, ctx.offload, ctx.network_air)
    return await plan_routes(request, networks, source, ctx.offload, ctx.network_air)


async def work_on_next_plan(ctx: Context) -> Plan | None:
    """Claim and run one plan; None when there was none.

    The plan as it ended: completed with its result or failed with its error, as a poll now
    shows it (not as claimed, still pending). When the claim went stale meanwhile (another
    worker took the plan over), the plan as the store holds it now.
    """
    plan = await ctx.offload(lambda: claim_next_plan(ctx))
    if plan is None:
        return None
    ended = await run_plan(ctx, plan)
    if ended is not None:
        return ended
    now_stored = await ctx.offload(lambda: ctx.store.get_plan(plan.id))
    return plan if now_stored is None else now_stored


def renew_plan_lease(ctx: Context, plan: Plan) -> bool:
    """Keep holding a claimed plan being worked on (call well within the lease); False once
    it is finished or another worker took it (the lease ran out)."""
    return ctx.store.renew_lease(plan.id, ctx.now() + ctx.policy.plan_lease, plan.claims)


def release_plan(ctx: Context, plan: Plan) -> bool:
    """Hand back a claimed plan this worker will not finish (it is stopping)."""
    return ctx.store.release_plan(plan.id, plan.claims)


def prune_plans(ctx: Context) -> int:
    """Delete plans finished longer ago than the retention period."""
    cutoff = ctx.now() - timedelta(seconds=ctx.policy.plan_retention_seconds)
    return ctx.store.prune_plans(cutoff)


def _complete(ctx: Context, plan: Plan, result: AnyPlanResult, started: datetime) -> Plan | None:
    now = ctx.now()
    if not ctx.store.complete_plan(plan.id, result, now, plan.claims):
        return None
    ctx.metrics.plan_finished(PlanStatus.COMPLETED, (now - started).total_seconds())
    return plans.completed(plan, result, now)


def _fail(ctx: Context, plan: Plan, reason: str, started: datetime) -> Plan | None:
    # Only the worker that finishes the plan reports it: one that lost its claim (another
    # took the plan over) changed nothing.
    now = ctx.now()
    refunded = plans.fail(ctx.store, plan.id, reason, now, refund=True, claim=plan.claims)
    if refunded is None:
        return None
    if refunded.credits:
        ctx.metrics.credits_refunded(BILLABLES[plan.kind], refunded.credits)
    ctx.metrics.plan_finished(PlanStatus.FAILED, (now - started).total_seconds())
    return plans.failed(plan, reason, now)


#: How long before an hour turns its air is prepared at the nodes of every loaded network.
AIR_PREPARATION_LEAD = timedelta(minutes=10)


def seconds_until_air_preparation(ctx: Context) -> float:
    """Seconds until the next hours' node air should be prepared (`prepare_network_air`):
    AIR_PREPARATION_LEAD before the source's next hour begins; 0 when that time has come."""
    step = max(1, _source_interval(ctx))
    now = ctx.now()
    turn = current_hour(now, step) + timedelta(seconds=step)
    return max(0.0, (turn - AIR_PREPARATION_LEAD - now).total_seconds())


async def prepare_network_air(ctx: Context) -> int:
    """Compute, before the hour turns, the node air a plan starting in the next hour needs:
    that hour's and the one after it (a walk is weighed between the two; see
    `plan_air.walked_air`), at every node of every loaded network, on the offload. Only a
    source that computes its values (`GriddedAir`) is prepared: one that waits on the
    network would be asked for every node of a city each hour for plans that may not come.
    Returns how many network-hours were prepared."""
    sources = ctx.sources
    if sources is None or sources.networks is None:
        return 0
    source = sources.air_quality
    if not isinstance(source, GriddedAir):
        return 0
    step = max(1, source.update_interval)
    turn = current_hour(ctx.now(), step) + timedelta(seconds=step)
    prepared = 0
    for network in sources.networks.loaded:
        for hour in (turn, turn + timedelta(seconds=step)):
            await ctx.network_air.prepare(network, source, hour, ctx.offload)
            prepared += 1
    return prepared


def _source_interval(ctx: Context) -> int:
    return 3600 if ctx.sources is None else ctx.sources.air_quality.update_interval


def save_network(ctx: Context, network: StreetNetwork) -> None:
    """Store an imported street network, replacing one of the same name."""
    ctx.store.save_network(network)


def network_summaries(ctx: Context) -> list[NetworkSummary]:
    return ctx.store.network_summaries()


def delete_network(ctx: Context, name: str) -> None:
    if not ctx.store.delete_network(name):
        raise OperatorError(f"no network {name}")

"""Alert rounds, the worker's side of alerts (issue 32): evaluate the subscriptions that are
due, and store what each evaluation decided with its charge, in one unit of work.

A worker calls `evaluate_due` until it claims nothing, then waits. Each call claims a batch
of due subscriptions under a lease (`EvaluationClaims`), asks the air of their cells once
(`evaluation.fetch_cell_air`), decides on the offload (`evaluation.decide`), and stores, a
chunk of subscriptions per transaction: the new state by compare-and-set with when the
subscription is next due (`rounds.next_due`), each event's charge (`costs.charge`), and the
events with their bodies in the feed and outbox (`AlertOutbox.record_alert_events`). An
event is stored with its charge and the state that decided it, or not at all: a crash
between the decision and the commit leaves the subscription due again, and its events,
whose ids are stable, are decided again.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta

import attrs

from cleanair_core.air.places import PlaceNamer
from cleanair_core.alerts.costs import Charging, Verdict, alert_limits, charge, event_cost
from cleanair_core.alerts.evaluation import (
    Cell,
    CellAir,
    air_wanted,
    cell_of,
    decide,
    fetch_cell_air,
    index_of,
)
from cleanair_core.alerts.events import AlertEvent, EventKind, observed_event_id
from cleanair_core.alerts.messages import TripAdvice, event_message, pool_exhausted_message
from cleanair_core.alerts.outbox import NewEvent
from cleanair_core.alerts.rounds import ClaimedSubscription, EvaluationFinish, next_due
from cleanair_core.alerts.subscriptions import Place, Subscription, Trip
from cleanair_core.alerts.trip_routes import TripRoute, direct_route, route_of_plan
from cleanair_core.alerts.trips import (
    TripAir,
    decide_trip,
    next_trip_due,
    stored_route,
    trip_air_wanted,
)
from cleanair_core.credits.ledger import CreditLimits, Debit, Usage, next_month_start
from cleanair_core.errors import CreditsExhausted, PlanRejected, PlanTooLong, SourceUnavailable
from cleanair_core.ports import Sources, Store
from cleanair_core.routes.planner import plan_routes
from cleanair_core.routes.plans import PlanRequest
from cleanair_core.use_cases.context import Context

#: Subscriptions one claim takes. On SQLite a claim holds the one write lock every charged
#: call waits on: `make bench` (section 19) measured score p99 during a round of 110,000 at
#: 368 ms with claims of 2,000 and 113 ms with claims of 500, the round 34-56 s against
#: 40-50 s. Scores matter more than a round's last seconds.
CLAIM_BATCH = 500
#: Subscriptions stored per transaction: one commit serves many, and a transaction never
#: holds the database for long.
WRITE_CHUNK = 250
#: The pause after each of a round's transactions. SQLite has one write lock and no queue:
#: a charged call waiting for it tries again every millisecond (`cleanair_storage.sqlite`'s
#: BUSY_POLL), and transactions back to back would leave it no moment to get in.
WRITE_PAUSE = 0.002
#: When the air source cannot answer, the claimed subscriptions are due again this soon.
SOURCE_RETRY = timedelta(minutes=5)
#: The ledger label alerts are charged under (`credits usage` shows it per label).
ALERTS_LABEL = "alerts"


@attrs.frozen
class RoundReport:
    """What one `evaluate_due` did: subscriptions `claimed`; events `recorded` (new in the
    feed); events `withheld` for want of credits; states `restarted` (unreadable ones
    replaced); outcomes `lost` (another worker took the claim over first)."""

    claimed: int = 0
    recorded: int = 0
    withheld: int = 0
    restarted: int = 0
    lost: int = 0


async def evaluate_due(ctx: Context, claimant: str, *, batch: int = CLAIM_BATCH) -> RoundReport:
    """Claim up to `batch` subscriptions due now for `claimant`, evaluate them and store each
    outcome; a report of what was done (nothing claimed: the caller may wait)."""
    store, now = ctx.store, ctx.now()
    # Far longer than a batch takes: only a dead worker's claims are taken over.
    lease_until = now + timedelta(seconds=ctx.policy.alert_lease_seconds)
    claims = await ctx.offload(
        lambda: store.claim_due_subscriptions(claimant, now, lease_until, batch)
    )
    if not claims:
        return RoundReport()
    sources = ctx.require_sources()
    try:
        routes = await _trip_routes(ctx, sources, claims, now)
        wanted = air_wanted((claim.subscription for claim in claims), now)
        for cell, forecast in trip_air_wanted(
            (
                (c.subscription, routes[c.subscription.id])
                for c in claims
                if c.subscription.id in routes
            ),
            now,
        ).items():
            wanted[cell] = wanted.get(cell, False) or forecast
        places = sources.places
        countries = await ctx.offload(lambda: _countries(places, wanted))
        air = await fetch_cell_air(sources.air_quality, wanted, now, offload=ctx.offload)
    except SourceUnavailable:
        # No hour is decided on air the source could not give: the claims are due again soon.
        retry = now + SOURCE_RETRY
        lost = await ctx.offload(lambda: _postpone(store, claimant, claims, retry))
        return RoundReport(claimed=len(claims), lost=lost)
    decisions = await ctx.offload(lambda: _decide(claims, routes, air, countries, now))
    report = await ctx.offload(lambda: _store_outcomes(ctx, claimant, claims, decisions, now))
    if report.recorded:
        ctx.metrics.alert_events("recorded", report.recorded)
    if report.withheld:
        ctx.metrics.alert_events("withheld", report.withheld)
    return report


def _countries(places: PlaceNamer | None, cells: Iterable[Cell]) -> dict[Cell, str | None]:
    if places is None:
        return {}
    return {cell: places.country_of(cell.centre) for cell in cells}


@attrs.frozen
class _Outcome:
    """One subscription's decision, whatever its target: the new state, the events, the
    index their category is on, and a trip event's advice by event id."""

    blob: str
    events: Sequence[AlertEvent]
    index: str
    advice: Mapping[uuid.UUID, TripAdvice]
    restarted: bool


async def _trip_routes(
    ctx: Context, sources: Sources, claims: Sequence[ClaimedSubscription], now: datetime
) -> dict[uuid.UUID, TripRoute]:
    """The usual route of each claimed trip: the one its state keeps, or, at its first
    evaluation, planned once as a route plan would be (the straight line where no street
    network covers it); SourceUnavailable when the air for planning cannot be had."""
    routes: dict[uuid.UUID, TripRoute] = {}
    for claim in claims:
        target = claim.subscription.target
        if not isinstance(target, Trip):
            continue
        route = stored_route(claim.state)
        if route is None:
            route = await _plan_route(ctx, sources, target, now)
        routes[claim.subscription.id] = route
    return routes


async def _plan_route(ctx: Context, sources: Sources, trip: Trip, now: datetime) -> TripRoute:
    if sources.networks is None:
        return direct_route(trip.start, trip.end)
    request = PlanRequest(trip.start, trip.end, trip.activity, now)
    try:
        result = await plan_routes(
            request, sources.networks, sources.air_quality, ctx.offload, ctx.network_air
        )
    except (PlanRejected, PlanTooLong):
        return direct_route(trip.start, trip.end)
    return route_of_plan(result)


def _decide(
    claims: Sequence[ClaimedSubscription],
    routes: Mapping[uuid.UUID, TripRoute],
    air: Mapping[Cell, CellAir],
    countries: Mapping[Cell, str | None],
    now: datetime,
) -> dict[uuid.UUID, _Outcome]:
    """Every claimed subscription's decision (CPU work, for the offload): places by
    `evaluation.decide`, trips by `trips.decide_trip` on one `TripAir` shared by all."""
    outcomes: dict[uuid.UUID, _Outcome] = {}
    places = [(c.subscription, c.state) for c in claims if c.subscription.id not in routes]
    by_id = {claim.subscription.id: claim.subscription for claim in claims}
    for decision in decide(places, air, countries, now):
        subscription = by_id[decision.subscription_id]
        index = _index_code(subscription, countries)
        outcomes[decision.subscription_id] = _Outcome(
            decision.blob, decision.events, index, {}, decision.restarted
        )
    trip_air = TripAir(air)
    for claim in claims:
        route = routes.get(claim.subscription.id)
        if route is None:
            continue
        trip = decide_trip(claim.subscription, claim.state, route, trip_air, countries, now)
        if trip is not None:
            outcomes[trip.subscription_id] = _Outcome(
                trip.blob, trip.events, trip.index, trip.advice, trip.restarted
            )
    return outcomes


def _postpone(
    store: Store, claimant: str, claims: Sequence[ClaimedSubscription], until: datetime
) -> int:
    finishes = [
        EvaluationFinish(claim.subscription.id, claim.state.version, None, until)
        for claim in claims
    ]
    with store.transaction() as tx:
        stored = tx.finish_evaluations(claimant, finishes)
    return len(claims) - len(stored)


def _store_outcomes(
    ctx: Context,
    claimant: str,
    claims: Sequence[ClaimedSubscription],
    decided: Mapping[uuid.UUID, _Outcome],
    now: datetime,
) -> RoundReport:
    report = RoundReport(claimed=len(claims))
    # Recording an event locks its owner's feed end and credit windows until the commit.
    # Taken in claim order (cell, id), two workers' transactions, each over several owners,
    # would take them in different orders and deadlock (PostgreSQL then aborts one, whose
    # claims wait out their lease); in owner order they take them in one order.
    claims = sorted(claims, key=lambda claim: claim.subscription.owner)
    # Worked out before any transaction: on SQLite every charged call waits while one runs.
    finishes = [_finish(claim, decided.get(claim.subscription.id), now) for claim in claims]
    for first in range(0, len(claims), WRITE_CHUNK):
        chunk = claims[first : first + WRITE_CHUNK]
        with ctx.store.transaction() as tx:
            stored = tx.finish_evaluations(claimant, finishes[first : first + WRITE_CHUNK])
            report = attrs.evolve(report, lost=report.lost + len(chunk) - len(stored))
            for claim in chunk:
                subscription = claim.subscription
                decision = decided.get(subscription.id)
                if decision is None or subscription.id not in stored:
                    continue
                recorded, withheld = _record(ctx, tx, subscription, decision, now)
                report = attrs.evolve(
                    report,
                    recorded=report.recorded + recorded,
                    withheld=report.withheld + withheld,
                    restarted=report.restarted + decision.restarted,
                )
        time.sleep(WRITE_PAUSE)  # on the offload's thread, never the event loop's
    return report


def _finish(
    claim: ClaimedSubscription, decision: _Outcome | None, now: datetime
) -> EvaluationFinish:
    """What storing `claim`'s evaluation writes: the decided state (none decided: kept as it
    is) and when the subscription is due again by it."""
    subscription = claim.subscription
    blob = claim.state.blob if decision is None else decision.blob
    if isinstance(subscription.target, Trip):
        due = next_trip_due(subscription, blob, now)
    else:
        due = next_due(subscription, blob, now)
    return EvaluationFinish(
        subscription.id, claim.state.version, None if decision is None else decision.blob, due
    )


def _index_code(subscription: Subscription, countries: Mapping[Cell, str | None]) -> str:
    target = subscription.target
    cell = cell_of(target.point if isinstance(target, Place) else target.start)
    return index_of(subscription, countries.get(cell)).code


def _record(
    ctx: Context,
    tx: Store,
    subscription: Subscription,
    decision: _Outcome,
    now: datetime,
) -> tuple[int, int]:
    """Charge and record `events` of `subscription` in the transaction `tx`: each that the
    pool pays for, with its body, charged only if it is new (a state restarted from scratch
    may decide an event told before: it is neither told nor charged twice); for each the
    pool cannot pay, the pool-exhausted notice, recorded once by its stable id. An
    all-clear whose alert was withheld is dropped: its owner never heard of the episode.
    The numbers of events recorded and withheld."""
    owner, limits = subscription.owner, ctx.policy.credits
    recorded = withheld = 0
    for event in decision.events:
        if event.kind is EventKind.ALL_CLEAR and not _alert_told(tx, event):
            continue  # its alert was withheld: nothing to clear
        if tx.alert_event_recorded(event.id):
            continue  # told before (a restarted state decided it again): not charged twice
        cost = event_cost(event, subscription.target)
        verdict = charge(owner, tx.usage(owner, now), cost, now, limits)
        if verdict.verdict is Verdict.CHARGE and verdict.credits:
            # The debit, not the usage read above, decides: another worker's alert or the
            # owner's call may have spent the pool since (PostgreSQL reads committed rows
            # without waiting). Debited before recording, a refusal records nothing, and
            # the rest of the transaction stands (the ledger refuses within a savepoint).
            debit = Debit(owner, subscription.connection_id, ALERTS_LABEL, verdict.credits, now)
            try:
                tx.debit(debit, alert_limits(limits))
            except CreditsExhausted:
                verdict = _refused(owner, tx.usage(owner, now), cost, now, limits)
        if verdict.verdict is Verdict.WITHHOLD:
            withheld += 1
            if verdict.notice is not None:
                notice = pool_exhausted_message(
                    verdict.notice.id, now, next_month_start(now), subscription.id
                )
                tx.record_alert_events([_new_event(subscription, verdict.notice.id, notice, now)])
            continue
        advice = decision.advice.get(event.id)
        body = event_message(subscription, event, index=decision.index, trip=advice)
        # New (not recorded above, and only the claim's holder decides this subscription).
        if tx.record_alert_events([_new_event(subscription, event.id, body, now)]):
            recorded += 1
    return recorded, withheld


def _alert_told(tx: Store, all_clear: AlertEvent) -> bool:
    """Whether the alert an all-clear ends was recorded (not withheld for want of credits)."""
    if all_clear.episode is None:
        return True
    alert = observed_event_id(all_clear.subscription_id, all_clear.episode, EventKind.ALERT)
    return tx.alert_event_recorded(alert)


def _refused(owner: str, usage: Usage, cost: int, now: datetime, limits: CreditLimits) -> Charging:
    """The verdict on an event whose debit the ledger refused: withheld, with the notice of
    the pool as `usage` now shows it; with none should it show room again (a refund since):
    the ledger's word stands for this event."""
    verdict = charge(owner, usage, cost, now, limits)
    return verdict if verdict.verdict is Verdict.WITHHOLD else Charging(verdict=Verdict.WITHHOLD)


def _new_event(
    subscription: Subscription, event_id: uuid.UUID, body: str, now: datetime
) -> NewEvent:
    return NewEvent(
        event_id=event_id,
        owner=subscription.owner,
        subscription_id=subscription.id,
        payload=body,
        created_at=now,
        url=subscription.webhook_url,
    )

"""Evaluation rounds: which subscriptions are due for evaluation, claimed by the workers as
plans are (issue 32, "Evaluation at scale").

Every subscription carries the instant its next evaluation is due (at once when it is
created; then the next hour for the observed kind, the next sending time for the forecast
kind, as the evaluator says). A worker claims a batch of due subscriptions with a lease, in
cell order so that one evaluation of a cell's air serves every subscription in it, decides,
and finishes each with a compare-and-set on the state version it read. Two workers never
decide from one state: the claim is exclusive while its lease runs (`FOR UPDATE SKIP LOCKED`
on PostgreSQL), and a worker whose lease ran out and whose work was taken over finds its
compare-and-set refused. A killed worker's claims are taken over once their lease ends.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime, time, timedelta
from typing import Protocol

import attrs

from cleanair_core.alerts.alert_states import MalformedState, decode_state
from cleanair_core.alerts.evaluation import HOUR, cell_of, last_hour_end, send_instant
from cleanair_core.alerts.subscriptions import Observed, Place, StoredState, Subscription

#: The longest a trip subscription waits when no telling of it is ahead (`trips.next_trip_due`
#: says when a trip is due; `next_due` gives a trip this, and the round asks trips' own).
TRIP_PAUSE = timedelta(days=1)
#: The soonest a subscription is due again: a state whose held-back events are already due
#: (which `evaluation.decide` would have released) must not make a worker spin on it.
MIN_PAUSE = timedelta(minutes=1)


def next_due(subscription: Subscription, blob: str | None, now: datetime) -> datetime:
    """When `subscription`, evaluated at `now` into the state `blob` (None: none yet), is
    due again: the observed kind at the end of the current hour; the forecast kind at its
    next sending time (`send_at` today, or tomorrow once today's has passed), and every hour
    between it and the end of the local day to catch a forecast that worsened; either
    sooner when an event held back by quiet hours comes due then."""
    target, kind = subscription.target, subscription.kind
    if not isinstance(target, Place):
        return now + TRIP_PAUSE
    hourly = last_hour_end(now) + HOUR
    if isinstance(kind, Observed):
        due = hourly
    else:
        zone = subscription.zone
        today = now.astimezone(zone).date()
        sending = send_instant(zone, today, kind.send_at)
        tomorrow = today + timedelta(days=1)
        if now < sending:
            due = sending
        elif hourly < send_instant(zone, tomorrow, time(0)):
            due = hourly
        else:
            due = send_instant(zone, tomorrow, kind.send_at)
    held = _first_held(blob)
    if held is not None:
        due = min(due, max(held, now + MIN_PAUSE))
    return due


def _first_held(blob: str | None) -> datetime | None:
    """When the first event the state holds back comes due; None for none (or a state that
    cannot be read: the evaluation replaces it)."""
    if blob is None:
        return None
    try:
        pending = decode_state(blob).pending
    except MalformedState:
        return None
    return pending[0].due_at if pending else None


def subscription_cell(subscription: Subscription) -> str:
    """The key of the grid cell a subscription is evaluated in (`evaluation.cell_of` of its
    place, or of a trip's start), as stored beside it: claims order by it so that the
    subscriptions of one cell come in one batch and share one evaluation of its air."""
    target = subscription.target
    cell = cell_of(target.point if isinstance(target, Place) else target.start)
    return f"{cell.row}:{cell.column}"


@attrs.frozen
class EvaluationFinish:
    """An evaluation's outcome to store (`EvaluationClaims.finish_evaluations`): the new
    state `blob` (None: unchanged), by compare-and-set on `expected_version`, and when the
    subscription is next due."""

    subscription_id: uuid.UUID
    expected_version: int
    blob: str | None
    next_evaluation_at: datetime


@attrs.frozen
class ClaimedSubscription:
    """A subscription claimed for evaluation, with its state as read at the claim."""

    subscription: Subscription
    state: StoredState


class EvaluationClaims(Protocol):
    """The evaluation work of alert subscriptions, shared by every worker on one database."""

    def claim_due_subscriptions(
        self, claimant: str, now: datetime, lease_until: datetime, limit: int
    ) -> list[ClaimedSubscription]:
        """Lease to `claimant` until `lease_until` up to `limit` active subscriptions whose
        next evaluation is due by `now` and whose lease, if any, ended by `now`: the earliest
        due first, then by the grid cell of its place (one air evaluation serves a cell),
        then by id. Concurrent claims, in any
        process, never lease one subscription to two claimants at once."""
        ...

    def finish_evaluations(
        self, claimant: str, finishes: Sequence[EvaluationFinish]
    ) -> frozenset[uuid.UUID]:
        """Store evaluations' outcomes and release their leases: each one's new state (a
        `blob` of None keeps the state as it is, and its version) and when its next
        evaluation is due. Each only if `claimant` still holds its lease and its state's
        version is the one expected; nothing is written for the others. The ids of the
        subscriptions stored. Called in the caller's unit of work, with the events the
        evaluations recorded and their charge; a batch is one statement where the store
        can, so a round's transactions hold the database briefly."""
        ...

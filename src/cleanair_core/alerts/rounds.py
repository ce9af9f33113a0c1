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
from datetime import datetime
from typing import Protocol

import attrs

from cleanair_core.alerts.subscriptions import StoredState, Subscription


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

    def finish_evaluation(
        self,
        subscription_id: uuid.UUID,
        claimant: str,
        expected_version: int,
        blob: str | None,
        next_evaluation_at: datetime,
    ) -> bool:
        """Store an evaluation's outcome and release the lease: the new state `blob` (None
        keeps the state as it is, and its version) and when the next evaluation is due. Only
        if `claimant` still holds the lease and the state's version is `expected_version`;
        False (nothing written) otherwise. Called in the caller's unit of work, with the
        events the evaluation recorded and their charge."""
        ...

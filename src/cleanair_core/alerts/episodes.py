"""Observed alerts in episodes: one alert when the current hour crosses the threshold, one
all-clear when the air has been back on the other side long enough (issue 32).

Pure functions over immutable state: the evaluator passes each hour's category and the time
of the evaluation, and stores the state returned with the events. docs/alerts.md tells the
rules and why they were chosen.

- The subscription starts armed: its first hour past the threshold opens an episode (episode
  numbers count from 1) and decides the alert.
- The episode ends, and the subscription re-arms, when `hysteresis_hours` observed hours in a
  row are at least `hysteresis_categories` categories on the good side of the threshold; the
  hour that completes them decides the all-clear. Any other hour restarts the count.
- A missing hour (one never observed) neither counts towards the hysteresis nor restarts it.
- Hours are taken in order: an hour at or before the last one observed decides nothing, so a
  retried evaluation is harmless, and its events would carry the same ids anyway.
- An event decided during quiet hours waits for their end. An alert still waiting when its
  episode ends is dropped together with its all-clear: the person never hears of an episode
  that began and ended while they were not to be disturbed.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from zoneinfo import ZoneInfo

import attrs

from cleanair_core.alerts.events import (
    AlertEvent,
    Direction,
    EventKind,
    Events,
    at_least,
    observed_event_id,
    past,
    release,
    schedule,
)
from cleanair_core.alerts.quiet_hours import QuietHours, quiet_until


@attrs.frozen(kw_only=True)
class ObservedRule:
    """An observed subscription's settings: the `threshold` category on its index (0 is the
    best category), the `direction`, the hysteresis before it re-arms, its IANA `zone` and its
    quiet hours in that zone (None for none)."""

    subscription_id: uuid.UUID
    threshold: int = attrs.field(validator=at_least(0))
    direction: Direction = Direction.WORSE
    hysteresis_categories: int = attrs.field(default=1, validator=at_least(1))
    hysteresis_hours: int = attrs.field(default=1, validator=at_least(1))
    zone: ZoneInfo
    quiet: QuietHours | None = None


@attrs.frozen
class ObservedState:
    """Where an observed subscription stands: the last hour observed, the episodes started so
    far, whether the last of them is still open, the hours counted towards its end, and the
    events waiting for quiet hours to end. A new subscription starts from `ObservedState()`."""

    last_hour: datetime | None = None
    episodes: int = 0
    open: bool = False
    clear_hours: int = 0
    pending: Events = ()


def observe(
    state: ObservedState, rule: ObservedRule, hour: datetime, category: int, now: datetime
) -> tuple[ObservedState, Events]:
    """Take the category observed for the hour ending at `hour`, evaluated at `now`.

    Returns the new state and the events to deliver now: first those pending whose quiet
    hours ended by `now` (as `release` would), then the one this hour decided, if any and if
    it is not held back by quiet hours (it then waits in the state)."""
    if category < 0:
        raise ValueError("a category is 0 or more")
    if hour.tzinfo is None or now.tzinfo is None:
        raise ValueError("instants must be timezone-aware")
    state, ready = release(state, now)
    if state.last_hour is not None and hour <= state.last_hour:
        return state, ready
    state = attrs.evolve(state, last_hour=hour)
    side = past(rule.direction, category, rule.threshold)
    if not state.open:
        if side < 0:
            return state, ready
        state = attrs.evolve(state, episodes=state.episodes + 1, open=True, clear_hours=0)
        return _decide(state, rule, EventKind.ALERT, hour, category, now, ready)
    if side > -rule.hysteresis_categories:
        return attrs.evolve(state, clear_hours=0), ready
    if state.clear_hours + 1 < rule.hysteresis_hours:
        return attrs.evolve(state, clear_hours=state.clear_hours + 1), ready
    state = attrs.evolve(state, open=False, clear_hours=0)
    alert = observed_event_id(rule.subscription_id, state.episodes, EventKind.ALERT)
    unsent = tuple(event for event in state.pending if event.id != alert)
    if len(unsent) < len(state.pending):
        # Its alert never went out: the subscriber hears of neither.
        return attrs.evolve(state, pending=unsent), ready
    return _decide(state, rule, EventKind.ALL_CLEAR, hour, category, now, ready)


def _decide(
    state: ObservedState,
    rule: ObservedRule,
    kind: EventKind,
    hour: datetime,
    category: int,
    now: datetime,
    ready: Events,
) -> tuple[ObservedState, Events]:
    event = AlertEvent(
        id=observed_event_id(rule.subscription_id, state.episodes, kind),
        kind=kind,
        subscription_id=rule.subscription_id,
        category=category,
        decided_at=now,
        due_at=quiet_until(rule.quiet, rule.zone, now),
        hour=hour,
        episode=state.episodes,
    )
    pending, now_due = schedule(state.pending, event, now)
    return attrs.evolve(state, pending=pending), ready + now_due

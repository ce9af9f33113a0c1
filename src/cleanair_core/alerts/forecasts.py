"""Forecast alerts: at the subscription's sending time, today's or tomorrow's worst forecast
hour against the threshold, at most once per day unless it gets worse (issue 32).

- The first forecast for a target day that is past the threshold decides an alert; another
  for the same day decides one more only when it is at least one category further past the
  threshold than the last alert decided for that day (worse air, or for "good air" alerts
  better air), so a re-evaluation or a retry sends nothing new.
- A forecast alert has no all-clear, as with EnviroFlash: it is about one day, and that day
  ends by itself. The observed kind carries the all-clear (docs/alerts.md tells why).
- Target days are taken in order: a day before the latest one evaluated decides nothing.
- An alert decided during quiet hours waits for their end; a worse one for the same day
  decided meanwhile replaces it, and one that could only be delivered after its target day
  (local) is dropped.
"""

from __future__ import annotations

import uuid
from datetime import date, datetime
from zoneinfo import ZoneInfo

import attrs

from cleanair_core.alerts.events import (
    AlertEvent,
    Direction,
    EventKind,
    Events,
    at_least,
    forecast_event_id,
    past,
    release,
    schedule,
)
from cleanair_core.alerts.quiet_hours import QuietHours, quiet_until


@attrs.frozen(kw_only=True)
class ForecastRule:
    """A forecast subscription's settings: the `threshold` category on its index (0 is the
    best category), the `direction`, its IANA `zone` (which decides when a target day is
    over) and its quiet hours in that zone (None for none)."""

    subscription_id: uuid.UUID
    threshold: int = attrs.field(validator=at_least(0))
    direction: Direction = Direction.WORSE
    zone: ZoneInfo
    quiet: QuietHours | None = None


@attrs.frozen
class ForecastState:
    """Where a forecast subscription stands: the latest target day evaluated, the category of
    the last alert decided for it (None when none was), and the alerts waiting for quiet hours
    to end. A new subscription starts from `ForecastState()`."""

    target_day: date | None = None
    alerted: int | None = None
    pending: Events = ()


def forecast(
    state: ForecastState, rule: ForecastRule, target_day: date, category: int, now: datetime
) -> tuple[ForecastState, Events]:
    """Take the worst forecast category for the local `target_day`, evaluated at `now`.

    Returns the new state and the events to deliver now: first those pending whose quiet
    hours ended by `now` (as `release` would), then the alert this forecast decided, if any
    and if it is not held back by quiet hours (it then waits in the state)."""
    if category < 0:
        raise ValueError("a category is 0 or more")
    if now.tzinfo is None:
        raise ValueError("instants must be timezone-aware")
    state, ready = release(state, now)
    if state.target_day is not None and target_day < state.target_day:
        return state, ready
    alerted = state.alerted if target_day == state.target_day else None
    state = attrs.evolve(state, target_day=target_day, alerted=alerted)
    if past(rule.direction, category, rule.threshold) < 0:
        return state, ready
    if alerted is not None and past(rule.direction, category, alerted) < 1:
        return state, ready
    due = quiet_until(rule.quiet, rule.zone, now)
    if due.astimezone(rule.zone).date() > target_day:
        return state, ready
    event = AlertEvent(
        id=forecast_event_id(rule.subscription_id, target_day, category),
        kind=EventKind.FORECAST,
        subscription_id=rule.subscription_id,
        category=category,
        decided_at=now,
        due_at=due,
        target_day=target_day,
    )
    waiting = tuple(other for other in state.pending if other.target_day != target_day)
    pending, now_due = schedule(waiting, event, now)
    return attrs.evolve(state, alerted=category, pending=pending), ready + now_due

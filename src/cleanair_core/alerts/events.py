"""Alert events: what an evaluation decides, with ids stable across retries, and the queue of
events held back by quiet hours (issue 32)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import date, datetime
from enum import StrEnum
from typing import Protocol, TypeVar

import attrs

#: The namespace of every event id. Changing it would give every event a new id, and the
#: outbox, which de-duplicates on ids, would deliver retried events twice.
EVENT_NAMESPACE = uuid.UUID("a2a4809a-aead-4b39-be7f-ddda20f415d4")


class Direction(StrEnum):
    """Which side of the threshold a subscription alerts on."""

    #: Alert when the category is at or above the threshold (the air at least this bad).
    WORSE = "worse"
    #: "Good air": alert when the category is at or below the threshold.
    BETTER = "better"


class EventKind(StrEnum):
    """What an event tells."""

    #: An observed episode started: the current hour crossed the threshold.
    ALERT = "alert"
    #: The observed episode ended: the air has been back on the other side long enough.
    ALL_CLEAR = "all_clear"
    #: The forecast's worst hour of a day is past the threshold.
    FORECAST = "forecast"


@attrs.frozen(kw_only=True)
class AlertEvent:
    """One decided event. `hour` (the end of the observed hour) is set for the observed kinds,
    `target_day` (local) for a forecast; `episode` numbers the observed episode, from 1.
    `decided_at` is when the evaluation decided it, `due_at` when it may be delivered: the
    same instant, or the end of the quiet hours it was decided in."""

    id: uuid.UUID
    kind: EventKind
    subscription_id: uuid.UUID
    category: int
    decided_at: datetime
    due_at: datetime
    hour: datetime | None = None
    target_day: date | None = None
    episode: int | None = None


Events = tuple[AlertEvent, ...]


def at_least(minimum: int) -> Callable[[object, attrs.Attribute[int], int], None]:
    """An attrs validator refusing an int below `minimum` (naming the field, not the value)."""

    def check(_: object, attribute: attrs.Attribute[int], value: int) -> None:
        if value < minimum:
            raise ValueError(f"{attribute.name} must be at least {minimum}")

    return check


def past(direction: Direction, category: int, level: int) -> int:
    """How many categories `category` lies past `level` towards the alerting side: 0 at the
    level, negative on the other side (4 is 1 past 3 for WORSE, 2 is 1 past 3 for BETTER)."""
    return category - level if direction is Direction.WORSE else level - category


def observed_event_id(subscription_id: uuid.UUID, episode: int, kind: EventKind) -> uuid.UUID:
    """The id of an observed episode's alert or all-clear: the same for every evaluation that
    decides it, so a retried evaluation's event is de-duplicated."""
    return uuid.uuid5(EVENT_NAMESPACE, f"observed/{subscription_id}/{episode}/{kind}")


def forecast_event_id(subscription_id: uuid.UUID, target_day: date, category: int) -> uuid.UUID:
    """The id of a forecast alert for `target_day` at `category`: a day alerts at most once per
    category, so the pair names it."""
    return uuid.uuid5(
        EVENT_NAMESPACE, f"forecast/{subscription_id}/{target_day.isoformat()}/{category}"
    )


def split_due(pending: Events, now: datetime) -> tuple[Events, Events]:
    """Split `pending` into the events still waiting and those due by `now`, which go out in
    the order they were decided: an event never goes out before one decided earlier (an
    all-clear before its alert), even if the clocks of the evaluations disagreed."""
    due = 0
    while due < len(pending) and pending[due].due_at <= now:
        due += 1
    return pending[due:], pending[:due]


class _Holding(Protocol):
    """A subscription's state that holds events back (`ObservedState`, `ForecastState`)."""

    @property
    def pending(self) -> Events: ...


_State = TypeVar("_State", bound=_Holding)


def release(state: _State, now: datetime) -> tuple[_State, Events]:
    """Hand over the pending events due by `now` (their quiet hours over), in the order they
    were decided; the others stay pending. `state` is an attrs class with `pending`."""
    pending, due = split_due(state.pending, now)
    if not due:
        return state, ()
    return attrs.evolve(state, pending=pending), due  # type: ignore[misc]


def schedule(pending: Events, event: AlertEvent, now: datetime) -> tuple[Events, Events]:
    """Queue `event` behind the pending ones: returns the new pending events and those to
    deliver now (the event itself when it is due and nothing waits before it)."""
    if pending:
        event = attrs.evolve(event, due_at=max(event.due_at, pending[-1].due_at))
        return (*pending, event), ()
    if event.due_at <= now:
        return (), (event,)
    return (event,), ()

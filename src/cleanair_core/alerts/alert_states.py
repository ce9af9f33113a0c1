"""The stored form of a subscription's evaluator state: `ObservedState` or `ForecastState` as
JSON text, which the store keeps and compares by version only (issue 32).

The JSON names its kind and a format version (`"v"`), so a later release can read what an
earlier one wrote. Instants are written in UTC with microseconds, so a decoded state equals
the one encoded.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, date, datetime
from typing import Any, TypeAlias

from cleanair_core.alerts.episodes import ObservedState
from cleanair_core.alerts.events import AlertEvent, EventKind
from cleanair_core.alerts.forecasts import ForecastState

AlertState: TypeAlias = ObservedState | ForecastState

#: The format written; `decode_state` reads it (and, later, the ones before it).
FORMAT_VERSION = 1


class MalformedState(ValueError):
    """Stored state this code cannot read (corrupt, or written by a newer release)."""


def encode_state(state: AlertState) -> str:
    """`state` as compact JSON text."""
    document: dict[str, Any]
    if isinstance(state, ObservedState):
        document = {
            "kind": "observed",
            "v": FORMAT_VERSION,
            "last_hour": _instant(state.last_hour),
            "episodes": state.episodes,
            "open": state.open,
            "clear_hours": state.clear_hours,
            "pending": [_event(event) for event in state.pending],
        }
    else:
        document = {
            "kind": "forecast",
            "v": FORMAT_VERSION,
            "target_day": _day(state.target_day),
            "alerted": state.alerted,
            "pending": [_event(event) for event in state.pending],
        }
    return json.dumps(document, separators=(",", ":"))


def decode_state(blob: str) -> AlertState:
    """The state `encode_state` wrote; MalformedState for anything else."""
    try:
        document = json.loads(blob)
        if document["v"] != FORMAT_VERSION:
            raise MalformedState("the state was written in a format this release cannot read")
        pending = tuple(_read_event(item) for item in document["pending"])
        if document["kind"] == "observed":
            return ObservedState(
                last_hour=_read_instant(document["last_hour"]),
                episodes=_int(document["episodes"]),
                open=_bool(document["open"]),
                clear_hours=_int(document["clear_hours"]),
                pending=pending,
            )
        if document["kind"] == "forecast":
            alerted = document["alerted"]
            return ForecastState(
                target_day=_read_day(document["target_day"]),
                alerted=None if alerted is None else _int(alerted),
                pending=pending,
            )
    except MalformedState:
        raise
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise MalformedState("the stored alert state is not readable") from error
    raise MalformedState("the stored alert state is of no known kind")


def _event(event: AlertEvent) -> dict[str, Any]:
    return {
        "id": str(event.id),
        "kind": event.kind.value,
        "subscription_id": str(event.subscription_id),
        "category": event.category,
        "decided_at": _instant(event.decided_at),
        "due_at": _instant(event.due_at),
        "hour": _instant(event.hour),
        "target_day": _day(event.target_day),
        "episode": event.episode,
    }


def _read_event(item: dict[str, Any]) -> AlertEvent:
    decided_at = _read_instant(item["decided_at"])
    due_at = _read_instant(item["due_at"])
    if decided_at is None or due_at is None:
        raise ValueError("an event has both instants")
    episode = item["episode"]
    return AlertEvent(
        id=uuid.UUID(item["id"]),
        kind=EventKind(item["kind"]),
        subscription_id=uuid.UUID(item["subscription_id"]),
        category=_int(item["category"]),
        decided_at=decided_at,
        due_at=due_at,
        hour=_read_instant(item["hour"]),
        target_day=_read_day(item["target_day"]),
        episode=None if episode is None else _int(episode),
    )


def _instant(at: datetime | None) -> str | None:
    if at is None:
        return None
    if at.tzinfo is None or at.utcoffset() is None:
        raise ValueError("instants must be timezone-aware")
    return at.astimezone(UTC).isoformat()


def _read_instant(text: str | None) -> datetime | None:
    if text is None:
        return None
    at = datetime.fromisoformat(text)
    if at.tzinfo is None:
        raise ValueError("a stored instant has its offset")
    return at.astimezone(UTC)


def _day(day: date | None) -> str | None:
    return None if day is None else day.isoformat()


def _read_day(text: str | None) -> date | None:
    return None if text is None else date.fromisoformat(text)


def _int(value: object) -> int:
    if type(value) is not int:
        raise TypeError("expected an integer")
    return value


def _bool(value: object) -> bool:
    if type(value) is not bool:
        raise TypeError("expected true or false")
    return value

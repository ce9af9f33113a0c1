"""The JSON body of every alert event: what the feed shows and the webhook sends (issue 32).

Bodies take the Standard Webhooks payload shape, `{"type", "timestamp", "data"}`, with
full-stop delimited types: `air.alert` (an observed episode starts), `air.all_clear` (it
ended), `air.forecast` (a day's forecast is past the threshold) and `alerts.pool_exhausted`
(a notice: the owner's credit pool is empty, so alerts stop until it refills).

A body is a function of its inputs only: the same event gives the same bytes (keys sorted,
no spaces, ASCII only), so the outbox stores it once and every retry re-sends exactly what
was signed the first time. A body carries what the subscriber asked about and the index's own
advice for the category (`air.indexes`: the texts each index publishes, for the general
public or for sensitive groups as the subscription's audience says, and `group_advice`: the
general population's and each group's the index names), never the webhook URL
(its query often holds a token), the connection, the owner or any secret.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, date, datetime, time
from typing import Any

import attrs

from cleanair_core.air.indexes import HealthAdvice, eu_eaqi, uk_daqi, us_epa
from cleanair_core.air.indexes.advice import group_advice
from cleanair_core.alerts.events import AlertEvent, Direction, EventKind
from cleanair_core.alerts.subscriptions import Audience, Place, Subscription, Trip

ALERT_TYPE = "air.alert"
ALL_CLEAR_TYPE = "air.all_clear"
FORECAST_TYPE = "air.forecast"
POOL_EXHAUSTED_TYPE = "alerts.pool_exhausted"

_TYPES = {
    EventKind.ALERT: ALERT_TYPE,
    EventKind.ALL_CLEAR: ALL_CLEAR_TYPE,
    EventKind.FORECAST: FORECAST_TYPE,
}


@attrs.frozen
class IndexCategory:
    """One category of an official index as alerts name it: the index's name, the
    category's official name and the index's advice for it."""

    index_name: str
    name: str
    advice: HealthAdvice


def index_category(index: str, category: int) -> IndexCategory:
    """Category `category` (0 the best) of the index coded `index`, read from the index's
    own tables; ValueError for an unknown index or a category it does not have."""
    names: list[tuple[str, HealthAdvice]]
    if index == us_epa.CODE:
        index_name = us_epa.NAME
        names = [(name, HealthAdvice(g, s)) for _, name, _, g, s in us_epa.CATEGORIES]
    elif index == eu_eaqi.CODE:
        index_name = eu_eaqi.NAME
        names = [(name, HealthAdvice(g, s)) for name, _, g, s in eu_eaqi.BANDS]
    elif index == uk_daqi.CODE:
        index_name = uk_daqi.NAME
        names = [(name, HealthAdvice(g, s)) for _, name, g, s in uk_daqi.BANDS]
    else:
        raise ValueError("not an index alerts know")
    if not 0 <= category < len(names):
        raise ValueError("not a category of that index")
    name, advice = names[category]
    return IndexCategory(index_name, name, advice)


@attrs.frozen
class TripAdvice:
    """What a trip alert adds (the departures computation): the best local departure time
    within the window around the usual one, and the share of the usual trip's dose it saves
    (0.18 for 18 % less). Either may be unknown (None)."""

    best_departure: time | None = None
    dose_saved: float | None = None


def event_message(
    subscription: Subscription,
    event: AlertEvent,
    index: str | None = None,
    trip: TripAdvice | None = None,
) -> str:
    """The JSON body of `event`, decided for `subscription`. `index` is the index the
    evaluation used: the subscription's own when it names one (then `index` may be left
    out, or must agree), else the place's official index, which only the evaluation knows.
    `trip` is the departures advice of a trip subscription's alert, None when not (yet)
    computed."""
    code = _index_of(subscription, index)
    told = index_category(code, event.category)
    threshold = index_category(code, subscription.threshold)
    advice = (
        told.advice.sensitive
        if subscription.audience is Audience.SENSITIVE
        else told.advice.general
    )
    data: dict[str, Any] = {
        "event_id": str(event.id),
        "subscription_id": str(event.subscription_id),
        "kind": str(event.kind),
        "target": _target(subscription),
        "index": code,
        "index_name": told.index_name,
        "category": event.category,
        "category_name": told.name,
        "threshold": subscription.threshold,
        "threshold_name": threshold.name,
        "direction": str(subscription.direction),
        "hour": None if event.hour is None else _instant(event.hour),
        "target_day": None if event.target_day is None else event.target_day.isoformat(),
        "episode": event.episode,
        "audience": str(subscription.audience),
        "message": _sentence(subscription, event, told.name, threshold.name, trip),
        "advice": advice,
        # Every group the index names, beside the audience's `advice` (kept as it was:
        # receivers read it). An alert does not know the pollutant that set the category,
        # so the EPA's groups get its summary for sensitive groups (advice.py).
        "group_advice": {a.group.value: a.text for a in group_advice(code, event.category)},
    }
    if isinstance(subscription.target, Trip):
        trip = trip or TripAdvice()
        data["trip"] = {
            "best_departure": None
            if trip.best_departure is None
            else trip.best_departure.isoformat(timespec="minutes"),
            "dose_saved": trip.dose_saved,
        }
    return _dumps(
        {"type": _TYPES[event.kind], "timestamp": _instant(event.decided_at), "data": data}
    )


def pool_exhausted_message(
    notice_id: uuid.UUID,
    at: datetime,
    refills_at: datetime,
    subscription_id: uuid.UUID | None = None,
) -> str:
    """The body of the notice that the owner's credit pool is exhausted: no alert is
    decided until `refills_at`. `subscription_id` names the subscription whose webhook the
    notice goes to, None for the feed alone."""
    data = {
        "event_id": str(notice_id),
        "subscription_id": None if subscription_id is None else str(subscription_id),
        "kind": "pool_exhausted",
        "refills_at": _instant(refills_at),
        "message": (
            "Your monthly credits are used up: no alerts are sent until they refill "
            f"on {refills_at.astimezone(UTC).date().isoformat()}."
        ),
    }
    return _dumps({"type": POOL_EXHAUSTED_TYPE, "timestamp": _instant(at), "data": data})


def _index_of(subscription: Subscription, index: str | None) -> str:
    if subscription.index is not None:
        if index is not None and index != subscription.index:
            raise ValueError("the index given is not the subscription's")
        return subscription.index
    if index is None:
        raise ValueError("a subscription without an index needs the index evaluated")
    return index


def _target(subscription: Subscription) -> dict[str, Any]:
    target = subscription.target
    if isinstance(target, Place):
        return {"type": "place", "lat": target.point.lat, "lon": target.point.lon}
    return {
        "type": "trip",
        "start": {"lat": target.start.lat, "lon": target.start.lon},
        "end": {"lat": target.end.lat, "lon": target.end.lon},
        "activity": str(target.activity),
        "departure": target.departure.isoformat(timespec="minutes"),
        "days": sorted(target.days),
    }


def _sentence(
    subscription: Subscription,
    event: AlertEvent,
    category: str,
    threshold: str,
    trip: TripAdvice | None,
) -> str:
    where = _where(subscription)
    worse = subscription.direction is Direction.WORSE
    side = "at or worse than" if worse else "at or better than"
    if event.kind is EventKind.ALERT:
        text = f"The air {where} is {category}, {side} your threshold of {threshold}"
    elif event.kind is EventKind.ALL_CLEAR:
        if worse:
            text = f"All clear: the air {where} is back to {category}, better than {threshold}"
        else:
            text = f"The good air {where} has ended: it is {category}, worse than {threshold}"
    else:
        day = _day(event.target_day)
        if worse:
            text = f"Forecast for {day}: the air {where} will reach {category} at its worst"
        else:
            text = f"Forecast for {day}: the air {where} will stay {category} or better"
        text += f", {side} your threshold of {threshold}"
    if isinstance(subscription.target, Trip) and trip is not None:
        text += _trip_clause(trip)
    return text + "."


def _where(subscription: Subscription) -> str:
    target = subscription.target
    if isinstance(target, Place):
        return f"at {target.point.lat:.4f}, {target.point.lon:.4f}"
    return f"on your {target.departure.isoformat(timespec='minutes')} {target.activity} trip"


def _day(target_day: date | None) -> str:
    return "the day" if target_day is None else target_day.isoformat()


def _trip_clause(trip: TripAdvice) -> str:
    if trip.best_departure is None:
        return ""
    clause = f"; leave at {trip.best_departure.isoformat(timespec='minutes')}"
    if trip.dose_saved is not None and trip.dose_saved > 0:
        clause += f" to breathe {round(trip.dose_saved * 100)} % less"
    return clause


def _instant(at: datetime) -> str:
    """An instant as RFC 3339 in UTC with a `Z`, microseconds only when there are some."""
    if at.tzinfo is None:
        raise ValueError("an event's instants are timezone-aware")
    text = at.astimezone(UTC).replace(tzinfo=None).isoformat()
    return text + "Z"


def _dumps(body: dict[str, Any]) -> str:
    # Sorted keys, no spaces, ASCII escapes: one text per body whatever the dict's order.
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)

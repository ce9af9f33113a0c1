"""Alert bodies: every type in the Standard Webhooks shape, the same bytes for the same event,
the category's official name and the advice the index itself gives for the subscription's
audience, and nothing in a body that is a secret or a token."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, date, datetime, time, timedelta, timezone
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cleanair_core.air.indexes import IndexValue, eu_eaqi, uk_daqi, us_epa
from cleanair_core.air.indexes.advice import GROUPS
from cleanair_core.air.pollutants import Pollutant
from cleanair_core.alerts.events import (
    AlertEvent,
    Direction,
    EventKind,
    forecast_event_id,
    observed_event_id,
)
from cleanair_core.alerts.messages import (
    ALERT_TYPE,
    ALL_CLEAR_TYPE,
    FORECAST_TYPE,
    POOL_EXHAUSTED_TYPE,
    TripAdvice,
    event_message,
    index_category,
    pool_exhausted_message,
)
from cleanair_core.alerts.subscriptions import (
    INDEX_CATEGORIES,
    Audience,
    Forecast,
    Subscription,
    TargetDay,
    Trip,
    categories_of,
)
from cleanair_core.alerts.webhook_secrets import webhook_secret
from cleanair_core.geo import Point
from cleanair_core.keys import TokenKeys
from cleanair_core.routes.network import PlanActivityType
from support.subscriptions import URLS, make_subscription, subscriptions

DECIDED = datetime(2026, 11, 28, 9, 10, tzinfo=UTC)
HOUR = datetime(2026, 11, 28, 9, 0, tzinfo=UTC)
KEYS = TokenKeys(b"k" * 32)
INDEXES = {
    us_epa.CODE: us_epa.us_epa_aqi,
    eu_eaqi.CODE: eu_eaqi.eu_eaqi,
    uk_daqi.CODE: uk_daqi.uk_daqi,
}


def observed(subscription: Subscription, kind: EventKind, category: int) -> AlertEvent:
    return AlertEvent(
        id=observed_event_id(subscription.id, 1, kind),
        kind=kind,
        subscription_id=subscription.id,
        category=category,
        decided_at=DECIDED,
        due_at=DECIDED,
        hour=HOUR,
        episode=1,
    )


def forecast(subscription: Subscription, category: int, day: date) -> AlertEvent:
    return AlertEvent(
        id=forecast_event_id(subscription.id, day, category),
        kind=EventKind.FORECAST,
        subscription_id=subscription.id,
        category=category,
        decided_at=DECIDED,
        due_at=DECIDED,
        target_day=day,
    )


def body(text: str) -> dict[str, Any]:
    parsed: dict[str, Any] = json.loads(text)
    return parsed


POOR_GENERAL = (
    "Consider reducing intense activities outdoors, if you experience symptoms such as sore "
    "eyes, a cough or sore throat."
)


def test_an_observed_alert_tells_the_place_category_and_advice() -> None:
    subscription = make_subscription()  # EAQI, worse than band 3 ("Poor"), general advice
    event = observed(subscription, EventKind.ALERT, 4)
    sent = body(event_message(subscription, event))
    assert sent["type"] == ALERT_TYPE == "air.alert"
    assert sent["timestamp"] == "2026-11-28T09:10:00Z"
    assert sent["data"] == {
        "event_id": str(event.id),
        "subscription_id": str(subscription.id),
        "kind": "alert",
        "target": {"type": "place", "lat": 48.8566, "lon": 2.3522},
        "index": "eu_eaqi_2024",
        "index_name": "European Air Quality Index (EEA, 2024)",
        "category": 4,
        "category_name": "Very poor",
        "threshold": 3,
        "threshold_name": "Poor",
        "direction": "worse",
        "hour": "2026-11-28T09:00:00Z",
        "target_day": None,
        "episode": 1,
        "audience": "general",
        "message": (
            "The air at 48.8566, 2.3522 is Very poor, at or worse than your threshold of Poor."
        ),
        # The EEA's own text for "Very poor" (its health messages: the same as "Poor"'s).
        "advice": POOR_GENERAL,
        "group_advice": {
            "general": POOR_GENERAL,
            "sensitive": (
                "Reduce physical activities, particularly outdoors, especially if you "
                "experience symptoms."
            ),
        },
    }


def test_an_all_clear_says_the_air_is_back() -> None:
    subscription = make_subscription()
    sent = body(event_message(subscription, observed(subscription, EventKind.ALL_CLEAR, 1)))
    assert sent["type"] == ALL_CLEAR_TYPE == "air.all_clear"
    assert sent["data"]["kind"] == "all_clear"
    assert sent["data"]["category_name"] == "Fair"
    assert sent["data"]["message"] == (
        "All clear: the air at 48.8566, 2.3522 is back to Fair, better than Poor."
    )
    assert sent["data"]["advice"] == eu_eaqi.BANDS[1][2]


def test_good_air_alerts_and_their_end_read_the_other_way() -> None:
    subscription = attrs.evolve(make_subscription(), direction=Direction.BETTER, threshold=1)
    started = body(event_message(subscription, observed(subscription, EventKind.ALERT, 0)))
    ended = body(event_message(subscription, observed(subscription, EventKind.ALL_CLEAR, 3)))
    assert started["data"]["message"] == (
        "The air at 48.8566, 2.3522 is Good, at or better than your threshold of Fair."
    )
    assert ended["data"]["message"] == (
        "The good air at 48.8566, 2.3522 has ended: it is Poor, worse than Fair."
    )


def test_a_forecast_alert_names_its_day_not_an_hour() -> None:
    subscription = attrs.evolve(
        make_subscription(),
        kind=Forecast(TargetDay.TOMORROW, time(21)),
        index=us_epa.CODE,
        threshold=2,
        audience=Audience.SENSITIVE,
    )
    event = forecast(subscription, 3, date(2026, 11, 29))
    sent = body(event_message(subscription, event))
    assert sent["type"] == FORECAST_TYPE == "air.forecast"
    data = sent["data"]
    assert (data["kind"], data["hour"], data["target_day"], data["episode"]) == (
        "forecast",
        None,
        "2026-11-29",
        None,
    )
    assert (data["category_name"], data["threshold_name"]) == (
        "Unhealthy",
        "Unhealthy for Sensitive Groups",
    )
    assert data["message"] == (
        "Forecast for 2026-11-29: the air at 48.8566, 2.3522 will reach Unhealthy at its "
        "worst, at or worse than your threshold of Unhealthy for Sensitive Groups."
    )
    assert data["advice"] == "Sensitive groups should avoid prolonged or heavy exertion."


def test_a_trip_alert_carries_the_trip_and_its_departure_advice_when_known() -> None:
    trip = Trip(
        start=Point(48.85, 2.35),
        end=Point(48.87, 2.33),
        activity=PlanActivityType.WALKING,
        departure=time(8),
        days=frozenset({5, 1, 3}),
    )
    subscription = attrs.evolve(make_subscription(), target=trip)
    event = observed(subscription, EventKind.ALERT, 3)
    unknown = body(event_message(subscription, event))["data"]
    assert unknown["target"] == {
        "type": "trip",
        "start": {"lat": 48.85, "lon": 2.35},
        "end": {"lat": 48.87, "lon": 2.33},
        "activity": "walking",
        "departure": "08:00",
        "days": [1, 3, 5],
    }
    assert unknown["trip"] == {"best_departure": None, "dose_saved": None}
    assert unknown["message"] == (
        "The air on your 08:00 walking trip is Poor, at or worse than your threshold of Poor."
    )
    known = body(event_message(subscription, event, trip=TripAdvice(time(7, 20), 0.18)))["data"]
    assert known["trip"] == {"best_departure": "07:20", "dose_saved": 0.18}
    assert known["message"] == (
        "The air on your 08:00 walking trip is Poor, at or worse than your threshold of "
        "Poor; leave at 07:20 to breathe 18 % less."
    )


def test_a_place_alert_has_no_trip_fields() -> None:
    subscription = make_subscription()
    assert (
        "trip"
        not in body(event_message(subscription, observed(subscription, EventKind.ALERT, 3)))["data"]
    )


def test_the_pool_exhausted_notice_says_when_alerts_resume() -> None:
    notice = uuid.uuid5(uuid.NAMESPACE_URL, "notice")
    subscription = uuid.uuid4()
    refills = datetime(2026, 12, 1, tzinfo=UTC)
    sent = body(pool_exhausted_message(notice, DECIDED, refills, subscription))
    assert sent == {
        "type": POOL_EXHAUSTED_TYPE,
        "timestamp": "2026-11-28T09:10:00Z",
        "data": {
            "event_id": str(notice),
            "subscription_id": str(subscription),
            "kind": "pool_exhausted",
            "refills_at": "2026-12-01T00:00:00Z",
            "message": (
                "Your monthly credits are used up: no alerts are sent until they refill "
                "on 2026-12-01."
            ),
        },
    }
    assert body(pool_exhausted_message(notice, DECIDED, refills))["data"]["subscription_id"] is None
    assert pool_exhausted_message(notice, DECIDED, refills) == pool_exhausted_message(
        notice, DECIDED, refills
    )


def test_a_subscription_without_an_index_needs_the_one_evaluated() -> None:
    subscription = attrs.evolve(make_subscription(), index=None)
    event = observed(subscription, EventKind.ALERT, 3)
    with pytest.raises(ValueError, match="index"):
        event_message(subscription, event)
    sent = body(event_message(subscription, event, index=uk_daqi.CODE))["data"]
    assert (sent["index"], sent["category_name"]) == ("uk_daqi", "Very High")
    with pytest.raises(ValueError, match="not the subscription's"):
        event_message(make_subscription(), event, index=uk_daqi.CODE)


def test_unknown_indexes_and_categories_are_refused() -> None:
    with pytest.raises(ValueError, match="index"):
        index_category("aqhi_ca", 0)
    with pytest.raises(ValueError, match="category"):
        index_category(uk_daqi.CODE, 4)
    with pytest.raises(ValueError, match="category"):
        index_category(us_epa.CODE, -1)


# -- the advice is the index's own -----------------------------------------------------------
def category_of(value: IndexValue) -> int:
    """The alerts' category number (0 the best) of an index value, from the index's tables."""
    if value.code == us_epa.CODE:
        return next(n for n, c in enumerate(us_epa.CATEGORIES) if value.value <= c[0])
    if value.code == uk_daqi.CODE:
        return next(n for n, b in enumerate(uk_daqi.BANDS) if value.value <= b[0])
    return value.value - 1


@given(
    st.sampled_from(sorted(INDEXES)),
    st.floats(min_value=0, max_value=400, allow_nan=False),
    st.sampled_from(Audience),
)
def test_a_bodys_category_and_advice_are_what_the_index_gives(
    code: str, pm25: float, audience: Audience
) -> None:
    # The index computed from an hour of PM2.5 (24 such hours for the averaging ones).
    value = INDEXES[code]({Pollutant.PM25: [pm25] * 24})
    assert value is not None
    category = category_of(value)
    subscription = attrs.evolve(make_subscription(), index=code, threshold=1, audience=audience)
    data = body(event_message(subscription, observed(subscription, EventKind.ALERT, category)))[
        "data"
    ]
    assert data["category_name"] == value.category
    expected = value.health.sensitive if audience is Audience.SENSITIVE else value.health.general
    assert data["advice"] == expected


@pytest.mark.parametrize("code", sorted(INDEX_CATEGORIES))
def test_every_category_of_every_index_has_a_name_and_both_advices(code: str) -> None:
    names = [index_category(code, n).name for n in range(categories_of(code))]
    assert len(set(names)) == len(names)
    for n in range(categories_of(code)):
        advice = index_category(code, n).advice
        assert advice.general
        assert advice.sensitive


@given(
    st.sampled_from(sorted(INDEXES)),
    st.floats(min_value=0, max_value=400, allow_nan=False),
    st.sampled_from(Audience),
)
def test_a_body_carries_every_group_the_index_names_beside_the_audiences_advice(
    code: str, pm25: float, audience: Audience
) -> None:
    value = INDEXES[code]({Pollutant.PM25: [pm25] * 24})
    assert value is not None
    subscription = attrs.evolve(make_subscription(), index=code, threshold=1, audience=audience)
    event = observed(subscription, EventKind.ALERT, category_of(value))
    data = body(event_message(subscription, event))["data"]
    groups = data["group_advice"]
    assert list(groups) == sorted(["general", *GROUPS[code]])  # the body's keys are sorted
    assert groups["general"] == value.health.general
    # The audience's advice is kept as it was, and agrees with its group's.
    sensitive = "at_risk" if code == uk_daqi.CODE else "sensitive"
    if code != us_epa.CODE:
        assert groups[sensitive] == value.health.sensitive
    expected = value.health.sensitive if audience is Audience.SENSITIVE else value.health.general
    assert data["advice"] == expected


def test_an_epa_alert_gives_each_of_its_five_groups_the_sensitive_groups_advice() -> None:
    # An alert does not know the pollutant that set the AQI, whose statement would name them.
    subscription = attrs.evolve(make_subscription(), index=us_epa.CODE, threshold=2)
    data = body(event_message(subscription, observed(subscription, EventKind.ALERT, 3)))["data"]
    assert data["group_advice"] == {
        "general": "Everyone should reduce prolonged or heavy exertion outdoors.",
        "heart_or_lung_disease": "Sensitive groups should avoid prolonged or heavy exertion.",
        "older_adults": "Sensitive groups should avoid prolonged or heavy exertion.",
        "children_and_teens": "Sensitive groups should avoid prolonged or heavy exertion.",
        "outdoor_workers": "Sensitive groups should avoid prolonged or heavy exertion.",
        "active_people": "Sensitive groups should avoid prolonged or heavy exertion.",
    }


def test_a_daqi_alert_gives_defras_at_risk_advice() -> None:
    subscription = attrs.evolve(make_subscription(), index=uk_daqi.CODE, threshold=1)
    data = body(event_message(subscription, observed(subscription, EventKind.ALERT, 2)))["data"]
    assert data["group_advice"]["general"].startswith("Anyone experiencing discomfort")
    assert "Older people should also reduce physical exertion." in (data["group_advice"]["at_risk"])


# -- determinism and no secrets ----------------------------------------------------------------
events_of_kinds = st.sampled_from(EventKind)


@given(subscriptions(), events_of_kinds, st.data())
def test_the_same_event_gives_the_same_bytes_and_no_secret(
    subscription: Subscription, kind: EventKind, data: st.DataObject
) -> None:
    index = subscription.index or data.draw(st.sampled_from(sorted(INDEX_CATEGORIES)))
    category = data.draw(st.integers(min_value=0, max_value=categories_of(subscription.index) - 1))
    if kind is EventKind.FORECAST:
        event = forecast(subscription, category, date(2026, 11, 29))
    else:
        event = observed(subscription, kind, category)
    chosen = None if subscription.index is not None else index
    text = event_message(subscription, event, chosen)
    # A copy of each input, built anew, gives the very same text.
    again = event_message(attrs.evolve(subscription), attrs.evolve(event), chosen)
    assert text == again
    assert text.isascii()
    assert body(text)["data"]["event_id"] == str(event.id)
    secret = webhook_secret(KEYS, subscription.id, subscription.secret_generation).as_text()
    for forbidden in (secret, subscription.connection_id, subscription.owner, "s3cr3t", *URLS):
        assert forbidden not in text
    if subscription.webhook_url is not None:
        assert subscription.webhook_url not in text
    assert "hooks.example" not in text
    assert "example.org" not in text


def test_instants_are_given_in_utc_whatever_their_zone() -> None:
    subscription = make_subscription()
    paris = timedelta(hours=1)
    event = attrs.evolve(
        observed(subscription, EventKind.ALERT, 4),
        decided_at=DECIDED.astimezone(timezone(paris)),
    )
    assert body(event_message(subscription, event))["timestamp"] == "2026-11-28T09:10:00Z"

"""When a subscription is due again (`rounds.next_due`), which the evaluation claims order
and lease by (issue 32)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

from hypothesis import given
from hypothesis import strategies as st

from cleanair_core.alerts.alert_states import encode_state
from cleanair_core.alerts.episodes import ObservedState
from cleanair_core.alerts.evaluation import send_instant
from cleanair_core.alerts.events import AlertEvent, Direction, EventKind
from cleanair_core.alerts.rounds import MIN_PAUSE, TRIP_PAUSE, next_due, subscription_cell
from cleanair_core.alerts.subscriptions import (
    Audience,
    Forecast,
    Observed,
    Place,
    Subscription,
    TargetDay,
    Trip,
)
from cleanair_core.geo import Point
from cleanair_core.routes.network import PlanActivityType

NOW = datetime(2026, 11, 28, 9, 40, 12, tzinfo=UTC)
HELSINKI = Point(60.1699, 24.9384)


def subscription(**changes: object) -> Subscription:
    fields: dict[str, object] = {
        "id": uuid.uuid4(),
        "owner": "alice",
        "connection_id": "c1",
        "created_at": NOW - timedelta(days=1),
        "target": Place(HELSINKI),
        "index": None,
        "threshold": 3,
        "direction": Direction.WORSE,
        "audience": Audience.GENERAL,
        "kind": Observed(),
        "timezone": "Europe/Paris",
    }
    fields.update(changes)
    return Subscription(**fields)  # type: ignore[arg-type]


def forecast_at(send_at: time, zone: str = "Europe/Paris") -> Subscription:
    return subscription(kind=Forecast(TargetDay.TOMORROW, send_at), timezone=zone)


def test_an_observed_subscription_is_due_at_the_end_of_the_current_hour() -> None:
    assert next_due(subscription(), None, NOW) == datetime(2026, 11, 28, 10, tzinfo=UTC)
    on_the_hour = datetime(2026, 11, 28, 10, tzinfo=UTC)
    assert next_due(subscription(), None, on_the_hour) == on_the_hour + timedelta(hours=1)


def test_a_forecast_is_due_at_its_sending_time_then_hourly_until_the_local_day_ends() -> None:
    evening = forecast_at(time(21, 0))  # Paris is UTC+1 in November: 20:00 UTC
    assert next_due(evening, None, NOW) == datetime(2026, 11, 28, 20, tzinfo=UTC)
    after = datetime(2026, 11, 28, 20, 5, tzinfo=UTC)
    assert next_due(evening, None, after) == datetime(2026, 11, 28, 21, tzinfo=UTC)
    # The local day ends at 23:00 UTC: the last hourly look is 22:00, then tomorrow's 21:00.
    last = datetime(2026, 11, 28, 22, 0, tzinfo=UTC)
    assert next_due(evening, None, last) == datetime(2026, 11, 29, 20, tzinfo=UTC)


def test_a_forecast_follows_its_own_timezone() -> None:
    auckland = forecast_at(time(7, 30), "Pacific/Auckland")  # UTC+13 in November
    before = datetime(2026, 11, 27, 18, 0, tzinfo=UTC)  # 07:00 on the 28th in Auckland
    assert next_due(auckland, None, before) == datetime(2026, 11, 27, 18, 30, tzinfo=UTC)


def test_a_trip_subscription_is_looked_at_once_a_day_until_trips_are_evaluated() -> None:
    trip = Trip(HELSINKI, HELSINKI, PlanActivityType.WALKING, time(8), frozenset({1}))
    assert next_due(subscription(target=trip), None, NOW) == NOW + TRIP_PAUSE


def held(due_at: datetime) -> str:
    event = AlertEvent(
        id=uuid.uuid4(),
        kind=EventKind.ALERT,
        subscription_id=uuid.uuid4(),
        category=4,
        decided_at=NOW,
        due_at=due_at,
        hour=NOW,
        episode=1,
    )
    return encode_state(ObservedState(last_hour=NOW, episodes=1, open=True, pending=(event,)))


def test_an_event_held_by_quiet_hours_brings_the_next_evaluation_forward() -> None:
    quiet_ends = NOW + timedelta(minutes=7)
    assert next_due(forecast_at(time(21)), held(quiet_ends), NOW) == quiet_ends
    # One already due would have been released: it must not make a worker spin.
    assert next_due(subscription(), held(NOW - timedelta(hours=1)), NOW) == NOW + MIN_PAUSE
    assert next_due(subscription(), "not json", NOW) == datetime(2026, 11, 28, 10, tzinfo=UTC)


ZONES = st.sampled_from(["Europe/Paris", "Pacific/Auckland", "America/New_York", "UTC"])
INSTANTS = st.datetimes(
    min_value=datetime(2026, 1, 1),  # noqa: DTZ001 - hypothesis wants naive bounds
    max_value=datetime(2027, 12, 31),  # noqa: DTZ001
    timezones=st.just(UTC),
)


@given(INSTANTS, ZONES, st.times())
def test_a_forecast_never_sleeps_past_its_next_sending_time(
    now: datetime, zone: str, send_at: time
) -> None:
    forecast = forecast_at(send_at, zone)
    due = next_due(forecast, None, now)
    assert due > now
    local = now.astimezone(ZoneInfo(zone)).date()
    sendings = [send_instant(ZoneInfo(zone), local + timedelta(days=d), send_at) for d in (0, 1)]
    assert due <= min(s for s in sendings if s > now)


@given(INSTANTS)
def test_an_observed_subscription_is_due_within_the_hour(now: datetime) -> None:
    due = next_due(subscription(), None, now)
    assert now < due <= now + timedelta(hours=1)
    assert due.minute == due.second == due.microsecond == 0


def test_subscriptions_of_one_cell_share_its_key() -> None:
    near = Point(HELSINKI.lat + 0.001, HELSINKI.lon - 0.001)
    far = Point(HELSINKI.lat + 0.02, HELSINKI.lon)
    assert subscription_cell(subscription()) == subscription_cell(subscription(target=Place(near)))
    assert subscription_cell(subscription()) != subscription_cell(subscription(target=Place(far)))

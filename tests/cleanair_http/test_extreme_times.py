"""Times and dates at the ends of what Python can hold, in every body that carries one: an
answer says the time is outside the window (400) or invalid (422), never 500 (issue 31, D6:
a departures window from 9999-12-31 overflowed `earliest + 24 h`)."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from cleanair_core import CleanAir, ManualClock
from cleanair_runtime.composition.settings import Settings
from support.http import Client, MakeClient, bearer, pair

NOW = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
START = {"latitude": 60.17, "longitude": 24.94}
END = {"latitude": 60.18, "longitude": 24.95}
#: Offsets that push a time near either end past what UTC can hold.
ZONES = st.none() | st.sampled_from(
    [UTC, timezone(timedelta(hours=14)), timezone(timedelta(hours=-14))]
)
EXTREME = st.datetimes(timezones=ZONES)
OUTSIDE = {
    "detail": "Route times must lie between 30 days ago and 84 hours from now",
}
EXAMPLES = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(NOW)


@pytest.fixture
def client(make_client: MakeClient) -> Client:
    return make_client(Settings(plan_workers=0))


@pytest.fixture
def headers(core: CleanAir, client: Client) -> dict[str, str]:
    return bearer(pair(core, client))


def text(at: datetime) -> str:
    return at.isoformat()


def departures(earliest: str, latest: str) -> dict[str, Any]:
    return {
        "start": START,
        "end": END,
        "activity_type": "walking",
        "earliest": earliest,
        "latest": latest,
        "step_minutes": 60,
    }


def test_a_departures_window_at_the_end_of_time_is_400_as_any_beyond_the_horizon(
    client: Client, headers: dict[str, str]
) -> None:
    for earliest, latest in [
        ("9999-12-31T00:00:00Z", "9999-12-31T00:00:00Z"),
        ("9999-12-31T00:00:00Z", "9999-12-31T23:59:59Z"),
        ("9999-12-31T23:00:00-05:00", "9999-12-31T23:00:00-05:00"),
        ("0001-01-01T00:00:00+01:00", "0001-01-01T00:00:00+01:00"),
    ]:
        response = client.post(
            "/ext/v1/routes/departures", json=departures(earliest, latest), headers=headers
        )
        assert response.status_code == 400, (earliest, response.text)
        assert response.json() == OUTSIDE


@settings(EXAMPLES)
@given(earliest=EXTREME, latest=EXTREME)
@example(earliest=datetime(9999, 12, 31, tzinfo=UTC), latest=datetime(9999, 12, 31, 12, tzinfo=UTC))
@example(earliest=datetime.max.replace(tzinfo=UTC), latest=datetime.max.replace(tzinfo=UTC))
@example(
    earliest=datetime.min.replace(tzinfo=UTC),
    latest=datetime.min.replace(tzinfo=UTC) + timedelta(hours=1),
)
def test_departures_never_fail_on_extreme_times(
    client: Client, headers: dict[str, str], earliest: datetime, latest: datetime
) -> None:
    payload = departures(text(earliest), text(latest))
    response = client.post("/ext/v1/routes/departures", json=payload, headers=headers)
    # 202 only for a window inside the data's: possible, if unlikely, for a generated pair.
    assert response.status_code in {202, 400, 422}, response.text


@settings(EXAMPLES)
@given(start_time=EXTREME)
@example(start_time=datetime.max.replace(tzinfo=UTC))
@example(start_time=datetime.min.replace(tzinfo=timezone(timedelta(hours=1))))
def test_route_plans_never_fail_on_an_extreme_start_time(
    client: Client, headers: dict[str, str], start_time: datetime
) -> None:
    payload = {"start": START, "end": END, "activity_type": "walking"}
    response = client.post(
        "/v1/routes", json={**payload, "start_time": text(start_time)}, headers=headers
    )
    assert response.status_code in {202, 400}, response.text


@settings(EXAMPLES)
@given(start_time=EXTREME)
@example(
    start_time=datetime.max.replace(tzinfo=UTC)
)  # estimating the second waypoint's time overflows
@example(start_time=datetime(9999, 12, 31, 23, 59, tzinfo=timezone(timedelta(hours=-14))))
def test_enrichment_never_fails_on_an_extreme_start_time(
    client: Client, headers: dict[str, str], start_time: datetime
) -> None:
    waypoints = [{"lat": 60.17, "lon": 24.94}, {"lat": 60.27, "lon": 24.94}]
    payload = {"waypoints": waypoints, "start_time": text(start_time)}
    response = client.post("/v1/airquality/routes", json=payload, headers=headers)
    assert response.status_code in {200, 400}, response.text


@settings(EXAMPLES)
@given(first=EXTREME, second=EXTREME)
@example(first=datetime.max.replace(tzinfo=UTC), second=datetime.max.replace(tzinfo=UTC))
@example(
    first=datetime.min.replace(tzinfo=UTC),
    second=datetime.min.replace(tzinfo=timezone(timedelta(hours=14))),
)
def test_enrichment_never_fails_on_extreme_recorded_times(
    client: Client, headers: dict[str, str], first: datetime, second: datetime
) -> None:
    waypoints = [
        {"lat": 60.17, "lon": 24.94, "time": text(first)},
        {"lat": 60.18, "lon": 24.94, "time": text(second)},
    ]
    response = client.post("/v1/airquality/routes", json={"waypoints": waypoints}, headers=headers)
    # Times that go backwards are 422; the others are outside the data window.
    assert response.status_code in {200, 400, 422}, response.text


@settings(EXAMPLES)
@given(day=st.dates(), zone=st.sampled_from(["Pacific/Kiritimati", "Etc/GMT+12", "UTC"]))
@example(day=date.max, zone="Pacific/Kiritimati")
@example(day=date.min, zone="Etc/GMT+12")
def test_forecasts_never_fail_on_an_extreme_date(
    client: Client, headers: dict[str, str], day: date, zone: str
) -> None:
    payload = {"date": day.isoformat(), "timezone": zone, "latitude": 60.17, "longitude": 24.94}
    response = client.post("/v1/airquality/forecast", json=payload, headers=headers)
    assert response.status_code in {200, 400}, response.text

"""POST /v1/airquality/score and /forecast: every status the contract names, and charging."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from litestar.enums import ScopeType
from litestar.testing import TestClient
from litestar.types import ASGIApp, Receive, Scope, Send

from cleanair_core import CleanAir, ManualClock, Policy
from cleanair_core.access.scopes import Scope as ApiScope
from cleanair_core.air.score import clean_air_score
from cleanair_core.credits.ledger import Billable, CreditLimits
from cleanair_core.errors import RETRY_AFTER_UNAVAILABLE, SourceUnavailable
from cleanair_core.ports import Sources
from cleanair_http.app import create_app
from cleanair_runtime.composition.settings import Settings
from support.fakes import (
    AIR,
    FINNISH_ADDRESS,
    HELSINKI,
    FakeGeolocator,
    FakeIp,
    FakeNamer,
    FakeSource,
)
from support.http import Client, bearer, pair

SCORE = "/v1/airquality/score"
FORECAST = "/v1/airquality/forecast"
NOW = datetime(2026, 11, 22, 10, 15, tzinfo=UTC)
SCAN = [{"mac": "00:11:22:33:44:55", "rssi": -50}, {"mac": "00:11:22:33:44:66", "rssi": -61}]
TODAY = {"date": "2026-11-22", "timezone": "Europe/Helsinki"}
AT_HELSINKI = {"latitude": HELSINKI.lat, "longitude": HELSINKI.lon}


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(NOW)


@pytest.fixture
def source() -> FakeSource:
    return FakeSource()


@pytest.fixture
def geolocator() -> FakeGeolocator:
    return FakeGeolocator(HELSINKI)


@pytest.fixture
def ip() -> FakeIp:
    return FakeIp()


@pytest.fixture
def sources(source: FakeSource, geolocator: FakeGeolocator, ip: FakeIp) -> Sources:
    return Sources(source, geolocator, ip, FakeNamer())


@pytest.fixture
def token(core: CleanAir, client: Client) -> str:
    return pair(core, client)


def with_rate_limit(core: CleanAir, clock: ManualClock, per_minute: int) -> CleanAir:
    """The same store and sources under a tight request limit."""
    policy = Policy(credits=CreditLimits(), requests_per_minute=per_minute)
    return CleanAir(core.store, core.keys, policy, clock, sources=core.sources)


def used(client: Client, token: str) -> int:
    used_credits: int = client.get("/v1/quota", headers=bearer(token)).json()["used"]
    return used_credits


# -- score: 200 -------------------------------------------------------------------------------


def test_score_at_coordinates(client: Client, token: str) -> None:
    response = client.post(SCORE, json={"lat": 60.17, "lon": 24.94}, headers=bearer(token))
    assert response.status_code == 200
    assert response.json() == {"score": clean_air_score(AIR), "ttl": 2700}
    assert used(client, token) == 1


def test_coordinates_win_over_wifi(
    client: Client,
    token: str,
    geolocator: FakeGeolocator,
    source: FakeSource,
) -> None:
    body = {"lat": 52.5, "lon": 13.4, "wifi": SCAN}
    assert client.post(SCORE, json=body, headers=bearer(token)).status_code == 200
    assert geolocator.calls == 0
    assert (source.samples[0].point.lat, source.samples[0].point.lon) == (52.5, 13.4)


def test_score_from_a_wifi_scan(
    client: Client,
    token: str,
    geolocator: FakeGeolocator,
    source: FakeSource,
) -> None:
    response = client.post(SCORE, json={"wifi": SCAN}, headers=bearer(token))
    assert response.status_code == 200
    assert geolocator.calls == 1
    assert source.samples[0].point == HELSINKI


def test_client_labels_attribute_usage(core: CleanAir, client: Client, token: str) -> None:
    core.add_client_label("watchface")
    for label in ("watchface", "unknown-app", None):
        body: dict[str, Any] = {"lat": 1.0, "lon": 2.0, "client": label}
        assert client.post(SCORE, json=body, headers=bearer(token)).status_code == 200
    assert core.usage_by_label("alice") == {"client:watchface": 1, "score": 2}


# -- score: errors ----------------------------------------------------------------------------


def test_score_needs_a_token(client: Client) -> None:
    assert client.post(SCORE, json={"lat": 1, "lon": 2}).status_code == 401


def test_score_needs_the_aq_read_scope(core: CleanAir, client: Client) -> None:
    core.add_partner("acme")
    token = core.issue_partner_token("acme", "routes", [ApiScope.ROUTES_PLAN]).token
    response = client.post(SCORE, json={"lat": 1, "lon": 2}, headers=bearer(token))
    assert response.status_code == 403
    assert "aq:read" in response.json()["detail"]


def test_score_needs_a_premium_owner(core: CleanAir, client: Client, token: str) -> None:
    core.set_premium("alice", False)
    response = client.post(SCORE, json={"lat": 1, "lon": 2}, headers=bearer(token))
    assert response.status_code == 403


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"lat": None, "lon": None},
        {"wifi": []},
        {"wifi": None, "client": "app"},
        {"lat": 91, "lon": 0},
        {"lat": 0, "lon": -180.5},
        {"lat": 0, "lon": 180.0001},
        {"lat": -90.0001, "lon": 0},
        {"lat": "1", "lon": "2"},  # numbers are JSON numbers, not strings
        {"lat": "1e1", "lon": 2},
        {"lat": True, "lon": 2},
        {"wifi": [{"mac": "00:11:22:33:44:55", "rssi": "-40"}] * 2},
        {"wifi": [{"mac": "00:11:22:33:44:55", "rssi": -151}] * 2},
        {"wifi": [{"mac": "00:11:22:33:44:55", "rssi": -40.5}] * 2},
        {"lat": 10},
        {"lon": 10, "wifi": SCAN},
        {"lat": "north", "lon": 1},
        {"wifi": [{"mac": "00:11:22:33:44:55", "rssi": 12}]},
        {"wifi": [{"mac": "00:11:22:33:44:55"}]},
        {"wifi": [{"mac": "x" * 40, "rssi": -40}]},
        {"wifi": [{"mac": "00:11:22:33:44:55", "rssi": -40}] * 65},
        {"lat": 1, "lon": 2, "client": "Not Allowed"},
        {"lat": 1, "lon": 2, "client": "abc\n"},
        {"lat": 1, "lon": 2, "client": "x" * 33},
        [],
    ],
)
def test_invalid_score_bodies_are_422_never_echoed_never_charged(
    client: Client,
    token: str,
    body: Any,
) -> None:
    response = client.post(SCORE, json=body, headers=bearer(token))
    assert response.status_code == 422
    assert response.json() == {"detail": "Request validation failed"}
    assert used(client, token) == 0


def test_malformed_json_is_422(client: Client, token: str) -> None:
    headers = {**bearer(token), "content-type": "application/json"}
    response = client.post(SCORE, content=b'{"lat": 1,', headers=headers)
    assert response.status_code == 422
    assert response.json() == {"detail": "Request validation failed"}


def test_an_unresolvable_scan_is_422_and_free(
    client: Client,
    token: str,
    geolocator: FakeGeolocator,
) -> None:
    geolocator.answer = None
    response = client.post(SCORE, json={"wifi": SCAN}, headers=bearer(token))
    assert response.status_code == 422
    assert "00:11" not in response.text
    assert used(client, token) == 0


def test_an_unavailable_source_is_503_and_free(
    client: Client,
    token: str,
    source: FakeSource,
) -> None:
    source.fail = True
    response = client.post(SCORE, json={"lat": 1, "lon": 2}, headers=bearer(token))
    assert response.status_code == 503
    assert response.json()["detail"]
    assert response.headers["Retry-After"] == str(RETRY_AFTER_UNAVAILABLE)
    assert used(client, token) == 0


def test_a_503_says_when_an_open_breaker_lets_calls_through_again(
    client: Client, token: str, source: FakeSource
) -> None:
    source.fail = True
    source.error = SourceUnavailable(retry_after=16.2)  # what an open breaker raises
    response = client.post(SCORE, json={"lat": 1, "lon": 2}, headers=bearer(token))
    assert (response.status_code, response.headers["Retry-After"]) == (503, "17")


def test_exhausted_credits_are_429_with_retry_after(
    core: CleanAir,
    client: Client,
    token: str,
) -> None:
    caller = core.authenticate(token)
    for _ in range(4):  # 4 x 25 = the daily burst cap of 100
        core.charge(caller, Billable.ROUTE_PLAN).reserve()
    response = client.post(SCORE, json={"lat": 1, "lon": 2}, headers=bearer(token))
    assert response.status_code == 429
    assert int(response.headers["retry-after"]) > 0
    forecast = client.post(FORECAST, json={**TODAY, **AT_HELSINKI}, headers=bearer(token))
    assert forecast.status_code == 429
    assert int(forecast.headers["retry-after"]) > 0


def test_validation_and_window_come_before_the_credit_check(
    core: CleanAir,
    client: Client,
    token: str,
    geolocator: FakeGeolocator,
) -> None:
    caller = core.authenticate(token)
    for _ in range(4):  # spend the daily burst cap
        core.charge(caller, Billable.ROUTE_PLAN).reserve()
    cases: list[tuple[str, dict[str, Any], int]] = [
        (FORECAST, {**AT_HELSINKI, "date": "2026-11-30", "timezone": "UTC"}, 400),
        (FORECAST, {"date": "2026-11-30", "timezone": "UTC"}, 400),  # window before IP
        (FORECAST, {**AT_HELSINKI, "date": "2026-11-22", "timezone": "Nowhere/Land"}, 422),
        (FORECAST, {"latitude": 60.0, "date": "2026-11-22", "timezone": "UTC"}, 422),
        (FORECAST, {"date": "2026-11-22", "timezone": "UTC"}, 422),  # no IP location
        (SCORE, {"lat": 60.0}, 422),
        (SCORE, {"wifi": SCAN}, 429),  # the scan is only looked up once credits are reserved
    ]
    for path, body, status in cases:
        response = client.post(path, json=body, headers=bearer(token))
        assert response.status_code == status, (path, body)
    assert geolocator.calls == 0


def test_the_rate_limit_is_counted_before_scope_and_premium(
    core: CleanAir,
    clock: ManualClock,
) -> None:
    strict = with_rate_limit(core, clock, per_minute=1)
    with TestClient(create_app(strict)) as client:
        token = pair(strict, client)
        strict.set_premium("alice", False)
        first = client.post(SCORE, json={"lat": 1, "lon": 2}, headers=bearer(token))
        assert first.status_code == 403
        second = client.post(SCORE, json={"lat": 1, "lon": 2}, headers=bearer(token))
        assert second.status_code == 429


def test_unknown_fields_are_ignored(client: Client, token: str) -> None:
    body = {"lat": 1.0, "lon": 2.0, "altitude": 30, "accuracy": {"m": 5}}
    assert client.post(SCORE, json=body, headers=bearer(token)).status_code == 200


def test_a_wifi_service_outage_is_503_and_free(
    client: Client,
    token: str,
    geolocator: FakeGeolocator,
) -> None:
    geolocator.fail = True
    response = client.post(SCORE, json={"wifi": SCAN}, headers=bearer(token))
    assert response.status_code == 503
    assert used(client, token) == 0


def test_rate_limits_apply_to_both_endpoints(
    core: CleanAir,
    clock: ManualClock,
) -> None:
    strict = with_rate_limit(core, clock, per_minute=2)
    with TestClient(create_app(strict)) as client:
        token = pair(strict, client)
        for _ in range(2):
            client.post(SCORE, json={"lat": 1, "lon": 2}, headers=bearer(token))
        limited = client.post(SCORE, json={"lat": 1, "lon": 2}, headers=bearer(token))
        assert limited.status_code == 429
        assert "retry-after" in limited.headers
        again = client.post(FORECAST, json={**TODAY, **AT_HELSINKI}, headers=bearer(token))
        assert again.status_code == 429


# -- forecast ---------------------------------------------------------------------------------


def test_forecast_of_a_day(client: Client, token: str) -> None:
    response = client.post(FORECAST, json={**TODAY, **AT_HELSINKI}, headers=bearer(token))
    assert response.status_code == 200
    body = response.json()
    assert body["location"] == "Helsinki, Finland"
    assert len(body["timestamps"]) == 24
    assert body["timestamps"][0] == int(datetime(2026, 11, 21, 22, tzinfo=UTC).timestamp())
    assert set(body["measures"]) == {"clean_air_score", "pm25", "no2", "o3"}
    assert all(len(values) == 24 for values in body["measures"].values())
    assert used(client, token) == 2


def test_forecast_on_a_daylight_saving_day(
    client: Client,
    token: str,
    clock: ManualClock,
) -> None:
    clock.set(datetime(2026, 10, 23, 9, tzinfo=UTC))
    body = {"date": "2026-10-25", "timezone": "Europe/Helsinki", **AT_HELSINKI}
    response = client.post(FORECAST, json=body, headers=bearer(token))
    assert response.status_code == 200
    assert len(response.json()["timestamps"]) == 25
    clock.set(datetime(2026, 3, 29, 0, 30, tzinfo=UTC))
    body = {"date": "2026-03-29", "timezone": "Europe/Helsinki", **AT_HELSINKI}
    assert len(client.post(FORECAST, json=body, headers=bearer(token)).json()["timestamps"]) == 23


def test_forecast_activity_and_environment_change_the_score(
    client: Client,
    token: str,
) -> None:
    def scores(**extra: str) -> list[int]:
        body = {**TODAY, **AT_HELSINKI, **extra}
        response = client.post(FORECAST, json=body, headers=bearer(token))
        assert response.status_code == 200
        values: list[int] = response.json()["measures"]["clean_air_score"]
        return values

    plain = scores()
    assert scores(activity_type="running_outdoor")[0] < plain[0]
    assert scores(environment_type="indoor")[0] > plain[0]
    assert scores(activity_type="other", environment_type="unknown") == plain


@pytest.mark.parametrize("date", ["2026-11-21", "2026-11-26", "2030-01-01"])
def test_forecast_outside_the_window_is_400_and_free(
    client: Client,
    token: str,
    date: str,
) -> None:
    body = {"date": date, "timezone": "Europe/Helsinki", **AT_HELSINKI}
    response = client.post(FORECAST, json=body, headers=bearer(token))
    assert response.status_code == 400
    assert "window" in response.json()["detail"]
    assert used(client, token) == 0


@pytest.mark.parametrize(
    "body",
    [
        {**TODAY, "timezone": "Mars/Olympus_Mons", **AT_HELSINKI},
        {**TODAY, "timezone": "", **AT_HELSINKI},
        {**TODAY, "latitude": 60.1},
        {**TODAY, "longitude": 24.9},
        {**TODAY, **AT_HELSINKI, "date": "2026-13-01"},
        {**TODAY, **AT_HELSINKI, "date": "tomorrow"},
        {"timezone": "UTC", **AT_HELSINKI},
        {"date": "2026-11-22", **AT_HELSINKI},
        {**TODAY, **AT_HELSINKI, "activity_type": "flying"},
        {**TODAY, **AT_HELSINKI, "environment_type": "underwater"},
        {**TODAY, "latitude": -91, "longitude": 0},
        {**TODAY, "latitude": 60, "longitude": 181},
        {**TODAY, "latitude": "60", "longitude": "24"},
        {**TODAY, **AT_HELSINKI, "timezone": "localtime"},
        {**TODAY, **AT_HELSINKI, "timezone": "right/Europe/Helsinki"},
        {**TODAY, **AT_HELSINKI, "date": None},
    ],
)
def test_invalid_forecast_bodies_are_422_and_free(
    client: Client,
    token: str,
    body: dict[str, Any],
) -> None:
    response = client.post(FORECAST, json=body, headers=bearer(token))
    assert response.status_code == 422
    assert response.json() == {"detail": "Request validation failed"}
    assert used(client, token) == 0


def test_forecast_scope_premium_and_token(core: CleanAir, client: Client, token: str) -> None:
    body = {**TODAY, **AT_HELSINKI}
    assert client.post(FORECAST, json=body).status_code == 401
    core.add_partner("acme")
    routes_only = core.issue_partner_token("acme", "r", [ApiScope.AQ_ROUTES]).token
    assert client.post(FORECAST, json=body, headers=bearer(routes_only)).status_code == 403
    core.set_premium("alice", False)
    assert client.post(FORECAST, json=body, headers=bearer(token)).status_code == 403


def test_forecast_503_is_refunded(client: Client, token: str, source: FakeSource) -> None:
    source.fail = True
    response = client.post(FORECAST, json={**TODAY, **AT_HELSINKI}, headers=bearer(token))
    assert response.status_code == 503
    assert used(client, token) == 0


# -- forecast located by the caller's address ---------------------------------------------------


def from_peer(app: ASGIApp, peer: str) -> ASGIApp:
    """The app as seen through a socket from `peer` (TestClient always says "testclient")."""

    async def wrapped(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == ScopeType.HTTP:
            scope = {**scope, "client": (peer, 40000)}
        await app(scope, receive, send)

    return wrapped


def test_without_coordinates_a_loopback_caller_has_no_location(
    client: Client,
    token: str,
) -> None:
    response = client.post(FORECAST, json=TODAY, headers=bearer(token))
    assert response.status_code == 422
    assert used(client, token) == 0


@pytest.mark.parametrize(
    ("proxies", "peer", "forwarded", "status"),
    [
        ("10.0.0.0/8", "10.0.0.5", FINNISH_ADDRESS, 200),  # a trusted proxy vouches
        ("", "10.0.0.5", FINNISH_ADDRESS, 422),  # no proxy is trusted: the peer counts
        ("10.0.0.0/8", "192.0.2.9", FINNISH_ADDRESS, 422),  # an untrusted peer cannot forge it
        ("", FINNISH_ADDRESS, None, 200),  # a direct caller from Finland
    ],
)
def test_the_ip_location_honours_x_forwarded_for_only_from_trusted_proxies(
    core: CleanAir,
    ip: FakeIp,
    proxies: str,
    peer: str,
    forwarded: str | None,
    status: int,
) -> None:
    settings = Settings.from_env({"CLEANAIR_TRUSTED_PROXIES": proxies})
    app = create_app(core, settings)
    with TestClient(from_peer(app, peer)) as client:
        token = pair(core, client)
        headers = bearer(token)
        if forwarded is not None:
            headers["X-Forwarded-For"] = forwarded
        response = client.post(FORECAST, json=TODAY, headers=headers)
        assert response.status_code == status
        if status == 200:
            assert response.json()["location"] == "Finland"

"""POST /v1/routes and GET /v1/routes/{request_id}: asynchronous route plans (contract 2.10-2.12,
3.1, 4.5, 4.6, 7, 8), their charging and refunds, and the plan lifecycle as a client sees it.

Plans run deterministically: the app is built without background workers and a test runs the
worker step itself (`core.work_on_next_plan()`); the last few run the real background worker
and wait for its steps, never for time to pass.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from litestar.testing import TestClient

from cleanair_core import CleanAir, ManualClock, Policy
from cleanair_core.access.scopes import Scope
from cleanair_core.air.pollutants import Concentrations, Pollutant
from cleanair_core.air.quality_source import Sample
from cleanair_core.credits.ledger import CreditLimits
from cleanair_core.geo import Point, distance_m
from cleanair_core.ports import Sources
from cleanair_core.routes.plans import Plan, PlanRequest, PlanStatus
from cleanair_http.app import create_app
from cleanair_runtime.composition.settings import Settings
from cleanair_sources.street_router import LoadedNetworks
from support.fakes import FakeIp, FakeNamer
from support.http import Client, MakeClient, bearer, pair, partner_token, user_token
from support.networks import DLAT, DLON, ORIGIN, grid

ROUTES = "/v1/routes"
QUOTA = "/v1/quota"
#: 15 seconds past the minute, so a poll window resets in 45 s.
NOW = datetime(2026, 11, 22, 10, 0, 15, tzinfo=UTC)
UNTIL_TOMORROW = int((datetime(2026, 11, 23, tzinfo=UTC) - NOW).total_seconds())
VALIDATION_FAILED = {"detail": "Request validation failed"}
PLAN_COST = 25
ROWS, COLS = 4, 10
#: Row 0 of the grid is dirty (south of this latitude), rows 1-3 are clean.
EDGE_LAT = ORIGIN.lat + DLAT / 2
#: Two points exactly 15 000.0 m apart by the service's own haversine (found by bisection).
EXACTLY_15_KM = (Point(60.17199, 24.94199), Point(60.17199, 25.213197596138656))


def at(i: int, j: int) -> Point:
    """Node (i, j) of the test grid."""
    return Point(ORIGIN.lat + i * DLAT, ORIGIN.lon + j * DLON)


def location(point: Point) -> dict[str, float]:
    return {"latitude": point.lat, "longitude": point.lon}


def plan_body(start: Point | None = None, end: Point | None = None, **extra: Any) -> dict[str, Any]:
    """A plan (by default along the dirty row 0, from its west end to its east end)."""
    return {
        "start": location(start or at(0, 0)),
        "end": location(end or at(0, COLS - 1)),
        "activity_type": "walking",
        **extra,
    }


class AirByLatitude:
    """Dirty air (lots of NO2) south of `edge_lat`, clean north of it."""

    update_interval = 3600

    def __init__(self, edge_lat: float) -> None:
        self.edge_lat = edge_lat
        self.calls = 0

    async def concentrations(self, samples: Sequence[Sample]) -> list[Concentrations]:
        self.calls += 1
        return [
            {Pollutant.NO2: 90.0 if s.point.lat < self.edge_lat else 10.0, Pollutant.PM25: 5.0}
            for s in samples
        ]


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(NOW)


@pytest.fixture
def air() -> AirByLatitude:
    return AirByLatitude(EDGE_LAT)


@pytest.fixture
def sources(air: AirByLatitude) -> Sources:
    return Sources(air, None, FakeIp(), FakeNamer(), networks=LoadedNetworks([grid(ROWS, COLS)]))


@pytest.fixture
def client(make_client: MakeClient) -> Client:
    """No background workers: a test runs plans itself with `run_next`."""
    return make_client(Settings(plan_workers=0))


@pytest.fixture
def token(core: CleanAir, client: Client) -> str:
    return pair(core, client)


def run_next(core: CleanAir) -> uuid.UUID | None:
    """One step of a plan worker: the id of the plan it took, or None."""
    plan = asyncio.run(core.work_on_next_plan())
    return None if plan is None else plan.id


def submit(client: Client, token: str, body: Any = None) -> Any:
    return client.post(ROUTES, json=plan_body() if body is None else body, headers=bearer(token))


def submitted(client: Client, token: str, body: Any = None) -> str:
    response = submit(client, token, body)
    assert response.status_code == 202, response.text
    request_id: str = response.json()["request_id"]
    return request_id


def poll(client: Client, token: str, request_id: str) -> Any:
    return client.get(f"{ROUTES}/{request_id}", headers=bearer(token))


def quota(client: Client, token: str) -> dict[str, int]:
    response = client.get(QUOTA, headers=bearer(token))
    assert response.status_code == 200
    body: dict[str, int] = response.json()
    return body


def used(client: Client, token: str) -> int:
    return quota(client, token)["used"]


def with_policy(core: CleanAir, clock: ManualClock, **policy: Any) -> CleanAir:
    """The same store and sources under another policy."""
    limits = Policy(credits=CreditLimits(monthly=1000, daily=100), **policy)
    return CleanAir(core.store, core.keys, limits, clock, sources=core.sources)


# -- POST /v1/routes: 202 ---------------------------------------------------------------------


def test_a_plan_is_accepted_with_a_request_id_and_charged_25_credits(
    core: CleanAir,
    client: Client,
    token: str,
) -> None:
    response = submit(client, token)
    assert response.status_code == 202
    body = response.json()
    assert set(body) == {"request_id"}
    request_id = uuid.UUID(body["request_id"])
    assert str(request_id) == body["request_id"]
    assert quota(client, token) == {
        "used": PLAN_COST,
        "limit": 1000,
        "remaining": 1000 - PLAN_COST,
        "daily_used": PLAN_COST,
        "daily_limit": 100,
        "daily_remaining": 100 - PLAN_COST,
    }
    stored = core.store.get_plan(request_id)
    assert stored is not None
    assert isinstance(stored.request, PlanRequest)
    assert stored.status is PlanStatus.PENDING
    assert stored.owner == "alice"
    assert stored.request.start == at(0, 0)
    assert stored.request.end == at(0, COLS - 1)
    assert stored.request.start_time == NOW  # no start_time: now


def test_each_plan_gets_its_own_id_and_charge(
    client: Client,
    token: str,
) -> None:
    ids = {submitted(client, token) for _ in range(3)}
    assert len(ids) == 3
    assert used(client, token) == 3 * PLAN_COST


@pytest.mark.parametrize("activity", ["walking", "cycling", "running"])
def test_every_plan_activity_is_accepted(
    core: CleanAir,
    client: Client,
    token: str,
    activity: str,
) -> None:
    request_id = submitted(client, token, {**plan_body(), "activity_type": activity})
    stored = core.store.get_plan(uuid.UUID(request_id))
    assert stored is not None
    assert isinstance(stored.request, PlanRequest)
    assert stored.request.activity.value == activity


def test_a_given_start_time_is_kept(
    core: CleanAir,
    client: Client,
    token: str,
) -> None:
    later = NOW + timedelta(hours=5)
    request_id = submitted(client, token, plan_body(start_time=later.isoformat()))
    stored = core.store.get_plan(uuid.UUID(request_id))
    assert stored is not None
    assert isinstance(stored.request, PlanRequest)
    assert stored.request.start_time == later


def test_a_start_time_without_an_offset_is_read_as_utc(
    core: CleanAir,
    client: Client,
    token: str,
) -> None:
    request_id = submitted(client, token, plan_body(start_time="2026-11-22T15:30:00"))
    stored = core.store.get_plan(uuid.UUID(request_id))
    assert stored is not None
    assert isinstance(stored.request, PlanRequest)
    assert stored.request.start_time == datetime(2026, 11, 22, 15, 30, tzinfo=UTC)
    offset = submitted(client, token, plan_body(start_time="2026-11-22T15:30:00+02:00"))
    stored = core.store.get_plan(uuid.UUID(offset))
    assert stored is not None
    assert isinstance(stored.request, PlanRequest)
    assert stored.request.start_time == datetime(2026, 11, 22, 13, 30, tzinfo=UTC)


# -- POST /v1/routes: 400 distance and time window, never charged -----------------------------


def test_exactly_15_km_is_accepted(
    client: Client,
    token: str,
) -> None:
    start, end = EXACTLY_15_KM
    assert distance_m(start, end) == 15_000.0
    assert submit(client, token, plan_body(start, end)).status_code == 202
    assert used(client, token) == PLAN_COST


def test_a_bit_under_15_km_is_accepted(
    client: Client,
    token: str,
) -> None:
    start, end = EXACTLY_15_KM
    near = Point(end.lat, end.lon - 0.0001)
    assert 14_990 < distance_m(start, near) < 15_000
    assert submit(client, token, plan_body(start, near)).status_code == 202


@pytest.mark.parametrize("beyond_deg", [0.00001, 0.01, 1.0])
def test_over_15_km_is_400_and_not_charged(
    client: Client,
    token: str,
    beyond_deg: float,
) -> None:
    start, end = EXACTLY_15_KM
    far = Point(end.lat, end.lon + beyond_deg)
    assert distance_m(start, far) > 15_000
    response = submit(client, token, plan_body(start, far))
    assert response.status_code == 400
    assert "15 km" in response.json()["detail"]
    assert set(response.json()) == {"detail"}
    assert quota(client, token)["used"] == 0
    assert quota(client, token)["daily_used"] == 0


def test_a_rejected_distance_stores_no_plan(
    core: CleanAir,
    client: Client,
    token: str,
) -> None:
    start, end = EXACTLY_15_KM
    submit(client, token, plan_body(start, Point(end.lat, end.lon + 0.01)))
    assert run_next(core) is None


@pytest.mark.parametrize(
    "offset",
    [
        timedelta(days=-30, seconds=-1),
        timedelta(days=-90),
        timedelta(hours=84, seconds=1),
        timedelta(days=10),
    ],
    ids=["just-over-30-days-ago", "90-days-ago", "just-past-84-hours", "10-days-ahead"],
)
def test_a_start_time_outside_the_data_window_is_400_and_not_charged(
    client: Client,
    token: str,
    offset: timedelta,
) -> None:
    response = submit(client, token, plan_body(start_time=(NOW + offset).isoformat()))
    assert response.status_code == 400
    assert set(response.json()) == {"detail"}
    assert used(client, token) == 0


@pytest.mark.parametrize(
    "offset",
    [
        timedelta(days=-30),
        timedelta(days=-29),
        timedelta(0),
        timedelta(hours=83),
        timedelta(hours=84),
    ],
    ids=["30-days-ago", "29-days-ago", "now", "83-hours-ahead", "84-hours-ahead"],
)
def test_a_start_time_inside_the_data_window_is_accepted(
    client: Client,
    token: str,
    offset: timedelta,
) -> None:
    response = submit(client, token, plan_body(start_time=(NOW + offset).isoformat()))
    assert response.status_code == 202
    assert used(client, token) == PLAN_COST


# -- POST /v1/routes: 401, 403 ----------------------------------------------------------------


def test_submitting_needs_a_token(client: Client) -> None:
    assert client.post(ROUTES, json=plan_body()).status_code == 401
    bad = client.post(ROUTES, json=plan_body(), headers=bearer("ca_tst_" + "x" * 43))
    assert bad.status_code == 401


def test_submitting_needs_the_routes_plan_scope(
    core: CleanAir,
    client: Client,
) -> None:
    # A user-owned, premium connection that lacks only routes:plan.
    token = user_token(core, "alice", [Scope.AQ_READ, Scope.AQ_ROUTES])
    response = submit(client, token)
    assert response.status_code == 403
    assert "routes:plan" in response.json()["detail"]
    assert used(client, token) == 0
    assert run_next(core) is None


def test_submitting_needs_a_premium_owner(
    core: CleanAir,
    client: Client,
    token: str,
) -> None:
    core.set_premium("alice", False)
    response = submit(client, token)
    assert response.status_code == 403
    assert "premium" in response.json()["detail"]
    assert used(client, token) == 0
    assert run_next(core) is None


def test_partner_connections_cannot_submit_plans(
    core: CleanAir,
    client: Client,
) -> None:
    token = partner_token(core, [Scope.ROUTES_PLAN, Scope.AQ_READ])
    response = submit(client, token)
    assert response.status_code == 403
    assert response.json() == {"detail": "Partner connections cannot do this"}
    assert used(client, token) == 0
    assert run_next(core) is None


def test_a_partner_without_the_scope_is_refused_too(
    core: CleanAir,
    client: Client,
) -> None:
    token = partner_token(core, [Scope.AQ_READ])
    assert submit(client, token).status_code == 403


def test_authorization_is_checked_before_the_body(
    core: CleanAir,
    client: Client,
    token: str,
) -> None:
    invalid = {**plan_body(), "activity_type": "driving"}
    partner = partner_token(core, [Scope.ROUTES_PLAN])
    assert submit(client, partner, invalid).status_code == 403
    limited = user_token(core, "alice", [Scope.AQ_READ])
    assert submit(client, limited, invalid).status_code == 403
    core.set_premium("alice", False)
    assert submit(client, token, invalid).status_code == 403


# -- POST /v1/routes: 422 ---------------------------------------------------------------------


def _without(key: str) -> dict[str, Any]:
    body = plan_body()
    del body[key]
    return body


INVALID_BODIES: list[tuple[str, Any]] = [
    ("missing-start", _without("start")),
    ("missing-end", _without("end")),
    ("missing-activity", _without("activity_type")),
    ("driving", {**plan_body(), "activity_type": "driving"}),
    ("cycling_electric", {**plan_body(), "activity_type": "cycling_electric"}),
    ("activity-case", {**plan_body(), "activity_type": "Walking"}),
    ("activity-null", {**plan_body(), "activity_type": None}),
    ("lat-91", {**plan_body(), "start": {"latitude": 91.0, "longitude": 24.94}}),
    ("lat-minus-90.5", {**plan_body(), "end": {"latitude": -90.5, "longitude": 24.94}}),
    ("lon-181", {**plan_body(), "start": {"latitude": 60.17, "longitude": 181.0}}),
    ("lon-minus-180.5", {**plan_body(), "end": {"latitude": 60.17, "longitude": -180.5}}),
    ("lat-string", {**plan_body(), "start": {"latitude": "60.17", "longitude": 24.94}}),
    ("lon-string", {**plan_body(), "end": {"latitude": 60.17, "longitude": "24.958"}}),
    ("lat-bool", {**plan_body(), "start": {"latitude": True, "longitude": 24.94}}),
    ("missing-longitude", {**plan_body(), "start": {"latitude": 60.17}}),
    ("start-null", {**plan_body(), "start": None}),
    ("start-string", {**plan_body(), "start": "60.17,24.94"}),
    ("start-time-garbage", plan_body(start_time="next tuesday")),
    ("start-time-number", plan_body(start_time=1700000000)),
    ("array", [plan_body()]),
    ("empty-object", {}),
]


@pytest.mark.parametrize("body", [b for _, b in INVALID_BODIES], ids=[n for n, _ in INVALID_BODIES])
def test_invalid_bodies_are_422_with_the_fixed_text(
    client: Client,
    token: str,
    body: Any,
) -> None:
    response = submit(client, token, body)
    assert response.status_code == 422
    assert response.json() == VALIDATION_FAILED
    assert used(client, token) == 0


@pytest.mark.parametrize(
    "raw",
    [b"{not json", b"", b'{"start": {"latitude": 60.17, "longitude": 24.94}', b"null"],
    ids=["garbage", "empty", "truncated", "null"],
)
def test_malformed_json_is_422_with_the_fixed_text(
    client: Client,
    token: str,
    raw: bytes,
) -> None:
    headers = {**bearer(token), "Content-Type": "application/json"}
    response = client.post(ROUTES, content=raw, headers=headers)
    assert response.status_code == 422
    assert response.json() == VALIDATION_FAILED
    assert used(client, token) == 0


def test_validation_never_echoes_the_input(
    client: Client,
    token: str,
) -> None:
    marker = "zz-secret-marker-zz"
    bodies = [
        {**plan_body(), "activity_type": marker},
        {**plan_body(), "start": {"latitude": marker, "longitude": 24.94}},
        plan_body(start_time=marker),
    ]
    for body in bodies:
        response = submit(client, token, body)
        assert response.status_code == 422
        assert marker not in response.text
        assert response.json() == VALIDATION_FAILED
    headers = {**bearer(token), "Content-Type": "application/json"}
    raw = client.post(ROUTES, content=f'{{"start": "{marker}'.encode(), headers=headers)
    assert raw.status_code == 422
    assert marker not in raw.text


# -- POST /v1/routes: 429 ---------------------------------------------------------------------


def test_the_daily_burst_cap_fits_four_plans_and_refuses_the_fifth(
    core: CleanAir,
    client: Client,
    token: str,
) -> None:
    for _ in range(4):
        submitted(client, token)
    response = submit(client, token)
    assert response.status_code == 429
    assert int(response.headers["retry-after"]) == UNTIL_TOMORROW
    assert "exhausted" in response.json()["detail"]
    assert quota(client, token)["daily_used"] == 100
    assert used(client, token) == 100
    # The refused plan was not stored: exactly four plans wait for a worker.
    taken = [run_next(core) for _ in range(5)]
    assert taken[4] is None
    assert None not in taken[:4]


def test_the_credit_pool_is_shared_by_the_users_connections(
    core: CleanAir,
    client: Client,
) -> None:
    first = pair(core, client, name="phone")
    second = pair(core, client, name="watch")
    for _ in range(2):
        submitted(client, first)
        submitted(client, second)
    assert submit(client, second).status_code == 429
    assert used(client, first) == 100


def test_the_general_rate_limit_applies_to_submissions(
    core: CleanAir,
    clock: ManualClock,
) -> None:
    strict = with_policy(core, clock, requests_per_minute=2)
    with TestClient(create_app(strict, Settings(plan_workers=0))) as client:
        token = pair(strict, client)
        for _ in range(2):
            assert submit(client, token).status_code == 202
        limited = submit(client, token)
        assert limited.status_code == 429
        assert limited.headers["retry-after"] == "45"
        assert limited.json() == {"detail": "Rate limit exceeded"}
        # Only the two accepted plans were charged.
        assert strict.quota(strict.authenticate(token)).used == 2 * PLAN_COST
        clock.advance(45)
        assert submit(client, token).status_code == 202


def test_the_rate_limit_is_counted_before_the_other_checks(
    core: CleanAir,
    clock: ManualClock,
) -> None:
    strict = with_policy(core, clock, requests_per_minute=1)
    with TestClient(create_app(strict, Settings(plan_workers=0))) as client:
        token = partner_token(strict, [Scope.ROUTES_PLAN])
        assert submit(client, token).status_code == 403
        assert submit(client, token).status_code == 429


# -- GET /v1/routes/{request_id}: pending, completed, failed ----------------------------------


def test_a_new_plan_is_pending(
    client: Client,
    token: str,
) -> None:
    request_id = submitted(client, token)
    response = poll(client, token, request_id)
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "pending"
    assert body.get("result") is None
    assert body.get("error") is None


def test_a_finished_plan_is_completed_with_cleaner_routes_first(
    core: CleanAir,
    client: Client,
    token: str,
    air: AirByLatitude,
) -> None:
    request_id = submitted(client, token)
    assert air.calls == 0  # nothing is planned at submission
    assert run_next(core) == uuid.UUID(request_id)
    response = poll(client, token, request_id)
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "completed"
    assert body.get("error") is None
    result = body["result"]
    assert result["activity_type"] == "walking"
    routes = result["routes"]
    assert len(routes) >= 2
    cleanest, baseline = routes[0], routes[-1]
    assert cleanest["goal"]["title"] == "Cleanest air"
    assert baseline["goal"]["title"] == "Shortest route"
    # The baseline runs along the dirty row 0; the cleanest route leaves it.
    assert all(lat == pytest.approx(ORIGIN.lat) for lat, _ in baseline["waypoints"])
    assert any(lat > EDGE_LAT for lat, _ in cleanest["waypoints"])
    assert cleanest["waypoints"][0] == [at(0, 0).lat, at(0, 0).lon]
    assert cleanest["waypoints"][-1] == [at(0, COLS - 1).lat, at(0, COLS - 1).lon]
    assert cleanest["distance"] > baseline["distance"]
    assert cleanest["distance_delta"] == round(cleanest["distance"] - baseline["distance"])
    assert cleanest["distance_delta"] > 0
    assert cleanest["dose_delta_pct"] > 0
    assert baseline["distance_delta"] == 0
    assert result["original_distance"] == baseline["distance"]
    assert result["best_route_index"] == 0
    assert result["original_dose"] == baseline["summary"]["inhaled_dose"]
    assert used(client, token) == PLAN_COST  # a completed plan keeps its charge


def test_the_completed_result_has_the_contract_shape(
    core: CleanAir,
    client: Client,
    token: str,
) -> None:
    request_id = submitted(client, token)
    run_next(core)
    body = poll(client, token, request_id).json()
    assert set(body) <= {"status", "result", "error"}
    result = body["result"]
    assert {"activity_type", "routes", "original_distance"} <= set(result)
    assert set(result) <= {
        "activity_type",
        "routes",
        "original_distance",
        "original_clean_air_score",
        "original_dose",
        "best_route_index",
    }
    assert result["activity_type"] in {"walking", "cycling", "running"}
    assert isinstance(result["original_distance"], int | float)
    assert isinstance(result.get("original_clean_air_score"), int | float | None)
    assert isinstance(result.get("original_dose"), int | float | None)
    best = result.get("best_route_index", 0)
    assert type(best) is int
    assert 0 <= best < len(result["routes"])
    for route in result["routes"]:
        required = {
            "waypoints",
            "summary",
            "distance",
            "distance_delta",
            "clean_air_score_delta_pct",
            "goal",
        }
        optional = {"measures", "dose_delta_pct", "duration"}
        assert required <= set(route) <= required | optional
        assert route["waypoints"]
        for waypoint in route["waypoints"]:
            assert len(waypoint) == 2
            assert all(isinstance(v, float) for v in waypoint)
        for name, values in route.get("measures", {}).items():
            assert isinstance(name, str)
            assert len(values) == len(route["waypoints"])
            assert all(v is None or isinstance(v, int | float) for v in values)
        summary = route["summary"]
        assert set(summary) == {"clean_air_score", "inhaled_dose", "average_pollutants"}
        assert set(summary["clean_air_score"]) == {"score", "band", "description", "colour"}
        assert isinstance(route["distance"], int | float)
        assert type(route["distance_delta"]) is int
        assert isinstance(route["clean_air_score_delta_pct"], int | float)
        assert isinstance(route.get("dose_delta_pct"), int | float | None)
        assert isinstance(route.get("duration"), int | float | None)
        assert route["duration"] is not None
        assert route["duration"] > 0
        goal = route["goal"]
        assert set(goal) == {"title", "description"}
        assert isinstance(goal["title"], str)
        assert goal["title"]
        assert isinstance(goal["description"], str)
        assert goal["description"]


def test_polling_a_finished_plan_is_stable_and_free(
    core: CleanAir,
    client: Client,
    token: str,
) -> None:
    request_id = submitted(client, token)
    run_next(core)
    first = poll(client, token, request_id).json()
    for _ in range(5):
        assert poll(client, token, request_id).json() == first
    assert used(client, token) == PLAN_COST
    assert run_next(core) is None  # a completed plan is never taken again


def test_a_plan_the_planner_rejects_fails_readably_and_is_refunded(
    core: CleanAir,
    client: Client,
    token: str,
) -> None:
    # The start lies about 1 km south of the grid: no network covers it.
    outside = Point(ORIGIN.lat - 0.01, ORIGIN.lon)
    request_id = submitted(client, token, plan_body(start=outside))
    assert used(client, token) == PLAN_COST
    run_next(core)
    response = poll(client, token, request_id)
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "failed"
    assert body.get("result") is None
    assert body["error"] == "No street network covers the start and the end"
    assert quota(client, token)["used"] == 0
    assert quota(client, token)["daily_used"] == 0
    # The refund is made once: polling again changes nothing.
    assert poll(client, token, request_id).json() == body
    assert used(client, token) == 0


def test_a_plan_without_any_network_fails_and_is_refunded(
    core: CleanAir,
    client: Client,
    token: str,
    clock: ManualClock,
    air: AirByLatitude,
) -> None:
    request_id = submitted(client, token)
    no_networks = CleanAir(
        core.store, core.keys, core.policy, clock, sources=Sources(air, None, FakeIp())
    )
    asyncio.run(no_networks.work_on_next_plan())
    body = poll(client, token, request_id).json()
    assert body["status"] == "failed"
    assert body["error"] == "No street network is loaded"
    assert used(client, token) == 0


def test_a_refund_makes_room_for_another_plan(
    core: CleanAir,
    client: Client,
    token: str,
    clock: ManualClock,
) -> None:
    outside = Point(ORIGIN.lat - 0.01, ORIGIN.lon)
    rejected = submitted(client, token, plan_body(start=outside))
    clock.advance(1)  # plans are taken oldest first
    for _ in range(3):
        submitted(client, token)
    assert submit(client, token).status_code == 429
    assert run_next(core) == uuid.UUID(rejected)
    assert quota(client, token)["daily_used"] == 3 * PLAN_COST
    assert submit(client, token).status_code == 202


# -- GET /v1/routes/{request_id}: who may poll ------------------------------------------------


def test_polling_needs_a_token(
    client: Client,
    token: str,
) -> None:
    request_id = submitted(client, token)
    assert client.get(f"{ROUTES}/{request_id}").status_code == 401


def test_polling_needs_the_routes_plan_scope(
    core: CleanAir,
    client: Client,
    token: str,
) -> None:
    request_id = submitted(client, token)
    # The same user, a connection without routes:plan: the plan is theirs, the scope is not.
    limited = user_token(core, "alice", [Scope.AQ_READ, Scope.AQ_ROUTES])
    response = poll(client, limited, request_id)
    assert response.status_code == 403
    assert "routes:plan" in response.json()["detail"]
    partner = partner_token(core, [Scope.AQ_READ])
    assert poll(client, partner, request_id).status_code == 403


def test_the_poll_scope_is_checked_before_the_request_id(
    core: CleanAir,
    client: Client,
) -> None:
    limited = user_token(core, "alice", [Scope.AQ_READ, Scope.AQ_ROUTES])
    assert poll(client, limited, "not-a-uuid").status_code == 403


def test_polling_is_not_premium_gated(
    core: CleanAir,
    client: Client,
    token: str,
) -> None:
    request_id = submitted(client, token)
    core.set_premium("alice", False)
    pending = poll(client, token, request_id)
    assert pending.status_code == 200
    assert pending.json()["status"] == "pending"
    run_next(core)
    completed = poll(client, token, request_id)
    assert completed.status_code == 200
    assert completed.json()["status"] == "completed"
    assert completed.json()["result"]["routes"]
    # Submitting, though, is premium-gated.
    assert submit(client, token).status_code == 403


def test_polling_is_free(
    core: CleanAir,
    client: Client,
    token: str,
) -> None:
    request_id = submitted(client, token)
    before = quota(client, token)
    for _ in range(10):
        assert poll(client, token, request_id).status_code == 200
    assert quota(client, token) == before
    run_next(core)
    for _ in range(10):
        assert poll(client, token, request_id).status_code == 200
    assert quota(client, token) == before


def test_polling_with_exhausted_credits_still_works(
    client: Client,
    token: str,
) -> None:
    request_id = submitted(client, token)
    for _ in range(3):
        submitted(client, token)
    assert quota(client, token)["daily_remaining"] == 0
    assert poll(client, token, request_id).status_code == 200


def test_an_unknown_plan_is_404(
    client: Client,
    token: str,
) -> None:
    response = poll(client, token, str(uuid.uuid4()))
    assert response.status_code == 404
    assert set(response.json()) == {"detail"}


def test_another_users_plan_is_404_like_an_unknown_one(
    core: CleanAir,
    client: Client,
    token: str,
) -> None:
    request_id = submitted(client, token)
    bob = pair(core, client, user="bob")
    response = poll(client, bob, request_id)
    assert response.status_code == 404
    assert response.json() == poll(client, bob, str(uuid.uuid4())).json()
    assert "status" not in response.text
    # Bob's own plan is his, and Alice's stays hers.
    bobs = submitted(client, bob)
    assert poll(client, bob, bobs).status_code == 200
    assert poll(client, token, bobs).status_code == 404
    assert poll(client, token, request_id).status_code == 200


def test_a_partner_cannot_poll_a_users_plan(
    core: CleanAir,
    client: Client,
    token: str,
) -> None:
    request_id = submitted(client, token)
    partner = partner_token(core, [Scope.ROUTES_PLAN])
    assert poll(client, partner, request_id).status_code == 404


def test_a_partner_named_like_the_user_cannot_poll_the_users_plan(
    core: CleanAir,
    client: Client,
    token: str,
) -> None:
    request_id = submitted(client, token)
    core.add_partner("alice")
    namesake = core.issue_partner_token("alice", "integration", [Scope.ROUTES_PLAN]).token
    response = poll(client, namesake, request_id)
    assert response.status_code == 404
    assert "status" not in response.text


def test_any_connection_of_the_same_user_may_poll(
    core: CleanAir,
    client: Client,
) -> None:
    phone = pair(core, client, name="phone")
    watch = pair(core, client, name="watch")
    request_id = submitted(client, phone)
    assert poll(client, watch, request_id).json()["status"] == "pending"
    run_next(core)
    assert poll(client, watch, request_id).json()["status"] == "completed"
    # Even after the submitting connection is revoked the plan stays the user's.
    (submitter,) = [c for c in core.connections_of_user("alice") if c.name == "phone"]
    core.revoke_connection(submitter.id)
    assert poll(client, phone, request_id).status_code == 401
    assert poll(client, watch, request_id).json()["status"] == "completed"


@pytest.mark.parametrize(
    "bad_id", ["not-a-uuid", "1234", "0" * 31, str(uuid.uuid4())[:-1], str(uuid.uuid4()) + "0"]
)
def test_a_malformed_request_id_is_422(
    client: Client,
    token: str,
    bad_id: str,
) -> None:
    response = poll(client, token, bad_id)
    assert response.status_code == 422
    assert response.json() == VALIDATION_FAILED
    assert bad_id not in response.text


def test_polls_are_limited_to_60_a_minute_per_connection(
    core: CleanAir,
    client: Client,
    token: str,
    clock: ManualClock,
) -> None:
    request_id = submitted(client, token)
    other = pair(core, client, name="other")
    for _ in range(60):
        assert poll(client, token, request_id).status_code == 200
    limited = poll(client, token, request_id)
    assert limited.status_code == 429
    assert limited.headers["retry-after"] == "45"
    assert limited.json() == {"detail": "Rate limit exceeded"}
    # Per connection: another connection of the same user still polls.
    assert poll(client, other, request_id).status_code == 200
    # Polls have their own limit: the connection can still submit and read its quota.
    assert submit(client, token).status_code == 202
    assert used(client, token) == 2 * PLAN_COST
    # The window resets on the minute.
    clock.advance(44)
    assert poll(client, token, request_id).status_code == 429
    clock.advance(1)
    for _ in range(60):
        assert poll(client, token, request_id).status_code == 200
    assert poll(client, token, request_id).status_code == 429


def test_polls_of_unknown_ids_count_against_the_limit(
    client: Client,
    token: str,
) -> None:
    for _ in range(60):
        assert poll(client, token, str(uuid.uuid4())).status_code == 404
    limited = poll(client, token, str(uuid.uuid4()))
    assert limited.status_code == 429
    assert "retry-after" in limited.headers


def test_polls_do_not_use_up_the_general_rate_limit(
    core: CleanAir,
    clock: ManualClock,
) -> None:
    strict = with_policy(core, clock, requests_per_minute=3)
    with TestClient(create_app(strict, Settings(plan_workers=0))) as client:
        token = pair(strict, client)
        request_id = submitted(client, token)
        for _ in range(30):
            assert poll(client, token, request_id).status_code == 200
        assert submit(client, token).status_code == 202


def test_a_pruned_plan_is_404(
    core: CleanAir,
    client: Client,
    token: str,
    clock: ManualClock,
) -> None:
    old = submitted(client, token)
    run_next(core)
    clock.advance(core.policy.plan_retention_seconds + 1)
    recent = submitted(client, token)
    run_next(core)
    assert core.prune_plans() == 1
    assert poll(client, token, old).status_code == 404
    assert poll(client, token, recent).json()["status"] == "completed"


# -- the background worker --------------------------------------------------------------------


class WatchedCore(CleanAir):
    """Tells a test's thread when a runner found nothing to do and when a plan has run, so
    the test waits for those steps rather than for time to pass."""

    def __init__(self, core: CleanAir) -> None:
        super().__init__(
            core.store,
            core.keys,
            core.policy,
            core.clock,
            sources=core.sources,
            offload=core.context.offload,
        )
        self.found_nothing = threading.Event()
        self.ran = threading.Event()

    def claim_next_plan(self) -> Plan | None:
        plan = super().claim_next_plan()
        if plan is None:
            self.found_nothing.set()
        return plan

    async def run_plan(self, plan: Plan) -> None:
        try:
            await super().run_plan(plan)
        finally:
            self.ran.set()


@pytest.fixture
def watched(core: CleanAir) -> WatchedCore:
    return WatchedCore(core)


def test_the_background_worker_completes_a_plan(watched: WatchedCore) -> None:
    with TestClient(create_app(watched, Settings(plan_workers=1))) as client:
        token = pair(watched, client)
        request_id = submitted(client, token)
        assert watched.ran.wait(timeout=10)
        body = poll(client, token, request_id).json()
        assert body["status"] == "completed"
        assert body["result"]["routes"][0]["goal"]["title"] == "Cleanest air"
        assert used(client, token) == PLAN_COST


def test_a_submitted_plan_wakes_an_idle_worker(watched: WatchedCore) -> None:
    # An idle runner would look again only after two minutes: the submission must wake it.
    settings = Settings(plan_workers=1, plan_worker_idle_seconds=120)
    with TestClient(create_app(watched, settings)) as client:
        token = pair(watched, client)
        assert watched.found_nothing.wait(timeout=10)  # the runner has gone idle
        request_id = submitted(client, token)
        assert watched.ran.wait(timeout=10)
        assert poll(client, token, request_id).json()["status"] == "completed"
        assert used(client, token) == PLAN_COST


def test_the_background_worker_refunds_a_rejected_plan(watched: WatchedCore) -> None:
    with TestClient(create_app(watched, Settings(plan_workers=1))) as client:
        token = pair(watched, client)
        outside = Point(ORIGIN.lat - 0.01, ORIGIN.lon)
        request_id = submitted(client, token, plan_body(start=outside))
        assert watched.ran.wait(timeout=10)
        body = poll(client, token, request_id).json()
        assert body["status"] == "failed"
        assert body["error"]
        assert used(client, token) == 0


# -- OpenAPI ----------------------------------------------------------------------------------


def test_openapi_lists_the_plan_statuses(client: Client) -> None:
    schema = client.get("/schema/openapi.json").json()
    submit_op = schema["paths"]["/v1/routes"]["post"]
    assert set(submit_op["responses"]) == {"202", "400", "401", "403", "422", "429", "503"}
    assert submit_op["security"] == [{"BearerAuth": []}]
    poll_op = schema["paths"]["/v1/routes/{request_id}"]["get"]
    assert set(poll_op["responses"]) == {"200", "401", "403", "404", "422", "429", "503"}
    assert poll_op["security"] == [{"BearerAuth": []}]

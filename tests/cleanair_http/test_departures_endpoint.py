"""POST /ext/v1/routes/departures and GET /ext/v1/routes/departures/{request_id}: the best time
to go, an asynchronous plan with a route plan's auth, scope, charge, polling limit and error
envelope (issue 24).

Plans run deterministically: the app is built without background workers and a test runs
the worker step itself (`core.work_on_next_plan()`).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from cleanair_core import CleanAir, ManualClock
from cleanair_core.access.scopes import Scope
from cleanair_core.air.pollutants import Concentrations, Pollutant
from cleanair_core.air.quality_source import Sample
from cleanair_core.geo import Point
from cleanair_core.ports import Sources
from cleanair_core.routes.plans import DeparturesRequest, PlanKind
from cleanair_runtime.composition.settings import Settings
from cleanair_sources.street_router import LoadedNetworks
from support.fakes import FakeIp, FakeNamer
from support.http import Client, MakeClient, bearer, pair, partner_token, user_token
from support.networks import DLAT, DLON, ORIGIN, grid

DEPARTURES = "/ext/v1/routes/departures"
ROUTES = "/v1/routes"
#: 15 seconds past the minute, as in the route plan tests: a poll window resets in 45 s.
NOW = datetime(2026, 11, 22, 10, 0, 15, tzinfo=UTC)
VALIDATION_FAILED = {"detail": "Request validation failed"}
COST = 25
ROWS, COLS = 3, 10
EDGE_LAT = ORIGIN.lat + DLAT / 2
#: The air's factor in each hour from 10:00: the trip is cleanest leaving at 13:00.
FACTORS = (1.0, 0.5, 2.0, 0.25, 1.0)


def at(i: int, j: int) -> Point:
    return Point(ORIGIN.lat + i * DLAT, ORIGIN.lon + j * DLON)


def location(point: Point) -> dict[str, float]:
    return {"latitude": point.lat, "longitude": point.lon}


def body(start: Point | None = None, end: Point | None = None, **extra: Any) -> dict[str, Any]:
    """Along the dirty row 0, leaving every hour from 10:00:15 to 13:00:15 by default."""
    return {
        "start": location(start or at(0, 0)),
        "end": location(end or at(0, COLS - 1)),
        "activity_type": "walking",
        "earliest": NOW.isoformat(),
        "latest": (NOW + timedelta(hours=3)).isoformat(),
        "step_minutes": 60,
        **extra,
    }


class HourlyAir:
    """NO2 dirty south of EDGE_LAT and clean north of it, scaled per hour by FACTORS."""

    update_interval = 3600

    async def concentrations(self, samples: Sequence[Sample]) -> list[Concentrations]:
        return [self.at(s) for s in samples]

    @staticmethod
    def at(sample: Sample) -> Concentrations:
        hour = int((sample.at - NOW.replace(minute=0, second=0)).total_seconds() // 3600)
        street = 90.0 if sample.point.lat < EDGE_LAT else 30.0
        return {Pollutant.NO2: street * FACTORS[hour], Pollutant.PM25: 5.0}


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(NOW)


@pytest.fixture
def sources() -> Sources:
    networks = LoadedNetworks([grid(ROWS, COLS)])
    return Sources(HourlyAir(), None, FakeIp(), FakeNamer(), networks=networks)


@pytest.fixture
def client(make_client: MakeClient) -> Client:
    return make_client(Settings(plan_workers=0))


@pytest.fixture
def token(core: CleanAir, client: Client) -> str:
    return pair(core, client)


def run_next(core: CleanAir) -> None:
    asyncio.run(core.work_on_next_plan())


def submit(client: Client, token: str, payload: Any = None) -> Any:
    return client.post(
        DEPARTURES, json=body() if payload is None else payload, headers=bearer(token)
    )


def submitted(client: Client, token: str, payload: Any = None) -> str:
    response = submit(client, token, payload)
    assert response.status_code == 202, response.text
    request_id: str = response.json()["request_id"]
    return request_id


def poll(client: Client, token: str, request_id: str) -> Any:
    return client.get(f"{DEPARTURES}/{request_id}", headers=bearer(token))


def used(client: Client, token: str) -> int:
    response = client.get("/v1/quota", headers=bearer(token))
    assert response.status_code == 200
    value: int = response.json()["used"]
    return value


def completed(core: CleanAir, client: Client, token: str, payload: Any = None) -> dict[str, Any]:
    request_id = submitted(client, token, payload)
    run_next(core)
    response = poll(client, token, request_id)
    assert response.status_code == 200
    answer: dict[str, Any] = response.json()
    assert answer["status"] == "completed", answer
    result: dict[str, Any] = answer["result"]
    return result


# -- POST: 202 -------------------------------------------------------------------------------


def test_a_departures_plan_is_accepted_charged_25_credits_and_stored_with_its_window(
    core: CleanAir, client: Client, token: str
) -> None:
    # Without an offset a time is read as UTC, as a route plan's start_time.
    naive = body(earliest="2026-11-22T10:00:15", latest="2026-11-22T13:00:15")
    response = submit(client, token, naive)
    assert response.status_code == 202
    assert set(response.json()) == {"request_id"}
    assert used(client, token) == COST
    stored = core.store.get_plan(uuid.UUID(response.json()["request_id"]))
    assert stored is not None
    assert stored.kind is PlanKind.DEPARTURES
    assert stored.request == DeparturesRequest(
        at(0, 0),
        at(0, COLS - 1),
        stored.request.activity,
        NOW,
        NOW + timedelta(hours=3),
        timedelta(minutes=60),
    )
    assert poll(client, token, str(stored.id)).json() == {
        "status": "pending",
        "result": None,
        "error": None,
    }


def test_the_step_defaults_to_30_minutes(core: CleanAir, client: Client, token: str) -> None:
    payload = body()
    del payload["step_minutes"]
    stored = core.store.get_plan(uuid.UUID(submitted(client, token, payload)))
    assert isinstance(stored.request if stored else None, DeparturesRequest)
    assert stored is not None
    assert len(stored.request.start_times) == 7  # type: ignore[union-attr]


# -- the result -------------------------------------------------------------------------------


def test_the_result_lists_every_departure_and_picks_the_cleanest(
    core: CleanAir, client: Client, token: str
) -> None:
    result = completed(core, client, token)
    assert set(result) == {"departures", "best", "baseline_dose", "dose_saved_pct"}
    departures = result["departures"]
    times = [datetime.fromisoformat(d["start_time"]) for d in departures]
    assert times == [NOW + timedelta(hours=k) for k in range(4)]
    for departure in departures:
        assert set(departure) == {"start_time", "dose", "clean_air_score", "distance"}
        assert departure["dose"] > 0
        assert 0 <= departure["clean_air_score"] <= 100
        assert departure["distance"] > 0
    doses = [d["dose"] for d in departures]
    # The air's factor orders the departures: cleanest at 13:00, dirtiest at 12:00.
    assert doses.index(min(doses)) == FACTORS.index(min(FACTORS[:4]))
    best = result["best"]
    assert datetime.fromisoformat(best["start_time"]) == NOW + timedelta(hours=3)
    assert best["dose"] == min(doses)
    route = best["route"]
    assert {"waypoints", "measures", "summary", "distance", "goal", "duration"} <= set(route)
    assert route["summary"]["inhaled_dose"] == best["dose"]


def test_the_saving_is_against_the_direct_route_leaving_at_the_earliest(
    core: CleanAir, client: Client, token: str
) -> None:
    result = completed(core, client, token)
    # The direct route at 10:00: what a route plan leaving then reports as its original dose.
    plan = client.post(
        ROUTES,
        json={k: body()[k] for k in ("start", "end", "activity_type")}
        | {"start_time": NOW.isoformat()},
        headers=bearer(token),
    )
    assert plan.status_code == 202
    run_next(core)
    planned = client.get(f"{ROUTES}/{plan.json()['request_id']}", headers=bearer(token)).json()
    assert result["baseline_dose"] == planned["result"]["original_dose"]
    expected = (result["baseline_dose"] - result["best"]["dose"]) / result["baseline_dose"] * 100
    assert result["dose_saved_pct"] == pytest.approx(expected, abs=0.05)
    assert result["dose_saved_pct"] > 50  # a quarter of the air, and a cleaner street


def test_a_departures_dose_is_what_route_enrichment_reports_for_it(
    core: CleanAir, client: Client, token: str
) -> None:
    best = completed(core, client, token)["best"]
    route = best["route"]
    enriched = client.post(
        "/v1/airquality/routes",
        json={
            "waypoints": [{"lat": lat, "lon": lon} for lat, lon in route["waypoints"]],
            "start_time": best["start_time"],
            "activity_type": "walking",
        },
        headers=bearer(token),
    )
    assert enriched.status_code == 200
    assert enriched.json()["summary"]["inhaled_dose"] == pytest.approx(best["dose"], rel=0.01)


def test_a_trip_that_cannot_be_planned_fails_readably_and_is_refunded(
    core: CleanAir, client: Client, token: str
) -> None:
    outside = Point(ORIGIN.lat - 0.01, ORIGIN.lon)
    request_id = submitted(client, token, body(start=outside))
    assert used(client, token) == COST
    run_next(core)
    answer = poll(client, token, request_id).json()
    assert answer["status"] == "failed"
    assert answer["error"] == "No street network covers the start and the end"
    assert answer["result"] is None
    assert used(client, token) == 0


# -- POST: 400, 401, 403, 422, 429 -------------------------------------------------------------


@pytest.mark.parametrize(
    "payload",
    [
        body(end=Point(ORIGIN.lat, ORIGIN.lon + 0.3)),  # about 16.7 km
        body(
            latest=(NOW + timedelta(hours=85)).isoformat(),
            earliest=(NOW + timedelta(hours=70)).isoformat(),
        ),  # beyond the horizon
        body(
            earliest=(NOW - timedelta(days=31)).isoformat(),
            latest=(NOW - timedelta(days=30, hours=12)).isoformat(),
        ),  # before the window
    ],
    ids=["over-15-km", "beyond-the-forecast", "before-the-data"],
)
def test_a_trip_or_window_out_of_reach_is_400_and_not_charged(
    core: CleanAir, client: Client, token: str, payload: dict[str, Any]
) -> None:
    response = submit(client, token, payload)
    assert response.status_code == 400
    assert set(response.json()) == {"detail"}
    assert used(client, token) == 0
    assert core.claim_next_plan() is None


def _without(key: str) -> dict[str, Any]:
    payload = body()
    del payload[key]
    return payload


INVALID = [
    (
        "latest-before-earliest",
        body(latest=(NOW - timedelta(minutes=1)).isoformat()),
        "latest",
        "minimum",
    ),
    (
        "over-24-hours",
        body(latest=(NOW + timedelta(hours=24, seconds=1)).isoformat()),
        "latest",
        "maximum",
    ),
    ("step-4", body(step_minutes=4), "step_minutes", "minimum"),
    ("step-241", body(step_minutes=241), "step_minutes", "maximum"),
    ("step-float", body(step_minutes=30.5), "step_minutes", "type"),
    ("step-string", body(step_minutes="30"), "step_minutes", "type"),
    ("missing-earliest", _without("earliest"), "earliest", "required"),
    ("missing-latest", _without("latest"), "latest", "required"),
    ("missing-start", _without("start"), "start", "required"),
    ("driving", body(activity_type="driving"), "activity_type", "enum"),
    ("earliest-garbage", body(earliest="tomorrow morning"), "earliest", "format"),
    (
        "lat-91",
        {**body(), "start": {"latitude": 91.0, "longitude": 24.94}},
        "start.latitude",
        "maximum",
    ),
    ("array", [body()], "", "type"),
]


@pytest.mark.parametrize(
    ("payload", "field", "rule"), [p[1:] for p in INVALID], ids=[p[0] for p in INVALID]
)
def test_an_invalid_request_is_422_naming_the_field_and_rule_and_not_charged(
    client: Client, token: str, payload: Any, field: str, rule: str
) -> None:
    response = submit(client, token, payload)
    assert response.status_code == 422
    answer = response.json()
    assert answer["detail"] == VALIDATION_FAILED["detail"]
    assert [(e["field"], e["rule"]) for e in answer["errors"]] == [(field, rule)]
    assert "tomorrow" not in response.text
    assert "driving" not in response.text
    assert used(client, token) == 0


def test_exactly_24_hours_apart_is_accepted(client: Client, token: str) -> None:
    payload = body(latest=(NOW + timedelta(hours=24)).isoformat(), step_minutes=240)
    assert submit(client, token, payload).status_code == 202


def test_submitting_needs_a_token(client: Client) -> None:
    assert client.post(DEPARTURES, json=body()).status_code == 401


def test_submitting_needs_the_plan_scope_a_premium_user_and_no_partner(
    core: CleanAir, client: Client, token: str
) -> None:
    limited = user_token(core, "bob", [Scope.AQ_READ, Scope.AQ_ROUTES])
    refused = submit(client, limited)
    assert refused.status_code == 403
    assert "routes:plan" in refused.json()["detail"]
    partner = partner_token(core, [Scope.ROUTES_PLAN])
    assert submit(client, partner).json() == {"detail": "Partner connections cannot do this"}
    core.set_premium("alice", False)
    lapsed = submit(client, token)
    assert lapsed.status_code == 403
    assert "premium" in lapsed.json()["detail"]
    assert used(client, token) == 0
    assert core.claim_next_plan() is None


def test_the_daily_burst_cap_counts_departures_with_route_plans(client: Client, token: str) -> None:
    # 100 credits a day: two of each kind fit, the fifth plan of either kind does not.
    for _ in range(2):
        assert submit(client, token).status_code == 202
        route_plan = {k: body()[k] for k in ("start", "end", "activity_type")}
        assert client.post(ROUTES, json=route_plan, headers=bearer(token)).status_code == 202
    refused = submit(client, token)
    assert refused.status_code == 429
    assert "retry-after" in refused.headers
    assert used(client, token) == 4 * COST


# -- GET: 200, 401, 403, 404, 422, 429 ----------------------------------------------------------


def test_polling_is_free_and_open_to_a_lapsed_user(
    core: CleanAir, client: Client, token: str
) -> None:
    request_id = submitted(client, token)
    run_next(core)
    core.set_premium("alice", False)
    for _ in range(3):
        assert poll(client, token, request_id).json()["status"] == "completed"
    assert used(client, token) == COST


def test_polling_needs_a_token_and_the_scope(core: CleanAir, client: Client, token: str) -> None:
    request_id = submitted(client, token)
    assert client.get(f"{DEPARTURES}/{request_id}").status_code == 401
    limited = user_token(core, "alice", [Scope.AQ_READ])
    assert poll(client, limited, request_id).status_code == 403


def test_each_kind_of_plan_is_polled_at_its_own_endpoint(
    core: CleanAir, client: Client, token: str
) -> None:
    departures = submitted(client, token)
    route_plan = {k: body()[k] for k in ("start", "end", "activity_type")}
    plan = client.post(ROUTES, json=route_plan, headers=bearer(token)).json()["request_id"]
    assert poll(client, token, plan).status_code == 404
    assert client.get(f"{ROUTES}/{departures}", headers=bearer(token)).status_code == 404
    assert poll(client, token, departures).status_code == 200


def test_an_unknown_or_another_users_plan_is_404(
    core: CleanAir, client: Client, token: str
) -> None:
    request_id = submitted(client, token)
    other = pair(core, client, user="bob")
    assert poll(client, other, request_id).status_code == 404
    unknown = poll(client, token, str(uuid.uuid4()))
    assert unknown.status_code == 404
    assert set(unknown.json()) == {"detail"}


@pytest.mark.parametrize("bad_id", ["not-a-uuid", "{" + str(uuid.UUID(int=1)) + "}", "1" * 32])
def test_a_malformed_request_id_is_422(client: Client, token: str, bad_id: str) -> None:
    response = poll(client, token, bad_id)
    assert response.status_code == 422
    assert response.json() == {
        **VALIDATION_FAILED,
        "errors": [
            {
                "field": "request_id",
                "rule": "format",
                "message": "must be a UUID in its hyphenated form",
            }
        ],
    }
    assert bad_id not in response.text


def test_polls_share_the_route_plans_limit_of_60_a_minute(
    core: CleanAir, client: Client, token: str, clock: ManualClock
) -> None:
    departures = submitted(client, token)
    route_plan = {k: body()[k] for k in ("start", "end", "activity_type")}
    plan = client.post(ROUTES, json=route_plan, headers=bearer(token)).json()["request_id"]
    for _ in range(30):
        assert poll(client, token, departures).status_code == 200
        assert client.get(f"{ROUTES}/{plan}", headers=bearer(token)).status_code == 200
    limited = poll(client, token, departures)
    assert limited.status_code == 429
    assert limited.headers["retry-after"] == "45"
    assert limited.json() == {"detail": "Rate limit exceeded"}
    clock.advance(45)
    assert poll(client, token, departures).status_code == 200


# -- OpenAPI ---------------------------------------------------------------------------------


def test_openapi_documents_both_endpoints_in_the_extension(client: Client) -> None:
    document = client.get("/schema/openapi.json").json()
    submit_op = document["paths"][DEPARTURES]["post"]
    poll_op = document["paths"][f"{DEPARTURES}/{{request_id}}"]["get"]
    assert submit_op["tags"] == poll_op["tags"] == ["extension v1.0.0"]
    assert set(submit_op["responses"]) == {"202", "400", "401", "403", "422", "429", "503"}
    assert set(poll_op["responses"]) == {"200", "401", "403", "404", "422", "429", "503"}
    schemas = document["components"]["schemas"]
    # Every field says what it is, with its units where it has any.
    for name in ("DeparturesRequest", "Departure", "BestDeparture", "DeparturesResult"):
        for field, spec in schemas[name]["properties"].items():
            assert spec.get("description"), (name, field)
    assert "metres" in schemas["Departure"]["properties"]["distance"]["description"]
    assert "percent" in schemas["DeparturesResult"]["properties"]["dose_saved_pct"]["description"]

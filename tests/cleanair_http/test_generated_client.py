"""A client generated from the served OpenAPI document (openapi-python-client, offline) works
against the app: every endpoint, its errors included, with typed, parsed responses.

The generated clients raise on any status the document does not declare, so these tests also
prove that every status met here is documented, with its body's schema.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from litestar.testing import TestClient

from cleanair_core import CleanAir, ManualClock, Policy, TokenKeys, generate_key
from cleanair_core.access.scopes import Scope
from cleanair_core.credits.ledger import CreditLimits
from cleanair_core.ports import Sources
from cleanair_core.routes.plans import POLLS_PER_MINUTE
from cleanair_http.app import create_app
from cleanair_http.errors import VALIDATION_FAILED
from cleanair_runtime.composition.settings import Settings
from cleanair_sources.street_router import LoadedNetworks
from cleanair_storage.memory import MemoryStore
from support.fakes import FakeGeolocator, FakeIp, FakeNamer, FakeSource
from support.http import Client, MakeClient
from support.networks import DLAT, DLON, ORIGIN, grid

PACKAGE = "cleanair_generated_client"
_NOWHERE = "http://127.0.0.1:9"
#: Half a minute past the minute: a rate-limit window resets in 30 s.
NOW = datetime(2026, 11, 22, 10, 0, 30, tzinfo=UTC)
ROWS, COLS = 4, 10
#: Per generated module: the operation's module under the package's `api`.
REDEEM = "connections.v1_connections_token_redeem_pairing_code"
QUOTA = "quota.v1_quota_read_quota"
SCORE = "air_quality.v1_airquality_score_score_point"
FORECAST = "air_quality.v1_airquality_forecast_forecast_day"
ENRICH = "air_quality.v1_airquality_routes_enrich_route"
SUBMIT = "route_plans.v1_routes_submit_plan"
POLL = "route_plans.v1_routes_request_id_poll_plan"


def _document() -> str:
    """The document as the app serves it (it depends on no state: any core will do)."""
    core = CleanAir(MemoryStore(), TokenKeys(generate_key()), Policy(), ManualClock(NOW))
    with TestClient(create_app(core, Settings(plan_workers=0))) as client:
        response = client.get("/schema/openapi.json")
    assert response.status_code == 200
    return response.text


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModuleType]:
    """The generated package, imported; generated once for the module (it takes a second)."""
    root = tmp_path_factory.mktemp("generated")
    (root / "openapi.json").write_text(_document())
    # No post hooks: the generator would run ruff over its output, which the test needs not.
    # A heatmap tile's PNG is, to the generator, a file of bytes.
    config = {
        "post_hooks": [],
        "package_name_override": PACKAGE,
        "content_type_overrides": {"image/png": "application/octet-stream"},
    }
    (root / "config.json").write_text(json.dumps(config))
    generator = Path(sys.executable).with_name("openapi-python-client")
    result = subprocess.run(
        [
            str(generator),
            "generate",
            "--path",
            str(root / "openapi.json"),
            "--output-path",
            str(root / PACKAGE),
            "--meta",
            "none",
            "--config",
            str(root / "config.json"),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        # Offline by construction: any attempt to reach a network goes to a closed port.
        env={**os.environ, "HTTP_PROXY": _NOWHERE, "HTTPS_PROXY": _NOWHERE, "NO_PROXY": ""},
    )
    # Warnings mean parts of the document the generator could not turn into types.
    assert result.returncode == 0, result.stdout + result.stderr
    assert "warning" not in (result.stdout + result.stderr).lower(), result.stdout
    sys.path.insert(0, str(root))
    try:
        package = importlib.import_module(PACKAGE)
        importlib.import_module(f"{PACKAGE}.models")
        yield package
    finally:
        sys.path.remove(str(root))
        for name in [n for n in sys.modules if n.split(".")[0] == PACKAGE]:
            del sys.modules[name]


def operation(api: ModuleType, name: str) -> Any:
    return importlib.import_module(f"{api.__name__}.api.{name}")


def caller(api: ModuleType, http: Client, token: str | None = None) -> Any:
    """A generated client over the test client, as the holder of `token` or as nobody.

    `set_httpx_client` hands the generated client our httpx client as it is, headers
    included, so the token goes on the test client itself."""
    http.headers.pop("Authorization", None)
    base_url = str(http.base_url)
    if token is None:
        generated = api.Client(base_url=base_url, raise_on_unexpected_status=True)
    else:
        http.headers["Authorization"] = f"Bearer {token}"
        generated = api.AuthenticatedClient(
            base_url=base_url, token=token, raise_on_unexpected_status=True
        )
    return generated.set_httpx_client(http)


def parsed(response: Any, status: int, model: type) -> Any:
    """The typed body of a generated client's response, checked against `status`."""
    assert response.status_code == status, response.content
    assert isinstance(response.parsed, model), response.parsed
    return response.parsed


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(NOW)


@pytest.fixture
def sources() -> Sources:
    """Air everywhere, no Wi-Fi location, and a street grid so that plans complete."""
    return Sources(
        FakeSource(),
        FakeGeolocator(None),
        FakeIp(),
        FakeNamer(),
        networks=LoadedNetworks([grid(ROWS, COLS)]),
    )


@pytest.fixture
def http(make_client: MakeClient) -> Client:
    """No background workers: the plan test runs its plan itself."""
    return make_client(Settings(plan_workers=0))


def redeem(api: ModuleType, http: Client, core: CleanAir, user: str = "alice") -> Any:
    if core.store.get_user(user) is None:
        core.add_user(user)
    body = api.models.RedeemPairingCode(code=core.create_pairing_code(user), name="generated")
    response = operation(api, REDEEM).sync_detailed(client=caller(api, http), body=body)
    return parsed(response, 201, api.models.Connection)


def test_pairing_and_quota(api: ModuleType, core: CleanAir, http: Client) -> None:
    models, errors = api.models, api.models.ErrorResponse
    connection = redeem(api, http, core)
    assert isinstance(connection.connection_id, uuid.UUID)
    assert (connection.name, sorted(connection.scopes)) == (
        "generated",
        ["aq:read", "aq:routes", "routes:plan"],
    )
    pairing = operation(api, REDEEM)
    refused = pairing.sync_detailed(
        client=caller(api, http), body=models.RedeemPairingCode(code="000000", name="x")
    )
    assert parsed(refused, 401, errors).detail
    # The generated models do not check patterns: the server does, without echoing input.
    invalid = pairing.sync_detailed(
        client=caller(api, http), body=models.RedeemPairingCode(code="12", name="x")
    )
    assert parsed(invalid, 422, errors).detail == VALIDATION_FAILED

    read_quota = operation(api, QUOTA)
    quota = parsed(
        read_quota.sync_detailed(client=caller(api, http, connection.token)), 200, models.Quota
    )
    assert (quota.used, quota.limit, quota.daily_limit) == (0, 1000, 100)
    unknown = read_quota.sync_detailed(client=caller(api, http, "ca_tst_" + "B" * 43))
    assert parsed(unknown, 401, errors).detail


def test_air_quality(api: ModuleType, core: CleanAir, http: Client) -> None:
    models, errors = api.models, api.models.ErrorResponse
    token = redeem(api, http, core).token

    score = operation(api, SCORE)
    point = parsed(
        score.sync_detailed(
            client=caller(api, http, token),
            body=models.ScoreRequest(lat=60.17, lon=24.94, client="generated"),
        ),
        200,
        models.ScoreResponse,
    )
    assert 0 <= point.score <= 100
    assert point.ttl > 0
    scan = models.ScoreRequest(wifi=[models.WifiAccessPoint(mac="02:00:00:00:00:01", rssi=-50)])
    unplaced = score.sync_detailed(client=caller(api, http, token), body=scan)
    assert parsed(unplaced, 422, errors).detail

    forecast = operation(api, FORECAST)
    request = models.ForecastRequest(
        date=NOW.date(),
        timezone="UTC",
        latitude=60.17,
        longitude=24.94,
        activity_type=models.ActivityType.RUNNING_OUTDOOR,
        environment_type=models.EnvironmentType.OUTDOOR,
    )
    day = parsed(
        forecast.sync_detailed(client=caller(api, http, token), body=request),
        200,
        models.ForecastResponse,
    )
    assert day.location
    assert len(day.timestamps) == 24
    assert len(day.measures["clean_air_score"]) == 24
    request.date = NOW.date() + timedelta(days=10)
    too_far = forecast.sync_detailed(client=caller(api, http, token), body=request)
    assert parsed(too_far, 400, errors).detail

    enrich = operation(api, ENRICH)
    waypoints = [models.Waypoint(lat=60.17, lon=24.94), models.Waypoint(lat=60.171, lon=24.941)]
    route = parsed(
        enrich.sync_detailed(
            client=caller(api, http, token),
            body=models.EnrichRouteRequest(
                waypoints=waypoints, start_time=NOW, activity_type=models.ActivityType.WALKING
            ),
        ),
        200,
        models.EnrichedRoute,
    )
    assert route.waypoints == [[60.17, 24.94], [60.171, 24.941]]
    assert isinstance(route.summary, models.RouteSummary)
    assert isinstance(route.summary.clean_air_score, models.BandedScore)
    assert len(route.measures["clean_air_score"]) == 2
    untimed = enrich.sync_detailed(
        client=caller(api, http, token), body=models.EnrichRouteRequest(waypoints=waypoints)
    )
    assert parsed(untimed, 422, errors).detail == VALIDATION_FAILED
    stale = enrich.sync_detailed(
        client=caller(api, http, token),
        body=models.EnrichRouteRequest(waypoints=waypoints, start_time=NOW - timedelta(days=31)),
    )
    assert parsed(stale, 400, errors).detail

    core.set_premium("alice", False)
    lapsed = score.sync_detailed(
        client=caller(api, http, token), body=models.ScoreRequest(lat=60.17, lon=24.94)
    )
    assert parsed(lapsed, 403, errors).detail


def test_route_plans(api: ModuleType, core: CleanAir, http: Client) -> None:
    models, errors = api.models, api.models.ErrorResponse
    token = redeem(api, http, core).token
    start = models.Location(latitude=ORIGIN.lat, longitude=ORIGIN.lon)
    end = models.Location(latitude=ORIGIN.lat + DLAT, longitude=ORIGIN.lon + (COLS - 1) * DLON)

    submit, poll = operation(api, SUBMIT), operation(api, POLL)
    plan = models.PlanRouteRequest(
        start=start, end=end, activity_type=models.PlanActivityType.WALKING
    )
    submitted = parsed(
        submit.sync_detailed(client=caller(api, http, token), body=plan),
        202,
        models.PlanSubmitted,
    )
    assert isinstance(submitted.request_id, uuid.UUID)
    pending = parsed(
        poll.sync_detailed(submitted.request_id, client=caller(api, http, token)),
        200,
        models.PlanPollResponse,
    )
    assert pending.status is models.PlanRouteStatus.PENDING

    taken = asyncio.run(core.work_on_next_plan())
    assert taken is not None
    assert taken.id == submitted.request_id
    completed = parsed(
        poll.sync_detailed(submitted.request_id, client=caller(api, http, token)),
        200,
        models.PlanPollResponse,
    )
    assert completed.status is models.PlanRouteStatus.COMPLETED
    result = completed.result
    assert isinstance(result, models.PlanResult)
    assert result.activity_type is models.PlanActivityType.WALKING
    assert result.routes
    for route in result.routes:
        assert isinstance(route, models.PlannedRoute)
        assert isinstance(route.goal, models.RouteGoal)
        assert isinstance(route.summary, models.RouteSummary)
    assert 0 <= result.best_route_index < len(result.routes)

    unknown = poll.sync_detailed(uuid.uuid4(), client=caller(api, http, token))
    assert parsed(unknown, 404, errors).detail
    # The generated signature asks for a UUID; a client that sends anything else meets 422.
    malformed = poll.sync_detailed("not-a-uuid", client=caller(api, http, token))
    assert parsed(malformed, 422, errors).detail

    far = models.PlanRouteRequest(
        start=start,
        end=models.Location(latitude=ORIGIN.lat + 1.0, longitude=ORIGIN.lon),
        activity_type=models.PlanActivityType.CYCLING,
    )
    too_far = submit.sync_detailed(client=caller(api, http, token), body=far)
    assert parsed(too_far, 400, errors).detail

    core.add_partner("acme")
    partner = core.issue_partner_token("acme", "integration", [Scope.ROUTES_PLAN]).token
    refused = submit.sync_detailed(client=caller(api, http, partner), body=plan)
    assert parsed(refused, 403, errors).detail


def test_rate_limits_answer_429_with_retry_after(
    api: ModuleType, core: CleanAir, clock: ManualClock
) -> None:
    """One request a minute, one redemption attempt: every endpoint's next call is a 429."""
    models, errors = api.models, api.models.ErrorResponse
    limited = CleanAir(
        core.store,
        core.keys,
        Policy(
            credits=CreditLimits(monthly=1000, daily=100),
            requests_per_minute=1,
            pairing_attempts_per_minute=1,
        ),
        clock,
        sources=core.sources,
    )
    with TestClient(create_app(limited, Settings(plan_workers=0))) as http:
        token = redeem(api, http, limited).token
        attempt = operation(api, REDEEM).sync_detailed(
            client=caller(api, http), body=models.RedeemPairingCode(code="000000", name="x")
        )
        responses = [attempt]

        client = caller(api, http, token)
        first = operation(api, QUOTA).sync_detailed(client=client)
        parsed(first, 200, models.Quota)
        point = models.ScoreRequest(lat=60.17, lon=24.94)
        day = models.ForecastRequest(
            date=NOW.date(), timezone="UTC", latitude=60.17, longitude=24.9
        )
        route = models.EnrichRouteRequest(
            waypoints=[models.Waypoint(lat=60.17, lon=24.94)], start_time=NOW
        )
        here = models.Location(latitude=ORIGIN.lat, longitude=ORIGIN.lon)
        plan = models.PlanRouteRequest(
            start=here, end=here, activity_type=models.PlanActivityType.RUNNING
        )
        responses += [
            operation(api, QUOTA).sync_detailed(client=client),
            operation(api, SCORE).sync_detailed(client=client, body=point),
            operation(api, FORECAST).sync_detailed(client=client, body=day),
            operation(api, ENRICH).sync_detailed(client=client, body=route),
            operation(api, SUBMIT).sync_detailed(client=client, body=plan),
        ]
        # Polls have their own limit, per connection.
        polls = [
            operation(api, POLL).sync_detailed(uuid.uuid4(), client=client)
            for _ in range(POLLS_PER_MINUTE + 1)
        ]
        assert {p.status_code for p in polls[:-1]} == {404}
        responses.append(polls[-1])

    for response in responses:
        assert parsed(response, 429, errors).detail
        assert int(response.headers["Retry-After"]) > 0


def test_an_unavailable_source_is_a_503(
    api: ModuleType, core: CleanAir, clock: ManualClock
) -> None:
    models = api.models
    failing = Sources(FakeSource(fail=True), FakeGeolocator(None), FakeIp(), FakeNamer())
    outage = CleanAir(core.store, core.keys, core.policy, clock, sources=failing)
    with TestClient(create_app(outage, Settings(plan_workers=0))) as http:
        token = redeem(api, http, outage).token
        response = operation(api, SCORE).sync_detailed(
            client=caller(api, http, token), body=models.ScoreRequest(lat=60.17, lon=24.94)
        )
    assert parsed(response, 503, models.ErrorResponse).detail

"""`GET /metrics`: Prometheus metrics of requests (by route template, method and status, with
latency) and of the domain (credits charged and refunded, 429s by limit, plans, upstreams).

prometheus_client keeps one registry per process, which every test here adds to: each test
reads the change across what it does (`Scrape.delta`), never an absolute value.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from litestar.testing import TestClient
from prometheus_client.parser import text_string_to_metric_families

from cleanair_core import CleanAir, ManualClock, Policy, TokenKeys, generate_key
from cleanair_core.credits.ledger import CreditLimits
from cleanair_core.ports import Sources
from cleanair_http.access_log import AccessLog
from cleanair_http.app import create_app, with_access_log
from cleanair_http.metrics import prometheus_metrics
from cleanair_http.offloading import here_or_in_thread, in_thread
from cleanair_runtime.composition.settings import Settings, SettingsError
from cleanair_runtime.processes.metrics_port import serve_metrics
from cleanair_sources.ichnaea import IchnaeaGeolocator
from cleanair_sources.open_meteo import OpenMeteoSource
from cleanair_sources.openaq import OpenAQClient, OpenAQPoller
from cleanair_sources.street_router import LoadedNetworks
from cleanair_storage.memory import MemoryStore
from cleanair_storage.sqlite import SqliteStore
from support.fakes import FakeGeolocator, FakeIp, FakeNamer, FakeSource
from support.http import Client, MakeClient, bearer, pair
from support.networks import DLAT, DLON, ORIGIN, grid
from support.servers import free_port

ON = Settings(metrics="on", plan_workers=0)
Labels = frozenset[tuple[str, str]]
SCAN = [{"mac": "3C:84:6A:10:20:31", "rssi": -48}, {"mac": "3C:84:6A:10:20:32", "rssi": -60}]
#: 60.17, 24.94 (Helsinki) as the score endpoint takes it.
POINT = {"lat": 60.17, "lon": 24.94}


class Scrape:
    """One scrape's samples: (name, labels) to value."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.samples: dict[tuple[str, Labels], float] = {
            (sample.name, frozenset(sample.labels.items())): sample.value
            for family in text_string_to_metric_families(text)
            for sample in family.samples
        }

    def value(self, name: str, **labels: str) -> float:
        """The sum over every series of `name` with `labels` (and any others)."""
        wanted = set(labels.items())
        return sum(v for (n, ls), v in self.samples.items() if n == name and wanted <= ls)

    def delta(self, before: Scrape, name: str, **labels: str) -> float:
        return self.value(name, **labels) - before.value(name, **labels)


def scrape(client: Client) -> Scrape:
    response = client.get("/metrics")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    return Scrape(response.text)


@pytest.fixture
def network_sources() -> Sources:
    return Sources(
        FakeSource(),
        FakeGeolocator(None),
        FakeIp(),
        FakeNamer(),
        networks=LoadedNetworks([grid(2, 4)]),
    )


@pytest.fixture
def make_core(tmp_path: Path, clock: ManualClock) -> Iterator[Callable[..., CleanAir]]:
    """A core over a fresh SQLite file that tells the process's Prometheus metrics."""
    stores: list[SqliteStore] = []

    def make(sources: Sources, policy: Policy | None = None) -> CleanAir:
        store = SqliteStore(tmp_path / f"db{len(stores)}.sqlite")
        stores.append(store)
        return CleanAir(
            store,
            TokenKeys(generate_key()),
            policy or Policy(credits=CreditLimits(monthly=1000, daily=100)),
            clock,
            sources=sources,
            offload=in_thread,
            store_calls=here_or_in_thread,
            metrics=prometheus_metrics(),
        )

    yield make
    for store in stores:
        store.close()


@pytest.fixture
def serve_app() -> Iterator[Callable[..., Client]]:
    clients: list[Client] = []

    def make(core: CleanAir, settings: Settings = ON) -> Client:
        client: Client = TestClient(create_app(core, settings))
        client.__enter__()
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.__exit__(None, None, None)


# -- where /metrics is served --------------------------------------------------------------


def test_a_scrape_is_rendered_off_the_event_loop(
    make_client: MakeClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With several processes a scrape reads and merges every process's files: not on the
    loop that answers the API's requests."""
    from prometheus_client import CollectorRegistry, generate_latest

    rendered_on_a_loop: list[bool] = []

    def recording(registry: CollectorRegistry) -> bytes:
        try:
            asyncio.get_running_loop()
            rendered_on_a_loop.append(True)
        except RuntimeError:
            rendered_on_a_loop.append(False)
        return generate_latest(registry)

    monkeypatch.setattr("cleanair_http.metrics.generate_latest", recording)
    answer = make_client(ON).get("/metrics")
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/plain")
    assert "cleanair_requests_in_progress" in answer.text
    assert rendered_on_a_loop == [False]


def test_metrics_are_on_unless_turned_off(make_client: MakeClient) -> None:
    assert Settings.from_env({}).metrics_enabled is True
    assert make_client().get("/metrics").status_code == 200
    assert Settings.from_env({"CLEANAIR_METRICS": "off"}).metrics_enabled is False
    assert make_client(Settings(metrics="off")).get("/metrics").status_code == 404


def test_metrics_need_no_token_and_are_neither_rate_limited_nor_charged(
    make_core: Callable[..., CleanAir], serve_app: Callable[..., Client]
) -> None:
    core = make_core(
        Sources(FakeSource(), None, FakeIp(), FakeNamer()), Policy(requests_per_minute=1)
    )
    client = serve_app(core)
    token = pair(core, client)
    for _ in range(3):  # over the rate limit of 1 a minute, were it counted
        assert client.get("/metrics").status_code == 200
        # A token is not even looked at: a stale one changes nothing.
        assert client.get("/metrics", headers=bearer("ca_tst_" + "A" * 43)).status_code == 200
    assert client.get("/metrics", headers=bearer(token)).status_code == 200
    assert client.get("/v1/quota", headers=bearer(token)).json()["used"] == 0


def test_metrics_are_not_in_the_openapi_document(
    make_core: Callable[..., CleanAir], serve_app: Callable[..., Client]
) -> None:
    client = serve_app(make_core(Sources(FakeSource(), None, FakeIp(), FakeNamer())))
    paths = client.get("/schema/openapi.json").json()["paths"]
    assert "/metrics" not in paths
    assert all(path.startswith(("/v1/", "/ext/v1/")) for path in paths)


def test_scrapes_are_logged_at_debug_only(
    make_core: Callable[..., CleanAir], caplog: pytest.LogCaptureFixture
) -> None:
    app = with_access_log(
        create_app(make_core(Sources(FakeSource(), None, FakeIp(), FakeNamer())), ON)
    )
    assert isinstance(app, AccessLog)
    caplog.set_level(logging.DEBUG, logger="cleanair.access")
    with TestClient(app) as client:
        assert client.get("/metrics").status_code == 200
    [line] = [r for r in caplog.records if getattr(r, "path", None) == "/metrics"]
    assert line.levelno == logging.DEBUG


def test_a_metrics_port_serves_them_there_and_not_on_the_api_port(
    make_core: Callable[..., CleanAir], serve_app: Callable[..., Client]
) -> None:
    port = free_port()
    settings = Settings(metrics="on", metrics_port=port, plan_workers=0)
    client = serve_app(make_core(Sources(FakeSource(), None, FakeIp(), FakeNamer())), settings)
    assert client.get("/metrics").status_code == 404
    stop = serve_metrics("127.0.0.1", port)
    try:
        before = Scrape(httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text)
        assert client.get("/livez").status_code == 200
        after = Scrape(httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text)
    finally:
        stop()
    # The API's requests are still counted: only where they are read from moved.
    assert after.delta(before, "cleanair_requests_total", path="/livez", status_code="200") == 1


# -- requests by route, method and status --------------------------------------------------


def test_requests_are_counted_by_route_template_method_and_status(
    make_core: Callable[..., CleanAir], serve_app: Callable[..., Client]
) -> None:
    core = make_core(Sources(FakeSource(), None, FakeIp(), FakeNamer()))
    client = serve_app(core)
    token = pair(core, client)
    before = scrape(client)
    plan_id = uuid.uuid4()
    assert client.get(f"/v1/routes/{plan_id}", headers=bearer(token)).status_code == 404
    assert client.get("/v1/quota").status_code == 401  # refused by the bearer middleware
    assert client.post("/v1/airquality/score", json=POINT, headers=bearer(token)).status_code == 200
    after = scrape(client)

    template = "/v1/routes/{request_id}"
    assert (
        after.delta(
            before, "cleanair_requests_total", path=template, method="GET", status_code="404"
        )
        == 1
    )
    assert after.delta(before, "cleanair_requests_total", path="/v1/quota", status_code="401") == 1
    assert after.delta(before, "cleanair_requests_total", path="/v1/quota", status_code="200") == 0
    score = {"path": "/v1/airquality/score", "method": "POST", "status_code": "200"}
    assert after.delta(before, "cleanair_requests_total", **score) == 1
    assert after.delta(before, "cleanair_request_duration_seconds_count", **score) == 1
    assert str(plan_id) not in after.text


# -- credits charged and refunded ------------------------------------------------------------


def test_credits_charged_and_refunded_by_endpoint(
    make_core: Callable[..., CleanAir], serve_app: Callable[..., Client]
) -> None:
    source = FakeSource()
    core = make_core(Sources(source, None, FakeIp(), FakeNamer()))
    client = serve_app(core)
    token = pair(core, client)
    before = scrape(client)
    assert client.post("/v1/airquality/score", json=POINT, headers=bearer(token)).status_code == 200
    source.fail = True  # a 503: charged, then refunded
    assert client.post("/v1/airquality/score", json=POINT, headers=bearer(token)).status_code == 503
    after = scrape(client)
    assert after.delta(before, "cleanair_credits_charged_total", endpoint="score") == 2
    assert after.delta(before, "cleanair_credits_refunded_total", endpoint="score") == 1
    assert client.get("/v1/quota", headers=bearer(token)).json()["used"] == 1


# -- 429s by cause ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("policy", "cause"),
    [
        (Policy(requests_per_minute=1), "rate_limit"),
        (Policy(credits=CreditLimits(monthly=1000, daily=1)), "daily_burst"),
        (Policy(credits=CreditLimits(monthly=1, daily=1)), "monthly_pool"),
    ],
)
def test_429s_are_counted_by_the_limit_that_refused_them(
    make_core: Callable[..., CleanAir],
    serve_app: Callable[..., Client],
    policy: Policy,
    cause: str,
) -> None:
    core = make_core(Sources(FakeSource(), None, FakeIp(), FakeNamer()), policy)
    client = serve_app(core)
    token = pair(core, client)
    before = scrape(client)
    # A 1-credit score, then a 2-credit forecast: the second call is over each limit.
    assert client.post("/v1/airquality/score", json=POINT, headers=bearer(token)).status_code == 200
    day = core.clock.now().date().isoformat()
    forecast = {"latitude": 60.17, "longitude": 24.94, "date": day, "timezone": "UTC"}
    refused = client.post("/v1/airquality/forecast", json=forecast, headers=bearer(token))
    assert refused.status_code == 429
    after = scrape(client)
    for limit in ("rate_limit", "daily_burst", "monthly_pool"):
        expected = 1 if limit == cause else 0
        assert after.delta(before, "cleanair_too_many_requests_total", cause=limit) == expected
    assert after.delta(before, "cleanair_requests_total", status_code="429") == 1


def test_a_refused_pairing_is_a_rate_limit_429(
    make_core: Callable[..., CleanAir], serve_app: Callable[..., Client]
) -> None:
    core = make_core(
        Sources(FakeSource(), None, FakeIp(), FakeNamer()), Policy(pairing_attempts_per_minute=1)
    )
    client = serve_app(core)
    before = scrape(client)
    body = {"code": "000000", "name": "app"}
    assert client.post("/v1/connections/token", json=body).status_code == 401
    assert client.post("/v1/connections/token", json=body).status_code == 429
    after = scrape(client)
    assert after.delta(before, "cleanair_too_many_requests_total", cause="rate_limit") == 1


# -- plans -----------------------------------------------------------------------------------


def test_plans_are_counted_by_final_status_with_their_planning_time(
    make_core: Callable[..., CleanAir],
    serve_app: Callable[..., Client],
    network_sources: Sources,
) -> None:
    core = make_core(network_sources)
    client = serve_app(core)
    token = pair(core, client)
    before = scrape(client)
    inside = {"latitude": ORIGIN.lat, "longitude": ORIGIN.lon}
    east = {"latitude": ORIGIN.lat + DLAT, "longitude": ORIGIN.lon + 3 * DLON}
    outside = {"latitude": ORIGIN.lat + 0.05, "longitude": ORIGIN.lon}  # no street near it
    for end in (east, outside):
        body = {"start": inside, "end": end, "activity_type": "walking"}
        assert client.post("/v1/routes", json=body, headers=bearer(token)).status_code == 202
        assert asyncio.run(core.work_on_next_plan()) is not None
    after = scrape(client)
    assert after.delta(before, "cleanair_credits_charged_total", endpoint="route_plan") == 50
    assert after.delta(before, "cleanair_credits_refunded_total", endpoint="route_plan") == 25
    assert after.delta(before, "cleanair_plans_finished_total", status="completed") == 1
    assert after.delta(before, "cleanair_plans_finished_total", status="failed") == 1
    for status in ("completed", "failed"):
        assert after.delta(before, "cleanair_plan_planning_seconds_count", status=status) == 1


def test_departures_plans_are_charged_and_refunded_under_their_own_label(
    make_core: Callable[..., CleanAir],
    serve_app: Callable[..., Client],
    network_sources: Sources,
) -> None:
    core = make_core(network_sources)
    client = serve_app(core)
    token = pair(core, client)
    before = scrape(client)
    inside = {"latitude": ORIGIN.lat, "longitude": ORIGIN.lon}
    east = {"latitude": ORIGIN.lat + DLAT, "longitude": ORIGIN.lon + 3 * DLON}
    outside = {"latitude": ORIGIN.lat + 0.05, "longitude": ORIGIN.lon}  # no street near it
    now = core.clock.now()
    window = {"earliest": now.isoformat(), "latest": (now + timedelta(hours=1)).isoformat()}
    for end in (east, outside):
        body = {"start": inside, "end": end, "activity_type": "walking", **window}
        submitted = client.post("/ext/v1/routes/departures", json=body, headers=bearer(token))
        assert submitted.status_code == 202
        assert asyncio.run(core.work_on_next_plan()) is not None
    after = scrape(client)
    assert after.delta(before, "cleanair_credits_charged_total", endpoint="route_departures") == 50
    assert after.delta(before, "cleanair_credits_refunded_total", endpoint="route_departures") == 25
    assert after.delta(before, "cleanair_credits_refunded_total", endpoint="route_plan") == 0
    assert after.delta(before, "cleanair_plans_finished_total", status="completed") == 1


# -- upstreams -------------------------------------------------------------------------------


async def no_sleep(_: float) -> None:
    return None


def test_open_meteo_requests_and_errors_are_counted(
    make_core: Callable[..., CleanAir], serve_app: Callable[..., Client]
) -> None:
    answers = [httpx.Response(502, text="bad gateway")]
    transport = httpx.MockTransport(lambda _: answers[0])
    source = OpenMeteoSource(
        httpx.AsyncClient(transport=transport),
        "https://aq.example",
        sleep=no_sleep,
        metrics=prometheus_metrics(),
    )
    core = make_core(Sources(source, None, FakeIp(), FakeNamer()))
    client = serve_app(core)
    token = pair(core, client)
    before = scrape(client)
    assert client.post("/v1/airquality/score", json=POINT, headers=bearer(token)).status_code == 503
    after = scrape(client)
    # The first try and two retries, every one failed.
    labels = {"upstream": "open_meteo"}
    assert after.delta(before, "cleanair_upstream_request_duration_seconds_count", **labels) == 3
    assert after.delta(before, "cleanair_upstream_errors_total", **labels) == 3


@pytest.mark.parametrize(("status", "failed"), [(503, 1), (404, 0)])
def test_ichnaea_requests_and_errors_are_counted(
    make_core: Callable[..., CleanAir],
    serve_app: Callable[..., Client],
    status: int,
    failed: int,
) -> None:
    transport = httpx.MockTransport(lambda _: httpx.Response(status, json={}))
    geolocator = IchnaeaGeolocator(
        httpx.AsyncClient(transport=transport),
        "https://geo.example/v1/geolocate",
        metrics=prometheus_metrics(),
    )
    core = make_core(Sources(FakeSource(), geolocator, FakeIp(), FakeNamer()))
    client = serve_app(core)
    token = pair(core, client)
    before = scrape(client)
    client.post("/v1/airquality/score", json={"wifi": SCAN}, headers=bearer(token))
    after = scrape(client)
    labels = {"upstream": "ichnaea"}
    assert after.delta(before, "cleanair_upstream_request_duration_seconds_count", **labels) == 1
    assert after.delta(before, "cleanair_upstream_errors_total", **labels) == failed


def test_openaq_requests_errors_and_stored_observations_are_counted(
    make_core: Callable[..., CleanAir], serve_app: Callable[..., Client]
) -> None:
    hour = "2026-05-20T10:00:00Z"
    listing = {
        "results": [
            {
                "id": 7,
                "name": "Kallio",
                "coordinates": {"latitude": 60.18, "longitude": 24.95},
                "sensors": [{"id": 70, "parameter": {"name": "pm25", "units": "µg/m³"}}],
            }
        ]
    }
    latest = {
        "results": [
            {"datetime": {"utc": hour}, "value": 4.0, "sensorsId": 70},
            {"datetime": {"utc": hour}, "value": 1e300, "sensorsId": 70},  # held back
            {"datetime": {"utc": "2026-05-20T12:00:00Z"}, "value": 4.0, "sensorsId": 70},
        ]
    }
    answers = [httpx.Response(200, json=listing), httpx.Response(200, json=latest)]
    answers.append(httpx.Response(500))
    transport = httpx.MockTransport(lambda _: answers.pop(0))
    openaq = OpenAQClient(
        httpx.AsyncClient(transport=transport), "key", metrics=prometheus_metrics()
    )
    poller = OpenAQPoller(
        openaq,
        MemoryStore(),
        [(60.1, 24.8, 60.3, 25.1)],
        in_thread,
        clock=ManualClock(datetime(2026, 5, 20, 10, 20, tzinfo=UTC)),
        metrics=prometheus_metrics(),
    )
    client = serve_app(make_core(Sources(FakeSource(), None, FakeIp(), FakeNamer())))
    before = scrape(client)
    asyncio.run(poller.poll_once())
    asyncio.run(poller.poll_once())  # the 500
    after = scrape(client)
    labels = {"upstream": "openaq"}
    assert after.delta(before, "cleanair_upstream_request_duration_seconds_count", **labels) == 3
    assert after.delta(before, "cleanair_upstream_errors_total", **labels) == 1
    assert after.delta(before, "cleanair_observations_stored_total", **labels) == 1
    held_back = "cleanair_observations_held_back_total"
    assert after.delta(before, held_back, reason="over_bound", **labels) == 1
    assert after.delta(before, held_back, reason="future", **labels) == 1
    # Every reason's series is there from the start, so rate() and alerts see the first.
    for upstream in ("open_meteo", "ichnaea", "openaq"):
        for reason in ("over_bound", "future"):
            assert (held_back, frozenset({("upstream", upstream), ("reason", reason)})) in (
                before.samples
            )


# -- label hygiene ---------------------------------------------------------------------------


def test_no_token_user_connection_or_address_reaches_a_label(
    make_core: Callable[..., CleanAir],
    serve_app: Callable[..., Client],
    network_sources: Sources,
) -> None:
    core = make_core(network_sources, Policy(requests_per_minute=3))
    client = serve_app(core)
    user = "zelda-metrics-user"
    core.add_user(user)
    code = core.create_pairing_code(user)
    redeemed = client.post(
        "/v1/connections/token",
        json={"code": code, "name": "my-secret-phone"},
        headers={"X-Forwarded-For": "203.0.113.77"},
    )
    assert redeemed.status_code == 201
    token, connection = redeemed.json()["token"], redeemed.json()["connection_id"]
    body = {
        "start": {"latitude": ORIGIN.lat, "longitude": ORIGIN.lon},
        "end": {"latitude": ORIGIN.lat, "longitude": ORIGIN.lon + DLON},
        "activity_type": "walking",
    }
    plan = client.post("/v1/routes", json=body, headers=bearer(token)).json()["request_id"]
    client.get(f"/v1/routes/{plan}", headers=bearer(token))
    client.post("/v1/airquality/score", json={"wifi": SCAN}, headers=bearer(token))
    client.get("/v1/quota", headers=bearer(token))  # the fourth call: rate limited
    client.get("/v1/quota", headers=bearer("ca_tst_" + "B" * 43))
    text = scrape(client).text
    for secret in (token, token[7:], user, connection, "my-secret-phone", plan, "203.0.113.77"):
        assert secret not in text
    assert "testclient" not in text  # the TestClient's peer address
    assert "3c:84:6a" not in text.lower()


# -- settings --------------------------------------------------------------------------------


def test_metrics_settings() -> None:
    assert Settings.from_env({"CLEANAIR_METRICS": "on"}).metrics_enabled
    assert Settings.from_env({"CLEANAIR_METRICS": " ON "}).metrics_port is None
    separate = Settings.from_env({"CLEANAIR_METRICS": "on", "CLEANAIR_METRICS_PORT": "9464"})
    assert (separate.metrics_port, separate.metrics_host) == (9464, "127.0.0.1")
    everywhere = {
        "CLEANAIR_METRICS": "on",
        "CLEANAIR_METRICS_PORT": "9464",
        "CLEANAIR_METRICS_HOST": "0.0.0.0",
    }
    assert Settings.from_env(everywhere).metrics_host == "0.0.0.0"


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"CLEANAIR_METRICS": "yes"}, "CLEANAIR_METRICS: must be one of off, on"),
        (
            {"CLEANAIR_METRICS": "on", "CLEANAIR_METRICS_PORT": "70000"},
            "CLEANAIR_METRICS_PORT: must be a port number, 1 to 65535",
        ),
        (
            {"CLEANAIR_METRICS": "on", "CLEANAIR_METRICS_PORT": "http"},
            "CLEANAIR_METRICS_PORT: must be a whole number",
        ),
        (
            {"CLEANAIR_METRICS": "off", "CLEANAIR_METRICS_PORT": "9464"},
            "CLEANAIR_METRICS_PORT: set, but CLEANAIR_METRICS is off (set it to on)",
        ),
        (
            {"CLEANAIR_METRICS": "on", "CLEANAIR_METRICS_HOST": "a host"},
            "CLEANAIR_METRICS_HOST: must be an IP address or a host name",
        ),
    ],
)
def test_bad_metrics_settings_are_named(env: dict[str, str], message: str) -> None:
    with pytest.raises(SettingsError) as raised:
        Settings.from_env(env)
    assert message in str(raised.value)


def test_alert_events_attempts_and_lag_are_scraped(make_client: MakeClient) -> None:
    client = make_client(ON)
    before = scrape(client)
    metrics = prometheus_metrics()
    metrics.alert_events("recorded", 3)
    metrics.alert_events("withheld", 1)
    for outcome in ("delivered", "retried", "failed", "disabled"):
        metrics.alert_deliveries(outcome, 2)
    metrics.alert_delivery_lag(42.0)
    after = scrape(client)
    assert after.delta(before, "cleanair_alert_events_total", outcome="recorded") == 3
    assert after.delta(before, "cleanair_alert_events_total", outcome="withheld") == 1
    for outcome in ("delivered", "retried", "failed", "disabled"):
        assert after.delta(before, "cleanair_alert_deliveries_total", outcome=outcome) == 2
    assert after.delta(before, "cleanair_alert_delivery_lag_seconds_count") == 1
    assert after.delta(before, "cleanair_alert_delivery_lag_seconds_bucket", le="60.0") == 1
    assert after.delta(before, "cleanair_alert_delivery_lag_seconds_bucket", le="30.0") == 0

"""The endpoints over the real remote adapters (Open-Meteo, Ichnaea) on a fake transport."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
from litestar.testing import TestClient

from cleanair_core import CleanAir, ManualClock, Policy, TokenKeys, generate_key
from cleanair_core.clean_air_score import clean_air_score
from cleanair_core.pollutants import Pollutant
from cleanair_core.sources import Sources
from cleanair_http.access_log import quiet_upstream_urls
from cleanair_http.app import create_app
from cleanair_sources.ichnaea import IchnaeaGeolocator
from cleanair_sources.open_meteo import OpenMeteoSource
from cleanair_storage.sqlite import SqliteStore
from support.fakes import FakeIp, FakeNamer, FakeSource
from support.http import bearer, pair

RECORDED = Path(__file__).parents[1] / "cleanair_sources" / "recorded"
BERLIN = json.loads((RECORDED / "open_meteo_berlin_single.json").read_text())
FIRST_HOUR = BERLIN["hourly"]["time"][0]
SCAN = [{"mac": "3C:84:6A:10:20:31", "rssi": -48}, {"mac": "3C:84:6A:10:20:32", "rssi": -60}]
Handler = Callable[[httpx.Request], httpx.Response]


async def no_sleep(_: float) -> None:
    return None


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Callable[[Sources], tuple[TestClient, str]]]:  # type: ignore[type-arg]
    stores: list[SqliteStore] = []
    clients: list[TestClient] = []  # type: ignore[type-arg]

    def make(sources: Sources) -> tuple[TestClient, str]:  # type: ignore[type-arg]
        store = SqliteStore(tmp_path / f"db{len(stores)}.sqlite")
        stores.append(store)
        clock = ManualClock(datetime.fromtimestamp(FIRST_HOUR + 1800, UTC))
        core = CleanAir(store, TokenKeys(generate_key()), Policy(), clock, sources=sources)
        client = TestClient(create_app(core))
        client.__enter__()
        clients.append(client)
        return client, pair(core, client)

    yield make
    for client in clients:
        client.__exit__(None, None, None)
    for store in stores:
        store.close()


def open_meteo(handler: Handler) -> OpenMeteoSource:
    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    return OpenMeteoSource(client, "https://aq.example", sleep=no_sleep)


def ichnaea(handler: Handler) -> IchnaeaGeolocator:
    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    return IchnaeaGeolocator(client, "https://geo.example/v1/geolocate", "key-123")


def test_open_meteo_data_scores_the_current_hour(
    serve: Callable[..., tuple[TestClient, str]],
) -> None:  # type: ignore[type-arg]
    source = open_meteo(lambda _: httpx.Response(200, json=BERLIN))
    client, token = serve(Sources(source, None, FakeIp(), FakeNamer()))
    response = client.post(
        "/v1/airquality/score", json={"lat": 52.52, "lon": 13.40}, headers=bearer(token)
    )
    assert response.status_code == 200
    hourly = BERLIN["hourly"]
    expected = clean_air_score(
        {
            Pollutant.PM25: hourly["pm2_5"][0],
            Pollutant.PM10: hourly["pm10"][0],
            Pollutant.NO2: hourly["nitrogen_dioxide"][0],
            Pollutant.O3: hourly["ozone"][0],
            Pollutant.SO2: hourly["sulphur_dioxide"][0],
        }
    )
    assert response.json() == {"score": expected, "ttl": 1800}


def test_an_open_meteo_outage_is_503_and_not_charged(
    serve: Callable[..., tuple[TestClient, str]],  # type: ignore[type-arg]
) -> None:
    source = open_meteo(lambda _: httpx.Response(502, text="bad gateway"))
    client, token = serve(Sources(source, None, FakeIp(), FakeNamer()))
    body = {"lat": 52.52, "lon": 13.40}
    assert client.post("/v1/airquality/score", json=body, headers=bearer(token)).status_code == 503
    day = datetime.fromtimestamp(FIRST_HOUR, UTC).date().isoformat()
    forecast = {"latitude": 52.52, "longitude": 13.4, "date": day, "timezone": "UTC"}
    response = client.post("/v1/airquality/forecast", json=forecast, headers=bearer(token))
    assert response.status_code == 503
    assert client.get("/v1/quota", headers=bearer(token)).json()["used"] == 0


@pytest.mark.parametrize(
    ("status", "body", "expected"),
    [
        (200, {"location": {"lat": 52.52, "lng": 13.405}, "accuracy": 40.0}, 200),
        (404, {"error": {"code": 404, "message": "Not found"}}, 422),
        (503, {}, 503),
    ],
)
def test_ichnaea_scans_never_reach_the_logs(
    serve: Callable[..., tuple[TestClient, str]],  # type: ignore[type-arg]
    caplog: pytest.LogCaptureFixture,
    status: int,
    body: object,
    expected: int,
) -> None:
    caplog.set_level(logging.DEBUG)
    quiet_upstream_urls()  # as the composition root does
    geolocator = ichnaea(lambda _: httpx.Response(status, json=body))
    client, token = serve(Sources(FakeSource(), geolocator, FakeIp(), FakeNamer()))
    response = client.post("/v1/airquality/score", json={"wifi": SCAN}, headers=bearer(token))
    assert response.status_code == expected
    assert client.get("/v1/quota", headers=bearer(token)).json()["used"] == int(expected == 200)
    logged = "\n".join(f"{r.getMessage()} {r.__dict__!r}" for r in caplog.records).lower()
    for mac in ("3c:84:6a:10:20:31", "3c:84:6a:10:20:32", "3c846a102031", "3c-84-6a-10-20-31"):
        assert mac not in logged
    assert "key-123" not in logged

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
from cleanair_core.air.pollutants import Pollutant
from cleanair_core.air.score import clean_air_score
from cleanair_core.ports import Sources
from cleanair_http.app import create_app
from cleanair_runtime.logs import quiet_upstream_urls
from cleanair_sources.ichnaea import IchnaeaGeolocator
from cleanair_sources.open_meteo import OpenMeteoSource
from cleanair_storage.sqlite import SqliteStore
from support.fakes import FakeIp, FakeNamer, FakeSource
from support.http import Client, bearer, pair

RECORDED = Path(__file__).parents[1] / "cleanair_sources" / "recorded"
BERLIN = json.loads((RECORDED / "open_meteo_berlin_single.json").read_text())
FIRST_HOUR = BERLIN["hourly"]["time"][0]
SCAN = [{"mac": "3C:84:6A:10:20:31", "rssi": -48}, {"mac": "3C:84:6A:10:20:32", "rssi": -60}]
Handler = Callable[[httpx.Request], httpx.Response]


async def no_sleep(_: float) -> None:
    return None


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Callable[[Sources], tuple[Client, str]]]:
    stores: list[SqliteStore] = []
    clients: list[Client] = []

    def make(sources: Sources) -> tuple[Client, str]:
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
    serve: Callable[..., tuple[Client, str]],
) -> None:
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
    serve: Callable[..., tuple[Client, str]],
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
    serve: Callable[..., tuple[Client, str]],
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


def test_a_100_waypoint_route_is_one_open_meteo_request(
    serve: Callable[..., tuple[Client, str]],
) -> None:
    """100 waypoints in 100 different 0.1 degree CAMS Europe cells: one request for all."""
    from datetime import timedelta

    requests: list[httpx.Request] = []

    def synthesized(request: httpx.Request) -> httpx.Response:
        """Answer any request in Open-Meteo's format; pm2_5 = the asked latitude, nitrogen_dioxide
        = the asked longitude, pm10 = hours since start_date 00:00 UTC, ozone 1.0."""
        requests.append(request)
        params = request.url.params
        lats = [float(v) for v in params["latitude"].split(",")]
        lons = [float(v) for v in params["longitude"].split(",")]
        start = datetime.fromisoformat(params["start_date"]).replace(tzinfo=UTC)
        end = datetime.fromisoformat(params["end_date"]).replace(tzinfo=UTC)
        times = [
            int((start + timedelta(hours=h)).timestamp())
            for h in range(24 * ((end - start).days + 1))
        ]
        objects = []
        for index, (lat, lon) in enumerate(zip(lats, lons, strict=True)):
            obj = {key: value for key, value in BERLIN.items() if key != "hourly"}
            obj["latitude"], obj["longitude"] = lat, lon
            if index:
                obj["location_id"] = index
            obj["hourly"] = {
                "time": times,
                "pm10": [float(h) for h in range(len(times))],
                "pm2_5": [lat] * len(times),
                "nitrogen_dioxide": [lon] * len(times),
                "ozone": [1.0] * len(times),
                "sulphur_dioxide": [None] * len(times),
            }
            objects.append(obj)
        return httpx.Response(200, json=objects[0] if len(objects) == 1 else objects)

    client, token = serve(Sources(open_meteo(synthesized), None, FakeIp(), FakeNamer()))
    # A 10 x 10 block of CAMS Europe cell centres around Berlin: 100 different cells.
    points = [
        (round(52.05 + 0.1 * row, 2), round(13.05 + 0.1 * column, 2))
        for row in range(10)
        for column in range(10)
    ]
    now = datetime.fromtimestamp(FIRST_HOUR + 1800, UTC)  # the serve fixture's clock
    start = now - timedelta(minutes=100)  # the track crosses midnight: two UTC dates
    times = [start + timedelta(minutes=i) for i in range(100)]
    body = {
        "waypoints": [
            {"lat": lat, "lon": lon, "time": at.isoformat()}
            for (lat, lon), at in zip(points, times, strict=True)
        ]
    }

    response = client.post("/v1/airquality/routes", json=body, headers=bearer(token))

    assert response.status_code == 200, response.text
    assert len(requests) == 1
    params = requests[0].url.params
    asked = list(zip(params["latitude"].split(","), params["longitude"].split(","), strict=True))
    assert len(asked) == len(set(asked)) == 100
    assert (params["start_date"], params["end_date"]) == ("2026-05-19", "2026-05-20")
    measures = response.json()["measures"]
    assert measures["pm25"] == [lat for lat, _ in points]
    assert measures["no2"] == [lon for _, lon in points]
    day_start = datetime(2026, 5, 19, tzinfo=UTC)
    assert measures["pm10"] == [float((at - day_start) // timedelta(hours=1)) for at in times]
    assert None not in measures["clean_air_score"]
    assert client.get("/v1/quota", headers=bearer(token)).json()["used"] == 100

"""The remote sources tell the `Metrics` port of every request: its time and whether it
failed."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from cleanair_core.air.quality_source import Sample
from cleanair_core.air.wifi import WifiAccessPoint
from cleanair_core.errors import SourceUnavailable
from cleanair_core.geo import Point
from cleanair_core.metrics import NoMetrics, Upstream
from cleanair_sources.ichnaea import IchnaeaGeolocator
from cleanair_sources.open_meteo import OpenMeteoSource

BERLIN_ANSWER = json.loads(
    (Path(__file__).parent / "recorded" / "open_meteo_berlin_single.json").read_text()
)
FIRST_HOUR = BERLIN_ANSWER["hourly"]["time"][0]
SCAN = [WifiAccessPoint("3c:84:6a:10:20:31", -48), WifiAccessPoint("3c:84:6a:10:20:32", -60)]
Handler = Callable[[httpx.Request], httpx.Response]


class Recorded(NoMetrics):
    """The upstream requests an adapter reported."""

    def __init__(self) -> None:
        self.requests: list[tuple[Upstream, float, bool]] = []

    def upstream_request(self, upstream: Upstream, seconds: float, *, failed: bool) -> None:
        self.requests.append((upstream, seconds, failed))


class Ticks:
    """A monotonic clock that moves 0.25 s each time it is read."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 0.25
        return self.now


async def no_sleep(_: float) -> None:
    return None


def open_meteo(handler: Handler, metrics: Recorded) -> OpenMeteoSource:
    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    return OpenMeteoSource(
        client, "https://aq.example", sleep=no_sleep, monotonic=Ticks(), metrics=metrics
    )


def ask(source: OpenMeteoSource) -> None:
    sample = Sample(Point(52.52, 13.41), datetime.fromtimestamp(FIRST_HOUR, UTC))
    asyncio.run(source.concentrations([sample]))


@pytest.mark.parametrize(
    ("answers", "told"),
    [
        ([httpx.Response(200, json=BERLIN_ANSWER)], [False]),
        ([httpx.Response(503), httpx.Response(200, json=BERLIN_ANSWER)], [True, False]),
        ([httpx.Response(200, json={"unexpected": True})], [True]),
        ([httpx.Response(400, text="bad")], [True]),
    ],
)
def test_open_meteo_tells_each_request(answers: list[httpx.Response], told: list[bool]) -> None:
    metrics = Recorded()
    replies = iter(answers)
    source = open_meteo(lambda _: next(replies), metrics)
    with contextlib.suppress(SourceUnavailable):
        ask(source)
    assert [(u, failed) for u, _, failed in metrics.requests] == [
        (Upstream.OPEN_METEO, failed) for failed in told
    ]
    assert all(seconds == 0.25 for _, seconds, _ in metrics.requests)


@pytest.mark.parametrize(
    ("reply", "failed"),
    [
        (lambda: httpx.Response(200, json={"location": {"lat": 52.5, "lng": 13.4}}), False),
        (lambda: httpx.Response(404, json={}), False),
        (lambda: httpx.Response(200, text="not json"), True),
        (lambda: httpx.Response(500), True),
    ],
)
def test_ichnaea_tells_each_request(reply: Callable[[], httpx.Response], failed: bool) -> None:
    metrics = Recorded()
    client = httpx.AsyncClient(transport=httpx.MockTransport(lambda _: reply()))
    geolocator = IchnaeaGeolocator(
        client, "https://geo.example/v1/geolocate", metrics=metrics, monotonic=Ticks()
    )
    with contextlib.suppress(SourceUnavailable):
        asyncio.run(geolocator.locate(SCAN))
    assert metrics.requests == [(Upstream.ICHNAEA, 0.25, failed)]


def test_an_ichnaea_network_error_is_told_as_failed() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    metrics = Recorded()
    client = httpx.AsyncClient(transport=httpx.MockTransport(refuse))
    geolocator = IchnaeaGeolocator(client, "https://geo.example/v1/geolocate", metrics=metrics)
    with pytest.raises(SourceUnavailable):
        asyncio.run(geolocator.locate(SCAN))
    assert [(u, failed) for u, _, failed in metrics.requests] == [(Upstream.ICHNAEA, True)]

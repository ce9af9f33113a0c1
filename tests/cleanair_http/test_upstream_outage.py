"""An Open-Meteo outage seen through HTTP: 503s with Retry-After, at once once the breaker is
open, and /readyz reporting the breaker while staying ready."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from litestar.testing import TestClient

from cleanair_core import CleanAir, ManualClock, TokenKeys, generate_key
from cleanair_core.errors import RETRY_AFTER_UNAVAILABLE
from cleanair_core.ports import Sources
from cleanair_http.app import create_app
from cleanair_runtime.composition.settings import Settings
from cleanair_sources.open_meteo import OpenMeteoSource
from cleanair_sources.street_router import LoadedNetworks
from cleanair_storage.sqlite import SqliteStore
from support.fakes import FakeNamer
from support.http import Client, bearer, pair
from support.networks import grid

SCORE = "/v1/airquality/score"


class Monotonic:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Down:
    def __init__(self) -> None:
        self.requests = 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests += 1
        raise httpx.ConnectError("refused")


@pytest.fixture
def outage(tmp_path: Path) -> Iterator[tuple[Client, Down, Monotonic]]:
    down, monotonic = Down(), Monotonic()

    async def no_wait(_: float) -> None:
        return None

    source = OpenMeteoSource(
        httpx.AsyncClient(transport=httpx.MockTransport(down)),
        retries=0,
        sleep=no_wait,
        monotonic=monotonic,
        breaker_failures=2,
        breaker_cooldown=30,
    )
    sources = Sources(
        source, places=FakeNamer(), networks=LoadedNetworks([grid(2, 2)]), upstreams=(source,)
    )
    store = SqliteStore(tmp_path / "cleanair.db")
    core = CleanAir(store, TokenKeys(generate_key()), clock=ManualClock(), sources=sources)
    try:
        with TestClient(create_app(core, Settings(plan_workers=0))) as client:
            client.headers.update(bearer(pair(core, client)))
            yield client, down, monotonic
    finally:
        store.close()
        asyncio.run(source.aclose())


def test_an_outage_answers_503_then_at_once_with_the_breakers_retry_after(
    outage: tuple[Client, Down, Monotonic],
) -> None:
    client, down, monotonic = outage
    for _ in range(2):
        response = client.post(SCORE, json={"lat": 60.17, "lon": 24.94})
        assert (response.status_code, response.headers["Retry-After"]) == (
            503,
            str(RETRY_AFTER_UNAVAILABLE),
        )
    assert down.requests == 2

    monotonic.now += 5
    response = client.post(SCORE, json={"lat": 60.17, "lon": 24.94})

    assert (response.status_code, response.headers["Retry-After"]) == (503, "25")
    assert down.requests == 2  # answered without asking the upstream
    assert client.get("/v1/quota").json()["used"] == 0  # 503s are free


def test_readiness_reports_the_upstream_and_stays_ready(
    outage: tuple[Client, Down, Monotonic],
) -> None:
    client, _, _ = outage
    ready = client.get("/readyz")
    assert (ready.status_code, ready.json()) == (
        200,
        {"status": "ok", "upstreams": {"open_meteo": "closed"}},
    )
    for _ in range(2):
        client.post(SCORE, json={"lat": 60.17, "lon": 24.94})

    ready = client.get("/readyz")

    assert (ready.status_code, ready.json()) == (
        200,
        {"status": "ok", "upstreams": {"open_meteo": "open"}},
    )

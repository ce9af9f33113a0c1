"""The composition root wires the OpenAQ poller into one serving process, and the app runs it
for its lifetime: its outage never fails a request."""

from __future__ import annotations

import asyncio
import logging
import math

import anyio
import httpx
import pytest
from litestar.testing import AsyncTestClient

from cleanair_core import CleanAir, ManualClock, Policy, TokenKeys, generate_key
from cleanair_core.ports import Sources
from cleanair_http.app import create_app
from cleanair_http.offloading import in_thread
from cleanair_runtime.composition.bootstrap import (
    NETWORK_MARGIN_KM,
    Deployment,
    build_sources,
    openaq_boxes,
)
from cleanair_runtime.composition.settings import Settings
from cleanair_sources.openaq import OpenAQClient, OpenAQPoller
from cleanair_storage.memory import MemoryStore
from support.fakes import FakeGeolocator, FakeIp, FakeNamer, FakeSource
from support.networks import grid

KEY = "openaq-key-in-the-http-test"


def test_the_default_box_is_each_network_widened_by_ten_kilometres() -> None:
    network = grid(3, 3)
    south, west, north, east = network.bounds
    ((s, w, n, e),) = openaq_boxes(Settings.from_env({}), [network])
    km_lat = 111.32
    assert (south - s) * km_lat == pytest.approx(NETWORK_MARGIN_KM)
    assert (n - north) * km_lat == pytest.approx(NETWORK_MARGIN_KM)
    km_lon = km_lat * math.cos(math.radians(north))
    assert (west - w) * km_lon == pytest.approx(NETWORK_MARGIN_KM)
    assert (e - east) * km_lon == pytest.approx(NETWORK_MARGIN_KM)


def test_a_configured_box_wins_and_without_networks_there_is_none() -> None:
    settings = Settings.from_env({"CLEANAIR_OPENAQ_BOX": "48.8,2.2,48.9,2.4"})
    assert openaq_boxes(settings, [grid(2, 2)]) == [(48.8, 2.2, 48.9, 2.4)]
    assert openaq_boxes(Settings.from_env({}), []) == []


def open_sources(env: dict[str, str], *, polls: bool) -> Deployment:
    deployment = Deployment()
    build_sources(
        Settings.from_env(env),
        MemoryStore(),
        TokenKeys(generate_key()),
        deployment,
        polls_observations=polls,
    )
    return deployment


def test_only_the_polling_process_with_a_key_polls_and_its_client_is_closed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    # A box of its own, so no network is imported: quicker.
    env = {"CLEANAIR_DEFAULT_NETWORK": "false", "CLEANAIR_OPENAQ_BOX": "60,24,61,25"}
    assert open_sources(env, polls=True).background == []
    env["CLEANAIR_OPENAQ_API_KEY"] = KEY
    assert open_sources(env, polls=False).background == []

    deployment = open_sources(env, polls=True)
    assert len(deployment.background) == 1
    assert deployment.observation_source == "openaq (https://api.openaq.org)"
    assert [name for name, _ in deployment._closers] == ["the OpenAQ client"]
    asyncio.run(deployment.aclose())
    assert deployment._closers == []
    assert KEY not in caplog.text


def test_a_key_with_nothing_to_poll_says_so_and_polls_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    env = {"CLEANAIR_OPENAQ_API_KEY": KEY, "CLEANAIR_DEFAULT_NETWORK": "false"}
    assert open_sources(env, polls=True).background == []
    assert "OpenAQ is not polled: no street network" in caplog.text


def test_the_app_polls_for_its_lifetime_and_an_outage_never_fails_a_request(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """OpenAQ down (500s): the poll fails, is logged, and requests are answered; at shutdown
    the poller is cancelled before the deployment's closers run."""
    events: list[str] = []

    def down(request: httpx.Request) -> httpx.Response:
        assert request.headers["X-API-Key"] == KEY
        events.append("request")
        return httpx.Response(500)

    store = MemoryStore()
    client = OpenAQClient(httpx.AsyncClient(transport=httpx.MockTransport(down)), KEY)
    poller = OpenAQPoller(client, store, [(60.1, 24.8, 60.3, 25.1)], in_thread)
    polled = anyio.Event()

    async def sleep(seconds: float) -> None:
        assert 30 <= seconds <= 60  # the first backoff, jittered
        events.append("sleep")
        polled.set()
        await anyio.sleep_forever()

    async def poll() -> None:
        try:
            await poller.run(sleep)
        finally:
            events.append("poller stopped")

    async def close_client() -> None:
        events.append("closed")
        await client.aclose()

    sources = Sources(FakeSource(), FakeGeolocator(None), FakeIp(), FakeNamer())
    core = CleanAir(store, TokenKeys(generate_key()), Policy(), ManualClock(), sources=sources)
    app = create_app(
        core,
        Settings.from_env({"CLEANAIR_PLAN_WORKERS": "0", "CLEANAIR_METRICS": "off"}),
        on_shutdown=[close_client],
        background=[poll],
    )

    async def run() -> None:
        async with AsyncTestClient(app) as http:
            with anyio.fail_after(10):
                await polled.wait()
            assert (await http.get("/livez")).status_code == 200

    asyncio.run(run())
    assert events == ["request", "sleep", "poller stopped", "closed"]
    failed = [r for r in caplog.records if r.name == "cleanair.sources.openaq"]
    assert [r.__dict__["cause"] for r in failed] == ["HTTP 500"]
    assert KEY not in caplog.text

"""A charged request on PostgreSQL, composed as the deployment composes it (`PostgresRequests`):
its admission and its charge run on the event loop, with no hand-over to a worker thread,
and an outage still answers 503, charges nothing and ends by itself."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import TypeVar

import pytest
from litestar.testing import TestClient

from cleanair_core import CleanAir, ManualClock, Policy, TokenKeys, generate_key
from cleanair_core.errors import StoreUnavailable
from cleanair_core.ports import Sources
from cleanair_http.app import create_app
from cleanair_http.offloading import in_thread
from cleanair_runtime.composition.settings import Settings
from cleanair_storage.postgres import PostgresStore
from cleanair_storage.postgres.requests import PostgresRequests
from support.fakes import FakeGeolocator, FakeIp, FakeNamer, FakeSource
from support.http import Client, bearer, pair
from support.postgres import PostgresServer

T = TypeVar("T")
SCORE = {"lat": 60.17, "lon": 24.94}


class Counted:
    """The deployment's offload for one-step store calls, counting the work handed to it."""

    def __init__(self) -> None:
        self.calls = 0
        self._lock = threading.Lock()

    async def __call__(self, work: Callable[[], T], /) -> T:
        with self._lock:
            self.calls += 1
        return await in_thread(work)


def serving(
    store: PostgresStore, store_calls: Counted, policy: Policy | None = None
) -> tuple[CleanAir, PostgresRequests]:
    """A core over `store` as `open_deployment` wires one for PostgreSQL: local air (the
    shipped embedded model's kind, charged once answered) and the request path's own calls."""
    requests = PostgresRequests(store, in_thread)
    sources = Sources(FakeSource(), FakeGeolocator(None), FakeIp(), FakeNamer(), local_air=True)
    core = CleanAir(
        store,
        TokenKeys(generate_key()),
        policy or Policy(charge_hold_seconds=3600),
        ManualClock(),
        sources=sources,
        offload=in_thread,
        store_calls=store_calls,
        requests=requests,
    )
    return core, requests


def recovered(store: PostgresStore, within_s: float = 30.0) -> None:
    """Wait, bounded, until the store answers again after an outage."""
    deadline = time.monotonic() + within_s
    while True:
        try:
            store.schema_is_current()
            return
        except StoreUnavailable:
            assert time.monotonic() < deadline, "the store did not recover"
            time.sleep(0.05)  # a known outage answers at once: no need to ask thousands of times


@pytest.fixture
def counted() -> Counted:
    return Counted()


@pytest.fixture
def client(postgres_url: str, counted: Counted) -> Iterator[Client]:
    store = PostgresStore(postgres_url)
    core, requests = serving(store, counted)
    with TestClient(create_app(core, Settings(plan_workers=0))) as started:
        yield started
    requests.close()
    store.close()


def test_a_charged_score_hands_nothing_to_a_thread(client: Client, counted: Counted) -> None:
    core: CleanAir = client.app.state.core
    token = pair(core, client)
    counted.calls = 0
    for _ in range(3):
        response = client.post("/v1/airquality/score", json=SCORE, headers=bearer(token))
        assert response.status_code == 200, response.text
    assert counted.calls == 0  # admission and charge awaited on the loop
    assert [e.amount for e in core.store.entries("user:alice")] == [1, 1, 1]


def test_a_refused_request_counts_its_hit_on_the_loop(client: Client, counted: Counted) -> None:
    """A charged route's request that fails validation is not charged, but its pending
    rate-limit hit is counted once its answer is done: on the loop too."""
    core: CleanAir = client.app.state.core
    token = pair(core, client)
    counted.calls = 0
    response = client.post("/v1/airquality/score", json={"lat": 99}, headers=bearer(token))
    assert response.status_code in (400, 422)
    assert counted.calls == 0
    assert core.store.entries("user:alice") == []
    (connection,) = core.connections_of_user("alice")
    read = core.store.admission(connection.token_hash, core.policy.requests.name, core.clock.now())
    assert read.counter is not None
    assert read.counter[1] == 1


def test_the_request_limit_refuses_on_the_loop_with_the_windows_rest(
    postgres_url: str, counted: Counted
) -> None:
    """An uncharged route's hit is counted at admission on the request path's own calls: over
    the limit, 429 and Retry-After the seconds until the window resets (the contract's
    common rules, section 4)."""
    store = PostgresStore(postgres_url)
    core, requests = serving(
        store, counted, Policy(charge_hold_seconds=3600, requests_per_minute=2)
    )
    try:
        with TestClient(create_app(core, Settings(plan_workers=0))) as client:
            token = pair(core, client)
            at = core.clock.now()
            answers = [client.get("/v1/quota", headers=bearer(token)) for _ in range(3)]
        assert [a.status_code for a in answers] == [200, 200, 429]
        assert answers[2].headers["retry-after"] == str(core.policy.requests.retry_after(at))
    finally:
        requests.close()
        store.close()


def test_an_outage_answers_503_charges_nothing_and_the_request_path_recovers(
    own_server: PostgresServer, counted: Counted
) -> None:
    store = PostgresStore(own_server.database(), timeout=2.0)
    core, requests = serving(store, counted)
    try:
        with TestClient(create_app(core, Settings(plan_workers=0))) as client:
            token = pair(core, client)

            def score() -> int:
                answer = client.post("/v1/airquality/score", json=SCORE, headers=bearer(token))
                return answer.status_code

            assert [score() for _ in range(3)] == [200] * 3  # the loop's pool holds some
            own_server.halt()
            assert score() == 503
            assert score() == 503  # known down: at once
            own_server.resume()
            recovered(store)
            assert [score() for _ in range(3)] == [200] * 3
        assert [e.amount for e in store.entries("user:alice")] == [1] * 6
    finally:
        requests.close()
        store.close()

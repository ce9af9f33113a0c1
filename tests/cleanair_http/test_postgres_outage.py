"""PostgreSQL going away under a running service: calls answer 503 and charge nothing, and
once the server is back the service answers 200 again by itself: a call that found the
server gone had the pool check its connections, so those the crash broke are replaced, not
failed on one by one.

The test runs its own server (as tests/cleanair_storage/test_postgres_outage.py does), so it
can crash and restart it without disturbing the rest of the session.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from litestar.testing import TestClient

from cleanair_core import CleanAir, ManualClock, Policy, TokenKeys, generate_key
from cleanair_core.errors import StoreUnavailable
from cleanair_core.ports import Sources
from cleanair_http.app import create_app
from cleanair_http.offloading import in_thread
from cleanair_runtime.composition.settings import Settings
from cleanair_storage.postgres import PostgresStore
from support.fakes import FakeGeolocator, FakeIp, FakeNamer, FakeSource
from support.http import Client, bearer, pair
from support.postgres import PostgresServer

SCORE = {"lat": 60.17, "lon": 24.94}
#: Connections in the pool when the server crashes: each is left broken by the crash, and
#: more of them than the calls made during the outage (which discard the ones they meet).
POOLED = 6
UNAVAILABLE = {"detail": "The service's database is unavailable; try again shortly"}


@pytest.fixture
def store(own_server: PostgresServer) -> Iterator[PostgresStore]:
    opened = PostgresStore(own_server.database(), timeout=2.0)
    yield opened
    opened.close()


@pytest.fixture
def client(store: PostgresStore) -> Iterator[Client]:
    sources = Sources(FakeSource(), FakeGeolocator(None), FakeIp(), FakeNamer())
    core = CleanAir(
        store,
        TokenKeys(generate_key()),
        # Only the test's requests use the pool: no plan runners, and the charge upkeep,
        # which runs once at start, not again for 20 minutes.
        Policy(charge_hold_seconds=3600),
        ManualClock(),
        sources=sources,
        offload=in_thread,
        store_calls=in_thread,  # as the deployment runs a PostgreSQL store
    )
    with TestClient(create_app(core, Settings(plan_workers=0))) as started:
        started.app.state.core = core
        yield started


def fill_the_pool(store: PostgresStore, connections: int) -> None:
    """Hold `connections` units of work open at once, so the pool holds that many idle
    connections afterwards (a busy service's pool)."""
    together = threading.Barrier(connections)

    def hold() -> None:
        with store.transaction():
            together.wait(timeout=10)

    threads = [threading.Thread(target=hold) for _ in range(connections)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)


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


def score(client: Client, token: str) -> int:
    response = client.post("/v1/airquality/score", json=SCORE, headers=bearer(token))
    if response.status_code == 503:
        assert response.json() == UNAVAILABLE
    return response.status_code


def used(client: Client, token: str) -> int:
    quota = client.get("/v1/quota", headers=bearer(token))
    assert quota.status_code == 200, quota.text
    credits: int = quota.json()["used"]
    return credits


def test_an_outage_answers_503_charges_nothing_and_the_service_recovers_by_itself(
    own_server: PostgresServer, store: PostgresStore, client: Client
) -> None:
    token = pair(client.app.state.core, client)
    assert score(client, token) == 200
    fill_the_pool(store, POOLED)

    own_server.halt()  # the server crashes mid-run
    assert score(client, token) == 503
    assert client.get("/v1/quota", headers=bearer(token)).status_code == 503

    own_server.resume()
    # Back by itself, once the pool's reconnection (which backs off while the server is
    # down) has reached it; then every call answers: none meets a connection the crash broke.
    recovered(store)
    assert [score(client, token) for _ in range(POOLED)] == [200] * POOLED
    assert used(client, token) == 1 + POOLED  # the 503 charged nothing
    assert [e.amount for e in store.entries("user:alice")] == [1] * (1 + POOLED)


def test_after_an_unnoticed_restart_one_call_at_most_meets_a_broken_connection(
    own_server: PostgresServer, store: PostgresStore, client: Client
) -> None:
    """A crash and restart between two calls: the first call meets a connection the crash
    broke (503, nothing charged) and has the pool check the rest, so every later call
    answers."""
    token = pair(client.app.state.core, client)
    fill_the_pool(store, POOLED)
    own_server.halt()
    own_server.resume()
    first = score(client, token)
    assert first in (200, 503)
    assert [score(client, token) for _ in range(POOLED)] == [200] * POOLED
    charged = POOLED + (first == 200)
    assert used(client, token) == charged


#: Seconds a call may take to answer 503 once the outage is known: far below the store's
#: pool timeout (2 s here, 10 s deployed), which every call used to wait out.
AT_ONCE_S = 1.0


def test_once_the_server_is_known_down_calls_answer_503_at_once_and_recover_soon(
    own_server: PostgresServer, store: PostgresStore, client: Client
) -> None:
    token = pair(client.app.state.core, client)
    fill_the_pool(store, POOLED)
    own_server.halt()
    assert score(client, token) == 503  # this one finds out (the pool's wait, at most)
    for _ in range(5):
        started = time.monotonic()
        assert score(client, token) == 503
        assert client.get("/readyz").status_code == 503
        assert time.monotonic() - started < AT_ONCE_S
    own_server.resume()
    # Tried every second: back within a few, not after the pool's backed-off reconnection.
    resumed = time.monotonic()
    recovered(store, within_s=30)
    assert time.monotonic() - resumed < 10
    assert [score(client, token) for _ in range(POOLED)] == [200] * POOLED

"""`GET /livez` and `GET /readyz`: no token, no credits, no rate limit, outside the OpenAPI
document, and at DEBUG only in the access log; /readyz says why it is not ready."""

from __future__ import annotations

import logging
import sqlite3
import time
from pathlib import Path

import pytest
from litestar.testing import TestClient

from cleanair_core import CleanAir, ManualClock, Policy, TokenKeys, generate_key
from cleanair_core.errors import StoreUnavailable
from cleanair_core.ports import Sources
from cleanair_core.use_cases.health import (
    DATABASE_UNAVAILABLE,
    NO_PLACE_DATA,
    NO_STREET_NETWORK,
    SCHEMA_NOT_CURRENT,
)
from cleanair_http.app import create_app
from cleanair_http.offloading import in_thread
from cleanair_runtime.composition.bootstrap import open_deployment
from cleanair_runtime.composition.settings import Settings
from cleanair_sources.street_router import LoadedNetworks
from cleanair_storage.postgres import PostgresStore
from cleanair_storage.sqlite import SqliteStore
from support.fakes import FakeGeolocator, FakeIp, FakeNamer, FakeSource
from support.http import Client, MakeClient, bearer, pair
from support.networks import grid
from support.postgres import PostgresServer

OK = {"status": "ok"}


@pytest.fixture
def sources() -> Sources:
    """Everything loaded: place data and one street network."""
    return Sources(
        FakeSource(),
        FakeGeolocator(None),
        FakeIp(),
        FakeNamer(),
        networks=LoadedNetworks([grid(2, 2)]),
    )


def unavailable(*reasons: str) -> dict[str, object]:
    return {"status": "unavailable", "reasons": list(reasons)}


def test_live_and_ready_answer_without_a_token(client: Client) -> None:
    live = client.get("/livez")
    assert (live.status_code, live.json()) == (200, OK)
    ready = client.get("/readyz")
    assert (ready.status_code, ready.json()) == (200, OK)
    # A token is not even looked at: a probe with a stale one still gets its answer.
    stale = bearer("ca_tst_" + "A" * 43)
    assert client.get("/readyz", headers=stale).status_code == 200


def test_an_unavailable_database_is_not_ready_but_live(
    core: CleanAir, client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    def down() -> bool:
        raise StoreUnavailable()  # what every adapter raises when its database cannot answer

    monkeypatch.setattr(core.store, "schema_is_current", down)
    ready = client.get("/readyz")
    assert (ready.status_code, ready.json()) == (503, unavailable(DATABASE_UNAVAILABLE))
    # Liveness never asks the database: an outage must not get live processes restarted.
    assert client.get("/livez").status_code == 200


def test_a_database_a_newer_release_migrated_is_not_ready(tmp_path: Path, client: Client) -> None:
    assert client.get("/readyz").status_code == 200
    with sqlite3.connect(tmp_path / "cleanair.db") as other_release:
        other_release.execute(
            "INSERT INTO _sqlite_migrations (migration_set, name, applied_at) "
            "VALUES ('cleanair', 'm999_a_newer_release', '2030-01-01')"
        )
    other_release.close()
    ready = client.get("/readyz")
    assert (ready.status_code, ready.json()) == (503, unavailable(SCHEMA_NOT_CURRENT))


@pytest.mark.parametrize(
    ("loaded", "reasons"),
    [
        (Sources(FakeSource(), places=FakeNamer()), [NO_STREET_NETWORK]),
        (
            Sources(FakeSource(), places=FakeNamer(), networks=LoadedNetworks([])),
            [NO_STREET_NETWORK],
        ),
        (Sources(FakeSource(), networks=LoadedNetworks([grid(2, 2)])), [NO_PLACE_DATA]),
        (None, [NO_PLACE_DATA, NO_STREET_NETWORK]),
    ],
    ids=["no-networks", "empty-networks", "no-places", "no-sources"],
)
def test_missing_data_is_not_ready(
    tmp_path: Path, loaded: Sources | None, reasons: list[str]
) -> None:
    store = SqliteStore(tmp_path / "other.db")
    core = CleanAir(store, TokenKeys(generate_key()), sources=loaded)
    try:
        with TestClient(create_app(core, Settings(plan_workers=0))) as client:
            ready = client.get("/readyz")
    finally:
        store.close()
    assert (ready.status_code, ready.json()) == (503, unavailable(*reasons))


def test_a_deployment_that_loads_no_network_on_purpose_is_ready_with_none(
    tmp_path: Path,
) -> None:
    # CLEANAIR_DEFAULT_NETWORK=false and none imported: a deployment that serves scores alone.
    settings = Settings(database=tmp_path / "scores.db", default_network=False, plan_workers=0)
    deployment = open_deployment(settings)
    try:
        assert deployment.network_names == ()
        with TestClient(create_app(deployment.core, settings)) as client:
            ready = client.get("/readyz")
    finally:
        deployment.close()
    assert (ready.status_code, ready.json()) == (200, OK)


def test_without_a_network_only_one_loaded_on_purpose_is_ready(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "other.db")
    places_only = Sources(FakeSource(), places=FakeNamer())
    core = CleanAir(
        store, TokenKeys(generate_key()), Policy(street_network_required=False), sources=places_only
    )
    try:
        with TestClient(create_app(core, Settings(plan_workers=0))) as client:
            ready = client.get("/readyz")
    finally:
        store.close()
    assert (ready.status_code, ready.json()) == (200, OK)
    # The place data is still required: a scores-only deployment answers scores with it.
    core = CleanAir(
        store := SqliteStore(tmp_path / "none.db"),
        TokenKeys(generate_key()),
        Policy(street_network_required=False),
        sources=None,
    )
    try:
        with TestClient(create_app(core, Settings(plan_workers=0))) as client:
            ready = client.get("/readyz")
    finally:
        store.close()
    assert (ready.status_code, ready.json()) == (503, unavailable(NO_PLACE_DATA))


def test_probes_are_free_and_not_rate_limited(tmp_path: Path, sources: Sources) -> None:
    store = SqliteStore(tmp_path / "limited.db")
    core = CleanAir(
        store,
        TokenKeys(generate_key()),
        Policy(requests_per_minute=2),
        ManualClock(),
        sources=sources,
    )
    try:
        with TestClient(create_app(core, Settings(plan_workers=0))) as client:
            token = pair(core, client)  # pairing is limited per address, not per connection
            for _ in range(5):
                for path in ("/livez", "/readyz"):
                    assert client.get(path, headers=bearer(token)).status_code == 200
            # The connection's 2 requests a minute are all still there, and nothing was charged.
            quota = client.get("/v1/quota", headers=bearer(token))
            assert (quota.status_code, quota.json()["used"]) == (200, 0)
            assert client.get("/v1/quota", headers=bearer(token)).status_code == 200
            assert client.get("/v1/quota", headers=bearer(token)).status_code == 429
    finally:
        store.close()


def test_probes_are_not_in_the_openapi_document(client: Client) -> None:
    paths = client.get("/schema/openapi.json").json()["paths"]
    assert {"/livez", "/readyz"} & set(paths) == set()
    assert all(path.startswith(("/v1/", "/ext/v1/")) for path in paths)


def test_probes_are_logged_at_debug_not_info(
    make_client: MakeClient, caplog: pytest.LogCaptureFixture
) -> None:
    client = make_client(access_log=True)
    caplog.set_level(logging.INFO, logger="cleanair.access")
    client.get("/livez")
    client.get("/readyz")
    client.get("/nowhere")
    access = [r for r in caplog.records if r.name == "cleanair.access"]
    assert [r.path for r in access] == ["/nowhere"]  # type: ignore[attr-defined]

    caplog.clear()
    caplog.set_level(logging.DEBUG, logger="cleanair.access")
    client.get("/readyz")
    access = [r for r in caplog.records if r.name == "cleanair.access"]
    assert [(r.levelno, r.path, r.status) for r in access] == [  # type: ignore[attr-defined]
        (logging.DEBUG, "/readyz", 200)
    ]


# -- PostgreSQL: a real server that goes away and comes back -----------------------------------


def test_postgres_ready_then_unavailable_then_ready_again(
    own_server: PostgresServer, sources: Sources
) -> None:
    store = PostgresStore(own_server.database(), timeout=1.0)
    # As the deployment wires PostgreSQL: every store call on a worker thread.
    core = CleanAir(store, TokenKeys(generate_key()), sources=sources, store_calls=in_thread)
    try:
        with TestClient(create_app(core, Settings(plan_workers=0))) as client:
            assert client.get("/readyz").json() == OK
            own_server.halt()
            for _ in range(2):  # a broken pooled connection, then none to be had
                ready = client.get("/readyz")
                assert (ready.status_code, ready.json()) == (503, unavailable(DATABASE_UNAVAILABLE))
            assert client.get("/livez").status_code == 200
            own_server.resume()
            # Back by itself: the pool reconnects (after its backoff; each probe meanwhile
            # waits at most the pool's 1 s timeout and answers 503).
            deadline = time.monotonic() + 60
            while (ready := client.get("/readyz")).status_code != 200:
                assert ready.json() == unavailable(DATABASE_UNAVAILABLE)
                assert time.monotonic() < deadline, "the store did not recover"
            assert ready.json() == OK
    finally:
        store.close()

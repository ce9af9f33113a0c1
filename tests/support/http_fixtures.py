"""Fixtures the HTTP adapter's and the runtime's tests share: a core over a real SQLite file,
a manual clock, a TestClient, and the database the CLI (run in process) works on.

Each test folder's conftest.py imports them, so pytest finds them there."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from litestar.testing import TestClient
from litestar.types import ASGIApp, ControllerRouterHandler

from cleanair_core import CleanAir, ManualClock, Policy, TokenKeys, generate_key
from cleanair_core.credits.ledger import CreditLimits
from cleanair_core.ports import Sources
from cleanair_http.app import create_app, with_access_log
from cleanair_http.offloading import here_or_in_thread, in_thread
from cleanair_runtime.composition.bootstrap import load_or_create_key
from cleanair_runtime.composition.settings import KEY_FILE_NAME, Settings
from cleanair_storage.sqlite import SqliteStore
from support.fakes import FakeGeolocator, FakeIp, FakeNamer, FakeSource
from support.http import Client, MakeClient


@pytest.fixture
def database(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The SQLite file the CLI (run in process) works on: made, empty, with a fresh key file
    beside it, as the first `cleanair users add` leaves them (most commands need both)."""
    path = new_database(tmp_path, monkeypatch)
    load_or_create_key(path.parent / KEY_FILE_NAME)
    SqliteStore(path).close()
    return path


@pytest.fixture
def no_database(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where CLEANAIR_DATABASE names a SQLite file that does not exist yet, nor its key."""
    return new_database(tmp_path, monkeypatch)


def new_database(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "var" / "cleanair.db"
    monkeypatch.setenv("CLEANAIR_DATABASE", str(path))
    monkeypatch.delenv("CLEANAIR_SECRET_KEY", raising=False)
    monkeypatch.delenv("CLEANAIR_SECRET_KEY_FILE", raising=False)
    return path


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def sources() -> Sources:
    """Fakes with observable state; a test module overrides this for real adapters."""
    return Sources(FakeSource(), FakeGeolocator(None), FakeIp(), FakeNamer())


@pytest.fixture
def core(tmp_path: Path, clock: ManualClock, sources: Sources) -> Iterator[CleanAir]:
    store = SqliteStore(tmp_path / "cleanair.db")
    policy = Policy(credits=CreditLimits(monthly=1000, daily=100))
    keys = TokenKeys(generate_key())
    yield CleanAir(
        store,
        keys,
        policy,
        clock,
        sources=sources,
        offload=in_thread,
        store_calls=here_or_in_thread,
    )
    store.close()


@pytest.fixture
def make_client(core: CleanAir) -> Iterator[MakeClient]:
    clients: list[Client] = []

    def make(
        settings: Settings | None = None,
        handlers: Sequence[ControllerRouterHandler] = (),
        *,
        access_log: bool = False,
    ) -> Client:
        app = create_app(core, settings, handlers)
        served: ASGIApp = with_access_log(app) if access_log else app
        client: Client = TestClient(served)
        client.__enter__()
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.__exit__(None, None, None)


@pytest.fixture
def client(make_client: MakeClient) -> Client:
    return make_client()

"""A database held by another writer past the busy timeout answers 503, and charges nothing."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from functools import partial
from pathlib import Path

import pytest
from litestar.testing import TestClient

from cleanair_core import CleanAir, ManualClock, Policy, TokenKeys, generate_key
from cleanair_core.air.pollutants import Concentrations
from cleanair_core.air.quality_source import Sample
from cleanair_core.errors import RETRY_AFTER_UNAVAILABLE
from cleanair_core.ports import Sources
from cleanair_http.app import create_app
from cleanair_storage.sqlite import SqliteStore
from support.fakes import AIR, FakeGeolocator, FakeIp, FakeNamer
from support.http import Client, bearer, pair

HOLD = 60
SCORE = {"lat": 60.17, "lon": 24.94}


class LockingSource:
    """Air that arrives while another process takes the database's write lock: the answer
    is ready, but neither confirming nor refunding its charge can be written."""

    update_interval = 3600

    def __init__(self) -> None:
        self.lock_on_call: sqlite3.Connection | None = None

    async def concentrations(self, samples: Sequence[Sample]) -> list[Concentrations]:
        if self.lock_on_call is not None:
            self.lock_on_call.execute("BEGIN IMMEDIATE")
        return [dict(AIR) for _ in samples]


@pytest.fixture
def air() -> LockingSource:
    return LockingSource()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def core(tmp_path: Path, air: LockingSource, clock: ManualClock) -> Iterator[CleanAir]:
    store = SqliteStore(tmp_path / "cleanair.db", busy_timeout=0.05)
    sources = Sources(air, FakeGeolocator(None), FakeIp(), FakeNamer())
    policy = Policy(charge_hold_seconds=HOLD)
    yield CleanAir(store, TokenKeys(generate_key()), policy, clock, sources=sources)
    store.close()


@pytest.fixture
def other_writer(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    # Used from the test and from the app's event-loop thread alike.
    connection = sqlite3.connect(
        tmp_path / "cleanair.db", isolation_level=None, check_same_thread=False
    )
    yield connection
    connection.close()


def used(client: Client, token: str) -> int:
    quota = client.get("/v1/quota", headers=bearer(token))
    assert quota.status_code == 200
    used_credits: int = quota.json()["used"]
    return used_credits


def test_a_locked_database_answers_503_on_every_endpoint(
    core: CleanAir, other_writer: sqlite3.Connection
) -> None:
    with TestClient(create_app(core)) as client:
        token = pair(core, client)
        core.add_user("bob")
        code = core.create_pairing_code("bob")
        other_writer.execute("BEGIN IMMEDIATE")

        for response in (
            client.post("/v1/airquality/score", json=SCORE, headers=bearer(token)),
            client.get("/v1/quota", headers=bearer(token)),
            client.post("/v1/connections/token", json={"code": code, "name": "x"}),
        ):
            assert response.status_code == 503
            assert response.json() == {
                "detail": "The service's database is unavailable; try again shortly"
            }
            assert response.headers["Retry-After"] == str(RETRY_AFTER_UNAVAILABLE)

        other_writer.execute("ROLLBACK")
        assert used(client, token) == 0
        # The refused redemption did not use the code up.
        assert (
            client.post("/v1/connections/token", json={"code": code, "name": "x"}).status_code
            == 201
        )


def test_a_lock_taken_after_the_debit_is_refunded_when_the_hold_ends(
    core: CleanAir,
    air: LockingSource,
    other_writer: sqlite3.Connection,
    clock: ManualClock,
) -> None:
    with TestClient(create_app(core)) as client:
        token = pair(core, client)
        air.lock_on_call = other_writer
        response = client.post("/v1/airquality/score", json=SCORE, headers=bearer(token))
        assert response.status_code == 503  # the answer could not be made final: not sent
        other_writer.execute("ROLLBACK")
        air.lock_on_call = None

        assert used(client, token) == 1  # still held: neither confirmed nor refunded
        clock.advance(HOLD)
        assert core.sweep_charge_holds() == 1
        assert used(client, token) == 0


def test_the_cli_says_the_database_is_unavailable_and_exits_3(
    tmp_path: Path,
    other_writer: sqlite3.Connection,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from cleanair_runtime import cli
    from cleanair_runtime.composition import bootstrap

    monkeypatch.setenv("CLEANAIR_DATABASE", str(tmp_path / "cleanair.db"))
    monkeypatch.setattr(bootstrap, "SqliteStore", partial(SqliteStore, busy_timeout=0.05))
    assert cli.main(["users", "add", "alice"]) == 0
    capsys.readouterr()  # its note of the key file it made
    other_writer.execute("BEGIN IMMEDIATE")
    # Opening the store already needs the write lock (its migrations), so that is where a
    # command finds the database unavailable.
    assert cli.main(["users", "add", "bob"]) == 3
    out, err = capsys.readouterr()
    assert err == "cleanair: The service's database is unavailable; try again shortly\n"
    assert "Traceback" not in out + err
    other_writer.execute("ROLLBACK")

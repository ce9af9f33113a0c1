"""The plan worker survives a transient storage error while renewing a lease."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

import anyio
import pytest
from litestar.testing import TestClient

from cleanair_core import CleanAir, ManualClock, Policy, TokenKeys, generate_key
from cleanair_core.air.pollutants import Concentrations, Pollutant
from cleanair_core.air.quality_source import Sample
from cleanair_core.credits.ledger import CreditLimits
from cleanair_core.errors import StoreUnavailable
from cleanair_core.ports import Sources
from cleanair_http.app import create_app
from cleanair_http.settings import Settings
from cleanair_sources.street_router import LoadedNetworks
from cleanair_storage.sqlite import SqliteStore
from support.http import MakeClient, bearer, pair
from support.networks import DLON, ORIGIN, grid


class FlakyRenewStore(SqliteStore):
    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.renewals = 0

    def renew_lease(self, plan_id, until):  # type: ignore[no-untyped-def]
        self.renewals += 1
        if self.renewals == 1:
            raise RuntimeError("database is locked")  # a transient storage error
        return super().renew_lease(plan_id, until)


class SlowAir:
    update_interval = 3600

    def __init__(self) -> None:
        self.slow = True

    async def concentrations(self, samples: Sequence[Sample]) -> list[Concentrations]:
        if self.slow:
            self.slow = False
            await anyio.sleep(2.5)
        return [{Pollutant.NO2: 20.0} for _ in samples]


def body() -> dict[str, object]:
    return {
        "start": {"latitude": ORIGIN.lat, "longitude": ORIGIN.lon},
        "end": {"latitude": ORIGIN.lat, "longitude": ORIGIN.lon + 5 * DLON},
        "activity_type": "walking",
    }


def test_a_transient_renewal_error_does_not_kill_the_worker(tmp_path: Path) -> None:
    store = FlakyRenewStore(tmp_path / "x.db")
    policy = Policy(credits=CreditLimits(1000, 1000), plan_lease_seconds=3)
    core = CleanAir(
        store,
        TokenKeys(generate_key()),
        policy,
        ManualClock(),
        sources=Sources(SlowAir(), networks=LoadedNetworks([grid(3, 6)])),
    )
    with TestClient(create_app(core, Settings(plan_workers=1))) as client:
        tokens = [pair(core, client, name=f"a{i}") for i in range(5)]
        first = client.post("/v1/routes", json=body(), headers=bearer(tokens[0])).json()[
            "request_id"
        ]
        time.sleep(4)
        assert store.renewals >= 1
        second = client.post("/v1/routes", json=body(), headers=bearer(tokens[0])).json()[
            "request_id"
        ]
        statuses = {}
        for attempt in range(100):
            t = tokens[attempt % 5]
            statuses = {
                rid: client.get(f"/v1/routes/{rid}", headers=bearer(t)).json()["status"]
                for rid in (first, second)
            }
            if "pending" not in statuses.values():
                break
            time.sleep(0.1)

        assert statuses == {first: "completed", second: "completed"}


def test_the_app_gives_its_worker_the_idle_time_setting(core: CleanAir) -> None:
    app = create_app(core, Settings(plan_workers=1, plan_worker_idle_seconds=7.5))
    assert app.state.plan_worker.idle_seconds == 7.5


@pytest.mark.parametrize("form", ["{%s}", "urn:uuid:%s", "HEX"])
def test_non_canonical_request_ids_are_422(
    core: CleanAir,
    make_client: MakeClient,
    form: str,
) -> None:
    client = make_client(Settings(plan_workers=0))
    token = pair(core, client)
    rid = str(uuid.uuid4())
    shown = rid.replace("-", "") if form == "HEX" else form % rid
    assert client.get(f"/v1/routes/{shown}", headers=bearer(token)).status_code == 422
    assert client.get(f"/v1/routes/{rid.upper()}", headers=bearer(token)).status_code == 404


class OutageStore(SqliteStore):
    """Unavailable for its first `outage` claims, then fine; signals after `wanted` claims."""

    def __init__(self, path: Path, outage: int, wanted: int) -> None:
        super().__init__(path)
        self.claims = 0
        self.outage = outage
        self.wanted = wanted
        self.enough = anyio.Event()

    def claim_plan(self, now, lease):  # type: ignore[no-untyped-def]
        self.claims += 1
        if self.claims >= self.wanted:
            self.enough.set()
        if self.claims <= self.outage:
            raise StoreUnavailable()
        return super().claim_plan(now, lease)


def test_a_database_outage_is_two_log_lines_not_a_traceback_a_second(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from cleanair_http.plan_worker import PlanWorker

    store = OutageStore(tmp_path / "cleanair.db", outage=5, wanted=8)
    core = CleanAir(store, TokenKeys(generate_key()), Policy(), ManualClock())
    caplog.set_level(logging.DEBUG, logger="cleanair")

    async def main() -> None:
        worker = PlanWorker(core, runners=1, idle_seconds=0.001)
        async with worker.running():
            with anyio.fail_after(10):
                await store.enough.wait()

    try:
        anyio.run(main)
    finally:
        store.close()
    lines = [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "cleanair.plans"]
    assert lines == [
        ("WARNING", "the database is unavailable; plans wait until it is back"),
        ("INFO", "the database is available again; planning resumes"),
    ]
    assert not any(r.exc_info for r in caplog.records)

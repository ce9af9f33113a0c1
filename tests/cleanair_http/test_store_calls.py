"""The HTTP layer's own store calls run where the deployment says one-step store calls run.

A PostgreSQL store never says it would wait (each call waits on the network), so a store
call made right on the event loop would hold it for a round trip: the deployment sends them
to a worker thread, and the bearer middleware, quota reads and plan polls must follow it.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest
from litestar.testing import TestClient

from cleanair_core import CleanAir, ManualClock, Policy, TokenKeys, generate_key
from cleanair_core.ports import Sources
from cleanair_http.app import create_app
from cleanair_http.offloading import here_or_in_thread, in_thread
from cleanair_runtime.composition.bootstrap import store_calls_for
from cleanair_runtime.composition.settings import Settings
from cleanair_storage.sqlite import SqliteStore
from support.http import bearer, pair

T = TypeVar("T")


class Recorded:
    """An offload running work in a worker thread and noting the threads it ran in."""

    def __init__(self) -> None:
        self.threads: list[int] = []

    async def __call__(self, work: Callable[[], T], /) -> T:
        def noted() -> T:
            self.threads.append(threading.get_ident())
            return work()

        return await in_thread(noted)


@pytest.fixture
def recorded() -> Recorded:
    return Recorded()


@pytest.fixture
def recording_core(
    tmp_path: Path, clock: ManualClock, sources: Sources, recorded: Recorded
) -> Iterator[CleanAir]:
    store = SqliteStore(tmp_path / "cleanair.db")
    yield CleanAir(
        store,
        TokenKeys(generate_key()),
        Policy(),
        clock,
        sources=sources,
        offload=in_thread,
        store_calls=recorded,
    )
    store.close()


def test_authentication_quota_and_polls_use_the_deployments_store_calls(
    recording_core: CleanAir, recorded: Recorded
) -> None:
    with TestClient(create_app(recording_core, Settings(plan_workers=0))) as client:
        token = pair(recording_core, client)
        recorded.threads.clear()
        assert client.get("/v1/quota", headers=bearer(token)).status_code == 200
        assert len(recorded.threads) == 2  # the middleware's one call, the quota read
        polled = client.get(f"/v1/routes/{uuid.uuid4()}", headers=bearer(token))
        assert polled.status_code == 404
        assert len(recorded.threads) == 4
        assert threading.get_ident() not in recorded.threads


def test_postgresql_store_calls_always_leave_the_event_loop() -> None:
    assert store_calls_for(Settings(database="postgresql://db.example/cleanair")) is in_thread
    assert store_calls_for(Settings(database=Path("cleanair.db"))) is here_or_in_thread

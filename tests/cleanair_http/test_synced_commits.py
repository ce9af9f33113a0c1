"""What the event loop pays for a write synced to disk (SQLite, `synchronous=FULL`): no write
is tried on the loop first (no WouldBlock, no pool hand-over; a held charge's neither), each
batch is one hand-over to the store's committer thread, which runs its COMMIT and nothing
else, uncharged rate-limit hits join the batch, and no COMMIT ever runs on the loop's thread."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest
from litestar.testing import TestClient

from cleanair_core import CleanAir, ManualClock, Policy, TokenKeys, generate_key
from cleanair_core.credits.ledger import CreditLimits
from cleanair_core.offload import here_unless_blocked
from cleanair_core.ports import Sources
from cleanair_http.app import create_app
from cleanair_http.offloading import in_thread
from cleanair_storage.sqlite import SqliteStore
from cleanair_storage.sqlite.group_writes import GROUP_WRITER_THREAD
from support.fakes import HELSINKI, FakeGeolocator, FakeIp, FakeNamer, FakeSource
from support.http import Client, bearer, pair

T = TypeVar("T")
SCORE = "/v1/airquality/score"
BODY = {"lat": HELSINKI.lat, "lon": HELSINKI.lon}


class Counted:
    """A store-call offload as the server's (`here_or_in_thread`) that counts its hand-overs:
    each one follows a write that was tried on the loop and raised WouldBlock."""

    def __init__(self) -> None:
        self.handed_over = 0

        async def fallback(work: Callable[[], T], /) -> T:
            self.handed_over += 1
            return await in_thread(work)

        self.store_calls = here_unless_blocked(fallback)


class Commits:
    """The writer connection's COMMITs, by whether they ran on a thread running an event loop."""

    def __init__(self, store: SqliteStore) -> None:
        self.on_loop = 0
        self.elsewhere = 0

        def seen(statement: str) -> None:
            if statement.strip().upper() == "COMMIT":
                if asyncio._get_running_loop() is not None:
                    self.on_loop += 1
                else:
                    self.elsewhere += 1

        store._writer.set_trace_callback(seen)


@pytest.fixture
def sources() -> Sources:
    return Sources(
        FakeSource(), FakeGeolocator(None), FakeIp(), FakeNamer(), local_air=True, local_wifi=True
    )


@pytest.fixture
def counted() -> Counted:
    return Counted()


@pytest.fixture
def core(
    tmp_path: Path, clock: ManualClock, sources: Sources, counted: Counted
) -> Iterator[CleanAir]:
    store = SqliteStore(tmp_path / "cleanair.db")  # synchronous=FULL, the default
    policy = Policy(requests_per_minute=1000, credits=CreditLimits(monthly=1000, daily=1000))
    yield CleanAir(
        store,
        TokenKeys(generate_key()),
        policy,
        clock,
        sources=sources,
        offload=in_thread,
        store_calls=counted.store_calls,
    )
    store.close()


def test_a_charged_score_costs_the_loop_one_batch_and_no_retry(
    core: CleanAir, client: Client, counted: Counted
) -> None:
    token = pair(core, client)
    assert isinstance(core.store, SqliteStore)
    writer = core.store._group_writer
    before, counted.handed_over = writer.batches, 0
    scores = 5
    for _ in range(scores):
        assert client.post(SCORE, json=BODY, headers=bearer(token)).status_code == 200
    # Each score's hit and debit go in its batch's one transaction: no write was tried on the
    # loop and retried in a thread (WouldBlock), and one writer batch each, as they come one
    # at a time.
    assert counted.handed_over == 0
    assert writer.batches - before == scores
    assert [e.amount for e in core.store.entries("user:alice")] == [1] * scores


def test_a_commit_of_the_request_path_never_runs_on_the_loop(
    core: CleanAir, client: Client
) -> None:
    token = pair(core, client)
    assert isinstance(core.store, SqliteStore)
    commits = Commits(core.store)
    assert client.post(SCORE, json=BODY, headers=bearer(token)).status_code == 200
    assert client.get("/v1/quota", headers=bearer(token)).status_code == 200  # a hit alone
    assert commits.on_loop == 0
    assert commits.elsewhere >= 2


def test_hits_and_charges_queued_together_share_one_commit(core: CleanAir) -> None:
    store = core.store
    assert isinstance(store, SqliteStore)
    writes = 20

    async def many() -> list[int]:
        # The writer thread waits for the write lock while every write is queued: at most
        # the first goes alone, every other one in the next batch.
        with store._write_lock:
            queued = [
                asyncio.ensure_future(core.context.requests.hit(f"k{i % 4}", 0))
                for i in range(writes)
            ]
            await asyncio.sleep(0)  # each task queues its write before the lock goes
        return await asyncio.gather(*queued)

    before = store._group_writer.batches
    counts = asyncio.run(many())
    assert sorted(counts) == sorted(n for _ in range(4) for n in range(1, writes // 4 + 1))
    assert 1 <= store._group_writer.batches - before <= 2


def test_a_failing_write_is_undone_alone(core: CleanAir) -> None:
    store = core.store
    assert isinstance(store, SqliteStore)

    def fails() -> int:
        store.hit("doomed", 0)
        raise ValueError("no")

    async def both() -> tuple[object, int]:
        writes = store.group_writes()
        assert writes is not None
        with store._write_lock:
            failed = asyncio.ensure_future(writes(fails))
            counted = asyncio.ensure_future(core.context.requests.hit("kept", 0))
            await asyncio.sleep(0)
        results = await asyncio.gather(failed, counted, return_exceptions=True)
        counted_to = results[1]
        assert isinstance(counted_to, int)
        return results[0], counted_to

    error, count = asyncio.run(both())
    assert isinstance(error, ValueError)
    assert count == 1
    assert store.hit("doomed", 0) == 1  # the failed write's hit was undone
    assert store.hit("kept", 0) == 2


class Statements:
    """The writer connection's statements, by the thread that ran them."""

    def __init__(self, store: SqliteStore) -> None:
        self.by_thread: dict[str, list[str]] = {}

        def seen(statement: str) -> None:
            name = threading.current_thread().name
            self.by_thread.setdefault(name, []).append(statement.strip().split()[0].upper())

        store._writer.set_trace_callback(seen)


def test_a_charged_score_hands_the_writer_thread_its_commit_alone(
    core: CleanAir, client: Client, counted: Counted
) -> None:
    # What the loop pays per charged score under FULL: no WouldBlock retry, one batch, and
    # the one thread that syncs runs nothing but the COMMIT: no Python of the writes (nor
    # their savepoints) queued for the GIL behind a busy loop.
    token = pair(core, client)
    assert isinstance(core.store, SqliteStore)
    writer = core.store._group_writer
    statements = Statements(core.store)
    before, counted.handed_over = writer.batches, 0
    scores = 5
    for _ in range(scores):
        assert client.post(SCORE, json=BODY, headers=bearer(token)).status_code == 200
    assert counted.handed_over == 0
    assert writer.batches - before == scores
    assert writer.waited_in_thread == 0
    assert statements.by_thread[GROUP_WRITER_THREAD] == ["COMMIT"] * scores
    others = [
        s for name, run in statements.by_thread.items() if name != GROUP_WRITER_THREAD for s in run
    ]
    assert others.count("BEGIN") == scores
    assert "COMMIT" not in others


def test_a_held_charge_counts_its_hit_in_a_batch_without_a_retry(
    tmp_path: Path, clock: ManualClock, counted: Counted
) -> None:
    # Air from an upstream (not the embedded model): the charge is held, and the request's
    # pending hit is counted before its work, on its own. Under FULL it joins the group
    # writer's next batch: never tried on the loop first, raising WouldBlock.
    store = SqliteStore(tmp_path / "cleanair.db")
    sources = Sources(FakeSource(), FakeGeolocator(None), FakeIp(), FakeNamer())
    policy = Policy(requests_per_minute=1000, credits=CreditLimits(monthly=1000, daily=1000))
    core = CleanAir(
        store,
        TokenKeys(generate_key()),
        policy,
        clock,
        sources=sources,
        offload=in_thread,
        store_calls=counted.store_calls,
    )
    try:
        with TestClient(create_app(core)) as client:
            token = pair(core, client)
            counted.handed_over = 0
            assert client.post(SCORE, json=BODY, headers=bearer(token)).status_code == 200
        assert counted.handed_over == 0
        assert [e.amount for e in store.entries("user:alice")] == [1]
    finally:
        store.close()

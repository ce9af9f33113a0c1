"""The request path's awaitable store calls (`RequestStore`) keep the sync ports' contract on
every store: SQLite's through `offloaded`, PostgreSQL's own on the event loop
(`PostgresRequests`). Each answer is checked against the sync port's on the same data, calls
of both kinds mixed, as a deployment's processes mix them."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import pytest

from cleanair_core import CleanAir, Policy, TokenKeys, generate_key
from cleanair_core.credits.ledger import (
    CreditLimits,
    Debit,
    FinalCharge,
    LedgerEntry,
    OverRateLimit,
)
from cleanair_core.credits.rate_limits import RateHit
from cleanair_core.errors import CreditsExhausted
from cleanair_core.offload import inline
from cleanair_core.ports import AdmissionRead, Store
from cleanair_core.request_calls import RequestStore, offloaded
from cleanair_storage.postgres import PostgresStore
from cleanair_storage.postgres.requests import PostgresRequests
from cleanair_storage.sqlite import SqliteStore

T = TypeVar("T")
AT = datetime(2026, 11, 28, 12, 30, tzinfo=UTC)
LIMITS = CreditLimits(monthly=1000, daily=3)


async def in_a_thread(work: Callable[[], T], /) -> T:
    return await asyncio.to_thread(work)


@pytest.fixture(params=("sqlite", "postgres"))
def both(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Store, RequestStore]]:
    """A store and its request path's calls, as the composition root pairs them."""
    if request.param == "sqlite":
        sqlite = SqliteStore(tmp_path / "cleanair.db")
        yield sqlite, offloaded(sqlite, inline)
        sqlite.close()
        return
    postgres = PostgresStore(request.getfixturevalue("postgres_url"))
    requests = PostgresRequests(postgres, in_a_thread)
    yield postgres, requests
    requests.close()
    postgres.close()


def run(call: Any) -> Any:
    return asyncio.run(call)


def test_admission_reads_what_the_sync_port_reads(both: tuple[Store, RequestStore]) -> None:
    store, requests = both
    keys = TokenKeys(generate_key())
    core = CleanAir(store, keys, Policy())
    core.add_user("alice")
    token = core.redeem_pairing_code(core.create_pairing_code("alice"), "phone", "127.0.0.1")
    token_hash = keys.hash_token(token.token)
    assert run(requests.admission("nobody", "requests", AT)) == AdmissionRead(None)
    connection_id = str(token.connection.id)
    store.hit(f"requests:{connection_id}", 60 * (int(AT.timestamp()) // 60))
    store.settle_charges([FinalCharge(Debit("user:alice", connection_id, "score", 2, AT))], LIMITS)
    read = run(requests.admission(token_hash, "requests", AT))
    assert read == store.admission(token_hash, "requests", AT)
    assert read.connection is not None
    assert read.standing is True
    assert read.counter is not None
    assert read.counter[1] == 1
    assert read.usage.month == 2
    assert read.usage.day == 2


def test_hits_count_with_the_sync_ports_in_one_counter(
    both: tuple[Store, RequestStore],
) -> None:
    store, requests = both
    counts = [
        run(requests.hit("k", 600)),
        store.hit("k", 600),
        run(requests.hit("k", 600)),
        run(requests.hit("k", 540)),  # a clock one window behind counts in the stored one
        run(requests.hit("k", 660)),  # a new window starts again
    ]
    assert counts == [1, 2, 3, 4, 1]


def test_client_labels_are_recognised_once_added(both: tuple[Store, RequestStore]) -> None:
    store, requests = both
    assert run(requests.is_client_label("ios-app")) is False
    store.add_client_label("ios-app", AT)
    assert run(requests.is_client_label("ios-app")) is True


def test_a_batch_settles_each_charge_as_the_sync_port_would(
    both: tuple[Store, RequestStore],
) -> None:
    store, requests = both
    hit = RateHit("requests:c3", 600, 60, 1)
    store.hit(hit.key, hit.window_start)  # the window's one request is taken
    batch = [
        FinalCharge(Debit("user:bob", "c1", "score", 2, AT)),
        FinalCharge(Debit("user:alice", "c2", "score", 3, AT)),
        FinalCharge(Debit("user:bob", "c1", "score", 2, AT)),  # over bob's daily 3
        FinalCharge(Debit("user:alice", "c3", "score", 1, AT), hit),  # over its rate limit
    ]
    settled = run(requests.settle_charges(batch, LIMITS))
    assert [type(s) for s in settled] == [LedgerEntry, LedgerEntry, CreditsExhausted, OverRateLimit]
    assert [(e.connection_id, e.amount) for e in settled[:2]] == [("c1", 2), ("c2", 3)]
    assert [e.id for e in store.entries("user:bob")] == [settled[0].id]
    assert [e.id for e in store.entries("user:alice")] == [settled[1].id]
    assert run(requests.settle_charges([], LIMITS)) == []


def test_postgresql_calls_serve_one_loop_after_another(postgres_url: str) -> None:
    """Each event loop has connections of its own; one that has ended leaves none behind in
    use by the next (a process's test clients, one after the other)."""
    store = PostgresStore(postgres_url)
    requests = PostgresRequests(store, in_a_thread)
    try:
        assert [run(requests.hit("k", 600)) for _ in range(3)] == [1, 2, 3]

        async def together() -> list[int]:
            return list(await asyncio.gather(*(requests.hit("k", 600) for _ in range(20))))

        assert sorted(run(together())) == list(range(4, 24))
    finally:
        requests.close()
        store.close()


def test_postgresql_admissions_made_together_are_one_statement(postgres_url: str) -> None:
    """Concurrent requests' reads go to the server as one statement, each answered as the
    sync port answers it alone: tokens of two owners, a revoked one and an unknown one."""
    store = PostgresStore(postgres_url)
    requests = PostgresRequests(store, in_a_thread)
    statements: list[str] = []
    run_one = requests._run

    async def noted(query: Any, params: Any) -> Any:
        statements.append(query)
        return await run_one(query, params)

    requests._run = noted  # type: ignore[method-assign]
    try:
        keys = TokenKeys(generate_key())
        core = CleanAir(store, keys, Policy())
        hashes = ["unknown"]
        for user in ("alice", "bob", "carol"):
            core.add_user(user)
            issued = core.redeem_pairing_code(core.create_pairing_code(user), "app", "127.0.0.1")
            hashes.append(keys.hash_token(issued.token))
        core.set_premium("bob", False)
        core.revoke_connection(issued.connection.id)
        store.hit(f"requests:{issued.connection.id}", 600)

        async def together() -> list[AdmissionRead]:
            return list(
                await asyncio.gather(*(requests.admission(h, "requests", AT) for h in hashes))
            )

        assert run(together()) == [store.admission(h, "requests", AT) for h in hashes]
        assert len(statements) == 1
    finally:
        requests.close()
        store.close()

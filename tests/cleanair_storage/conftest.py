"""Fixtures of the storage tests: stores opened on one shared database, as processes open
theirs, for the concurrency tests of the outbox and the evaluation claims."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from cleanair_core.ports import Store
from cleanair_storage.memory import MemoryStore
from cleanair_storage.postgres import PostgresStore
from cleanair_storage.sqlite import SqliteStore


@pytest.fixture(params=("memory", "sqlite", "postgres"))
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], Store]]:
    """Opens stores on one database, each with its own connections as a process has (the
    memory store is one, shared by the threads)."""
    url = request.getfixturevalue("postgres_url") if request.param == "postgres" else None
    memory = MemoryStore()
    opened: list[Store] = []

    def another() -> Store:
        if request.param == "memory":
            return memory
        store: Store = SqliteStore(tmp_path / "shared.db") if url is None else PostgresStore(url)
        opened.append(store)
        return store

    yield another
    for store in opened:
        store.close()

"""Shared fixtures: one `store` fixture runs a test against every storage adapter."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from cleanair_core.ports import Store
from cleanair_storage.memory import MemoryStore
from cleanair_storage.sqlite import SqliteStore
from support.postgres import PostgresServer, running_postgres


def open_store(kind: str, tmp_path: Path) -> Store:
    """A fresh store of `kind` ("memory" or "sqlite"); a SQLite file lives under `tmp_path`."""
    if kind == "memory":
        return MemoryStore()
    if kind == "sqlite":
        return SqliteStore(tmp_path / "cleanair.db")
    raise ValueError(f"unknown store kind {kind}")


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    opened = open_store(request.param, tmp_path)
    yield opened
    opened.close()


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """A real PostgreSQL server for the whole session, started and removed here."""
    with running_postgres() as server:
        yield server


@pytest.fixture
def postgres_url(postgres: PostgresServer) -> str:
    """A fresh, empty database on the session's server."""
    return postgres.database()

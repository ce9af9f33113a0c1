"""Shared fixtures: one `store` fixture runs a test against every storage adapter."""

from __future__ import annotations

import errno
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from cleanair_core.ports import Store
from cleanair_storage.memory import MemoryStore
from cleanair_storage.postgres import PostgresStore
from cleanair_storage.sqlite import SqliteStore
from support.postgres import PostgresServer, shared_server
from support.servers import DEVELOPER_PORTS


def occupy(port: int) -> socket.socket | None:
    """A socket listening on 127.0.0.1:`port`, or None when something else already does."""
    sock = socket.socket()
    try:
        sock.bind(("127.0.0.1", port))
        sock.listen()
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            return None  # a developer's server (or another test session): busy all the same
        raise
    return sock


@pytest.fixture(scope="session", autouse=True)
def network_files_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The street-network files of a PostgreSQL deployment go to the cache directory
    (`$XDG_CACHE_HOME`): the tests' and their servers' go to one of the session's own, not the
    user's."""
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("cache"))


@pytest.fixture(scope="session")
def developer_ports() -> Iterator[dict[int, socket.socket | None]]:
    """The developer's ports and the socket by which this session holds each (None while
    something else does)."""
    held: dict[int, socket.socket | None] = {port: occupy(port) for port in DEVELOPER_PORTS}
    try:
        yield held
    finally:
        for sock in held.values():
            if sock is not None:
                sock.close()


@pytest.fixture(autouse=True)
def developer_ports_busy(developer_ports: dict[int, socket.socket | None]) -> None:
    """Keep the developer's ports taken for every test, as a `make run` in another terminal
    does: a test that binds one of them fails here as it would there, every time. A port
    someone else held when the session began, and has since let go, is taken now."""
    for port, sock in developer_ports.items():
        if sock is None:
            developer_ports[port] = occupy(port)


#: Every storage adapter: the shared contract suite runs against each.
ADAPTERS = ("memory", "sqlite", "postgres")


def open_store(kind: str, tmp_path: Path, postgres_url: str | None = None) -> Store:
    """A fresh store of `kind` ("memory", "sqlite" or "postgres"); a SQLite file lives under
    `tmp_path`, a PostgreSQL store in the empty database at `postgres_url`."""
    if kind == "memory":
        return MemoryStore()
    if kind == "sqlite":
        return SqliteStore(tmp_path / "cleanair.db")
    if kind == "postgres" and postgres_url is not None:
        return PostgresStore(postgres_url)
    raise ValueError(f"unknown store kind {kind}")


@pytest.fixture(params=ADAPTERS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    url = request.getfixturevalue("postgres_url") if request.param == "postgres" else None
    opened = open_store(request.param, tmp_path, url)
    yield opened
    opened.close()


@pytest.fixture(scope="session")
def postgres() -> PostgresServer:
    """A real PostgreSQL server for the whole session, started by the session itself and
    removed when it ends."""
    return shared_server()


@pytest.fixture
def postgres_url(postgres: PostgresServer) -> str:
    """A fresh, empty database on the session's server."""
    return postgres.database()


@pytest.fixture
def own_server() -> Iterator[PostgresServer]:
    """A server of the test's own, to stop, crash and restart without disturbing any other
    test; durable, so what was committed survives its crash."""
    server = PostgresServer(durable=True)
    try:
        server.start()
        yield server
    finally:
        server.stop()

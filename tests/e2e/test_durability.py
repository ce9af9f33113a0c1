"""End to end: an answered write is on disk before its answer leaves, on both stores.

A real `cleanair serve` (and, on PostgreSQL, the real database server) runs under strace,
which records every socket read and write, every file write and every fsync/fdatasync with
the file each one touched, on one clock. For a pairing redemption, a charged score, a
plan submission and an alert subscription, the database's write-ahead log (SQLite's `-wal`
file, PostgreSQL's `pg_wal/`) is written while the request is handled, and a sync of it
that begins after the last of those writes returns before the server begins writing the
answer.

The same test under the settings that trade durability away (`CLEANAIR_SQLITE_SYNCHRONOUS=
normal`; a database with `synchronous_commit = off`) sees the answers leave before the sync:
the test can tell the difference. Without them, they would pass and prove nothing.
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest

from support.postgres import PostgresServer
from support.servers import Server, children_of, pairing_code, running_server, server_env
from support.syscalls import exchange, synced_before_answer, traced

pytestmark = pytest.mark.e2e

SCORE = {"lat": 60.17, "lon": 24.94}
WALK = {
    "start": {"latitude": 60.1699, "longitude": 24.9384},
    "end": {"latitude": 60.1645, "longitude": 24.9525},
    "activity_type": "walking",
}
#: A feed-only subscription (no webhook, so no destination rules to satisfy).
SUBSCRIPTION = {
    "target": {"type": "place", "lat": 60.1699, "lon": 24.9384},
    "threshold": 3,
    "kind": {"type": "observed"},
    "timezone": "Europe/Helsinki",
}


#: Whether a file (as strace names it) is the database's write-ahead log.
WalTest = Callable[[str], bool]


@dataclass(frozen=True)
class Answered:
    """One request on a connection of its own: what came back, and the client's port."""

    what: str
    status: int
    body: dict[str, Any]
    client_port: int


def request(
    server: Server, what: str, path: str, body: Mapping[str, Any], token: str | None = None
) -> Answered:
    """POST `body` as JSON on a new connection, whose port names it in the trace."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    try:
        conn.connect()
        assert conn.sock is not None
        client_port = int(conn.sock.getsockname()[1])
        headers = {"content-type": "application/json"}
        if token is not None:
            headers["authorization"] = f"Bearer {token}"
        conn.request("POST", path, body=json.dumps(body), headers=headers)
        response = conn.getresponse()
        answered = Answered(what, response.status, json.loads(response.read()), client_port)
    finally:
        conn.close()
    return answered


def acknowledged_writes(server: Server, env: Mapping[str, str]) -> list[Answered]:
    """A pairing redemption, a charged score, a plan submission and an alert subscription,
    each answered 2xx."""
    code = pairing_code(env)
    paired = request(server, "pairing", "/v1/connections/token", {"code": code, "name": "e2e"})
    assert paired.status == 201, paired.body
    token = paired.body["token"]
    scored = request(server, "score", "/v1/airquality/score", SCORE, token)
    assert scored.status == 200, scored.body
    planned = request(server, "plan", "/v1/routes", WALK, token)
    assert planned.status == 202, planned.body
    subscribed = request(
        server, "subscription", "/ext/v1/alerts/subscriptions", SUBSCRIPTION, token
    )
    assert subscribed.status == 201, subscribed.body
    return [paired, scored, planned, subscribed]


def watched(
    server: Server, env: Mapping[str, str], pids: list[int], trace: Path, is_wal: WalTest
) -> dict[str, tuple[bool, bool]]:
    """The acknowledged writes made under strace attached to `pids`; per request: (it wrote
    the WAL while handled, every such write was synced before its answer)."""
    with traced(pids, trace) as finish:
        answered = acknowledged_writes(server, env)
        calls = finish()
    return {
        a.what: synced_before_answer(calls, exchange(calls, a.client_port), is_wal)
        for a in answered
    }


ALL_SYNCED = dict.fromkeys(("pairing", "score", "plan", "subscription"), (True, True))


def sqlite_wal(path: str) -> bool:
    return path.endswith("cleanair.db-wal")


def postgres_wal(path: str) -> bool:
    return "/pg_wal/" in path


def sqlite_env(tmp_path: Path, **settings: str) -> dict[str, str]:
    # The shipped network, so a plan can be submitted (no plan runs: nothing plans here).
    return server_env(tmp_path, CLEANAIR_DEFAULT_NETWORK="true", **settings)


def test_sqlite_syncs_each_answered_write_before_its_answer(tmp_path: Path) -> None:
    env = sqlite_env(tmp_path)
    with running_server(env, tmp_path / "serve.log") as server:
        seen = watched(server, env, [server.process.pid], tmp_path / "trace.txt", sqlite_wal)
    assert seen == ALL_SYNCED


def test_sqlite_normal_answers_before_the_sync(tmp_path: Path) -> None:
    env = sqlite_env(tmp_path, CLEANAIR_SQLITE_SYNCHRONOUS="normal")
    with running_server(env, tmp_path / "serve.log") as server:
        seen = watched(server, env, [server.process.pid], tmp_path / "trace.txt", sqlite_wal)
    assert all(wrote for wrote, _ in seen.values()), seen  # the trace sees each commit
    # A background checkpoint may happen to sync the WAL during one request; not during all.
    assert not all(synced for _, synced in seen.values()), seen


def server_processes(postgres: PostgresServer) -> list[int]:
    """The database server's postmaster and every process it has started (its backends,
    the WAL writer, the checkpointer)."""
    postmaster = int((postgres.data / "postmaster.pid").read_text().split()[0])
    return [postmaster, *sorted(children_of(postmaster))]


@contextmanager
def on_postgres(
    tmp_path: Path, postgres: PostgresServer, synchronous_commit: str | None = None
) -> Iterator[tuple[Server, dict[str, str]]]:
    url = postgres.database()
    if synchronous_commit is not None:
        name = url.rsplit("/", 1)[1]
        with psycopg.connect(postgres.url(), autocommit=True) as conn:
            conn.execute(f'ALTER DATABASE "{name}" SET synchronous_commit = {synchronous_commit}')
    key = tmp_path / "shared.key"
    key.write_text("c0ffee" * 11 + "\n")
    env = sqlite_env(tmp_path, CLEANAIR_DATABASE=url, CLEANAIR_SECRET_KEY_FILE=str(key))
    with running_server(env, tmp_path / "serve.log") as server:
        yield server, env


def test_postgresql_syncs_each_answered_write_before_its_answer(
    tmp_path: Path, own_server: PostgresServer
) -> None:
    assert own_server.durable  # fsync and synchronous_commit on, as PostgreSQL ships
    with on_postgres(tmp_path, own_server) as (server, env):
        pids = [server.process.pid, *server_processes(own_server)]
        seen = watched(server, env, pids, tmp_path / "trace.txt", postgres_wal)
    assert seen == ALL_SYNCED
    assert "Durability" not in server.log.read_text()  # nothing to warn of


def test_postgresql_without_synchronous_commit_answers_before_the_sync(
    tmp_path: Path, own_server: PostgresServer
) -> None:
    with on_postgres(tmp_path, own_server, synchronous_commit="off") as (server, env):
        pids = [server.process.pid, *server_processes(own_server)]
        seen = watched(server, env, pids, tmp_path / "trace.txt", postgres_wal)
    # The WAL writer flushes in the background (every 200 ms, and at once once a WAL page
    # is full, as a pairing's or a plan's transaction may fill one): perhaps during some
    # requests, not during all (a score writes one small row).
    assert not all(synced for _, synced in seen.values()), seen
    assert "synchronous_commit is off" in server.log.read_text()  # the operator is told

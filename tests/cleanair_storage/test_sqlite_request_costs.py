"""What SQLite's part of a charged request costs, counted rather than timed: the admission's
connection parsed once per distinct row, and the WAL frames a charge's commit writes."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from cleanair_core.access.accounts import Owner, OwnerKind, User
from cleanair_core.access.connections import Connection
from cleanair_core.access.scopes import Scope
from cleanair_storage.sqlite import SqliteStore
from cleanair_storage.sqlite.connections import SqliteConnections

AT = datetime(2026, 3, 10, 12, tzinfo=UTC)


def add_connection(store: SqliteStore) -> Connection:
    """A connection of alice's with a token hash no other test uses (the parse cache is the
    process's)."""
    connection = Connection(
        id=uuid.uuid4(),
        owner=Owner(OwnerKind.USER, "alice"),
        name="phone",
        scopes=frozenset({Scope.AQ_READ, Scope.ROUTES_PLAN}),
        token_hash=uuid.uuid4().hex * 2,
        created_at=AT,
    )
    store.add_connection(connection)
    return connection


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteStore]:
    opened = SqliteStore(tmp_path / "cleanair.db")
    opened.add_user(User("alice", False, AT))
    yield opened
    opened.close()


def test_the_admission_parses_a_connection_row_once(
    store: SqliteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every request reads its token's row; the row is parsed into a `Connection` the first
    time only, and a changed row (revoked) is parsed anew, so no answer changes."""
    connection = add_connection(store)
    parsed: list[object] = []
    parse = SqliteConnections._connection

    def counted(row: tuple[object, ...]) -> Connection:
        parsed.append(row[0])
        return parse(row)

    monkeypatch.setattr(SqliteConnections, "_connection", staticmethod(counted))
    reads = [store.admission(connection.token_hash, "req", AT) for _ in range(5)]
    assert [read.connection for read in reads] == [connection] * 5
    assert store.connection_by_token_hash(connection.token_hash) == connection
    assert len(parsed) == 1

    revoked_at = AT + timedelta(minutes=1)
    assert store.revoke_connection(connection.id, revoked_at)
    after = store.admission(connection.token_hash, "req", AT).connection
    assert after is not None
    assert after.revoked_at == revoked_at
    assert store.connection_by_token_hash(connection.token_hash) == after
    assert len(parsed) == 2

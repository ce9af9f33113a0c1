"""A connection's row read again makes the connection made before (no parsing on every
request), and a row that changed, a revoked connection's, never the stale one."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from cleanair_core.access.accounts import OwnerKind
from cleanair_core.access.scopes import Scope
from cleanair_storage.postgres.connections import connection_of_row

CREATED = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)


def row(revoked_at: datetime | None = None) -> tuple[object, ...]:
    return (
        str(uuid.UUID(int=7)),
        "user",
        "alice",
        "phone",
        "aq:read",
        "hash",
        CREATED,
        revoked_at,
    )


def test_an_equal_row_shares_its_connection() -> None:
    first = connection_of_row(row())
    assert connection_of_row(row()) is first
    assert first.owner.kind is OwnerKind.USER
    assert first.scopes == frozenset({Scope.AQ_READ})
    assert not first.revoked


def test_a_changed_row_is_read_anew() -> None:
    assert not connection_of_row(row()).revoked
    revoked = connection_of_row(row(CREATED))
    assert revoked.revoked
    assert revoked.revoked_at == CREATED

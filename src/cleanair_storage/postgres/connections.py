"""PostgreSQL: connections (`ConnectionStore`)."""

from __future__ import annotations

import functools
import uuid
from datetime import datetime
from typing import Any

from cleanair_core.access.accounts import Owner, OwnerKind
from cleanair_core.access.connections import Connection
from cleanair_core.access.scopes import format_scopes, parse_scopes
from cleanair_storage.postgres.database import PostgresDatabase

_COLUMNS = "id, owner_kind, owner_name, name, scopes, token_hash, created_at, revoked_at"


#: Rows made into connections lately: every request reads its connection's row, and making
#: one (its id parsed, its scopes) was a sixth of the request path's CPU on the event loop.
#: A connection is a frozen value of its row's columns alone, so an equal row may share it.
ROWS_KEPT = 4096


def connection_of_row(row: tuple[Any, ...]) -> Connection:
    """The connection `row` (its `_COLUMNS`, in order) holds."""
    return _connection_of(tuple(row[:8]))


@functools.lru_cache(maxsize=ROWS_KEPT)
def _connection_of(row: tuple[Any, ...]) -> Connection:
    return Connection(
        id=uuid.UUID(str(row[0])),
        owner=Owner(OwnerKind(str(row[1])), str(row[2])),
        name=str(row[3]),
        scopes=parse_scopes(str(row[4])),
        token_hash=str(row[5]),
        created_at=row[6],
        revoked_at=row[7],
    )


class PostgresConnections(PostgresDatabase):
    """Connections, found by their token's keyed hash."""

    def add_connection(self, connection: Connection) -> None:
        with self._conn() as conn:
            conn.execute(
                f"INSERT INTO connections ({_COLUMNS}) "  # noqa: S608
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                (
                    str(connection.id),
                    connection.owner.kind.value,
                    connection.owner.name,
                    connection.name,
                    " ".join(format_scopes(connection.scopes)),
                    connection.token_hash,
                    connection.created_at,
                    connection.revoked_at,
                ),
            )

    def connection_by_token_hash(self, token_hash: str) -> Connection | None:
        with self._statement() as conn:
            row = conn.execute(
                f"SELECT {_COLUMNS} FROM connections WHERE token_hash = %s",  # noqa: S608
                (token_hash,),
            ).fetchone()
        return None if row is None else connection_of_row(row)

    def connections_of(self, owner: Owner) -> list[Connection]:
        with self._conn() as conn:
            rows = conn.execute(
                f"SELECT {_COLUMNS} FROM connections "  # noqa: S608
                "WHERE owner_kind = %s AND owner_name = %s ORDER BY created_at, seq",
                (owner.kind.value, owner.name),
            ).fetchall()
        return [connection_of_row(row) for row in rows]

    def revoke_connection(self, connection_id: uuid.UUID, at: datetime) -> bool:
        with self._conn() as conn:
            cur = conn.execute(
                "UPDATE connections SET revoked_at = %s WHERE id = %s AND revoked_at IS NULL",
                (at, str(connection_id)),
            )
            return cur.rowcount == 1

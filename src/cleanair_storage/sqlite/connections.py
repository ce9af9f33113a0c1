"""SQLite: connections (`ConnectionStore`)."""

from __future__ import annotations

import functools
import uuid
from datetime import datetime

from cleanair_core.access.accounts import Owner, OwnerKind
from cleanair_core.access.connections import Connection
from cleanair_core.access.scopes import format_scopes, parse_scopes
from cleanair_storage.sqlite.database import SqliteDatabase, instant_or_none, timestamp

#: Rows `connection_of_row` keeps parsed: a process serves a bounded set of live tokens.
PARSED_CONNECTIONS = 1024


class SqliteConnections(SqliteDatabase):
    """Connections, found by their token's keyed hash."""

    _CONNECTION_COLUMNS = (
        "id, owner_kind, owner_name, name, scopes, token_hash, created_at, revoked_at"
    )

    @staticmethod
    def _connection(row: tuple[object, ...]) -> Connection:
        return Connection(
            id=uuid.UUID(str(row[0])),
            owner=Owner(OwnerKind(str(row[1])), str(row[2])),
            name=str(row[3]),
            scopes=parse_scopes(str(row[4])),
            token_hash=str(row[5]),
            created_at=instant_or_none(row[6]),  # type: ignore[arg-type]
            revoked_at=instant_or_none(row[7]),  # type: ignore[arg-type]
        )

    def add_connection(self, connection: Connection) -> None:
        with self._write() as conn:
            conn.execute(
                f"INSERT INTO connections ({self._CONNECTION_COLUMNS}) "  # noqa: S608
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    str(connection.id),
                    connection.owner.kind.value,
                    connection.owner.name,
                    connection.name,
                    " ".join(format_scopes(connection.scopes)),
                    connection.token_hash,
                    timestamp(connection.created_at),
                    None if connection.revoked_at is None else timestamp(connection.revoked_at),
                ),
            )

    def connection_by_token_hash(self, token_hash: str) -> Connection | None:
        row = (
            self._read()
            .execute(
                f"SELECT {self._CONNECTION_COLUMNS} FROM connections WHERE token_hash = ?",  # noqa: S608
                (token_hash,),
            )
            .fetchone()
        )
        return None if row is None else connection_of_row(row)

    def connections_of(self, owner: Owner) -> list[Connection]:
        rows = (
            self._read()
            .execute(
                f"SELECT {self._CONNECTION_COLUMNS} FROM connections "  # noqa: S608
                "WHERE owner_kind = ? AND owner_name = ? ORDER BY created_at, rowid",
                (owner.kind.value, owner.name),
            )
            .fetchall()
        )
        return [self._connection(row) for row in rows]

    def revoke_connection(self, connection_id: uuid.UUID, at: datetime) -> bool:
        with self._write() as conn:
            cur = conn.execute(
                "UPDATE connections SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL",
                (timestamp(at), str(connection_id)),
            )
            return cur.rowcount == 1


@functools.lru_cache(maxsize=PARSED_CONNECTIONS)
def connection_of_row(row: tuple[object, ...]) -> Connection:
    """The `Connection` a connections row holds, parsed once per distinct row.

    Every request's admission reads its token's row, which changes only when the connection
    is revoked; parsing it (a UUID, the owner, the scopes, two instants) was about a sixth of
    the admission's cost. The key is the whole row, so a changed row (revoked) is parsed
    anew, and a `Connection` is frozen, so callers may share one."""
    return SqliteConnections._connection(row)

"""Schema migrations of the PostgreSQL store: applied at start, once, under an advisory lock.

Every process that opens the store calls `migrate`. In one transaction it takes a
transaction-level advisory lock (so ten processes starting together apply each migration
once: the others wait, then find it recorded), creates the `schema_migrations` table if
needed, refuses a database whose schema is newer than this code knows (an older release
started against an upgraded database: the error says so, and nothing is changed), and
applies the missing migrations in order, recording each. A failing migration rolls the
whole transaction back: PostgreSQL's DDL is transactional, so a database is never left
half-migrated. A step is a statement, or a function given the connection (a back-fill that
needs the code's own computation).

Migrations are append-only: a released one is never edited; a change is a new one.
"""

from __future__ import annotations

import psycopg

from cleanair_storage.errors import UPGRADE_ADVICE, SchemaTooNew
from cleanair_storage.postgres.schema import MIGRATIONS

__all__ = ["MIGRATION_LOCK", "SchemaTooNew", "latest_version", "migrate"]

#: The advisory lock key of migrations: any 64-bit number unique to this purpose ("cleanair").
MIGRATION_LOCK = 0x636C65616E616972


def latest_version() -> int:
    """The newest schema version this code knows."""
    return max(version for version, _, _ in MIGRATIONS)


def migrate(conn: psycopg.Connection[tuple[object, ...]]) -> list[int]:
    """Bring the database to `latest_version()`; the versions this call applied (none when
    another process got there first). Raises SchemaTooNew without changing anything."""
    applied_now: list[int] = []
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " version INTEGER PRIMARY KEY,"
            " name TEXT NOT NULL,"
            " applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
        )
        applied = {
            int(str(row[0])) for row in conn.execute("SELECT version FROM schema_migrations")
        }
        newest = max(applied, default=0)
        if newest > latest_version():
            raise SchemaTooNew(
                f"the database's schema is at version {newest}, newer than this cleanair "
                f"knows ({latest_version()}): {UPGRADE_ADVICE}"
            )
        for version, name, steps in MIGRATIONS:
            if version in applied:
                continue
            for step in steps:
                if callable(step):
                    step(conn)
                else:
                    conn.execute(step)
            conn.execute(
                "INSERT INTO schema_migrations (version, name) VALUES (%s, %s)", (version, name)
            )
            applied_now.append(version)
    return applied_now

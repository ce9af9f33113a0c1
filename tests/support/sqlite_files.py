"""SQLite files in the states the tests need."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from cleanair_storage.sqlite import SqliteStore


def migrated_by_a_newer_release(path: Path) -> None:
    """Make `path` a database that records a migration this code does not know."""
    SqliteStore(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute(
            "INSERT INTO _sqlite_migrations (migration_set, name, applied_at) "
            "VALUES ('cleanair', 'm999_from_the_future', '2099-01-01')"
        )
    conn.close()

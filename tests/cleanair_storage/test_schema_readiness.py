"""A database whose schema is not the one this code migrates to is told apart (the readiness
probe's question): migrated by a newer release since the process opened it, or emptied.
The memory store has no stored schema; the contract suite checks that an opened store of
every adapter is current."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest

from cleanair_core.ports import Store
from cleanair_storage.postgres import PostgresStore
from cleanair_storage.sqlite import SqliteStore

#: Runs one SQL statement on the store's database from another connection (another process).
Execute = Callable[[str], None]


@pytest.fixture(params=["sqlite", "postgres"])
def opened(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Store, Execute]]:
    store: Store
    if request.param == "sqlite":
        path = tmp_path / "cleanair.db"
        store = SqliteStore(path)

        def execute(sql: str) -> None:
            with sqlite3.connect(path) as conn:
                conn.execute(sql)
            conn.close()

    else:
        url: str = request.getfixturevalue("postgres_url")
        store = PostgresStore(url)

        def execute(sql: str) -> None:
            with psycopg.connect(url) as conn:
                conn.execute(sql.encode())

    try:
        yield store, execute
    finally:
        store.close()


NEWER = {
    "sqlite": "INSERT INTO _sqlite_migrations (migration_set, name, applied_at) "
    "VALUES ('cleanair', 'm999_a_newer_release', '2030-01-01')",
    "postgres": "INSERT INTO schema_migrations (version, name) VALUES (999, 'a newer release')",
}
EMPTIED = {
    "sqlite": "DROP TABLE _sqlite_migrations",
    "postgres": "DROP TABLE schema_migrations",
}


@pytest.mark.parametrize("change", [NEWER, EMPTIED], ids=["newer", "emptied"])
def test_a_schema_changed_under_the_store_is_not_current(
    opened: tuple[Store, Execute], change: dict[str, str]
) -> None:
    store, execute = opened
    assert store.schema_is_current() is True
    execute(change["sqlite" if isinstance(store, SqliteStore) else "postgres"])
    assert store.schema_is_current() is False

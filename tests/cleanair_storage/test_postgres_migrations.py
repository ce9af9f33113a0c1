"""PostgreSQL schema migrations: applied once under an advisory lock, refused when newer."""

from __future__ import annotations

import threading

import psycopg
import pytest

from cleanair_storage.postgres.migrations import SchemaTooNew, latest_version, migrate
from cleanair_storage.postgres.schema import MIGRATIONS


def tables(url: str) -> set[str]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
        ).fetchall()
    return {str(row[0]) for row in rows}


def test_a_fresh_database_gets_every_migration_recorded(postgres_url: str) -> None:
    with psycopg.connect(postgres_url) as conn:
        assert migrate(conn) == [version for version, _, _ in MIGRATIONS]
        recorded = conn.execute("SELECT version, name FROM schema_migrations").fetchall()
    assert [(v, n) for v, n, _ in MIGRATIONS] == [(int(v), str(n)) for v, n in recorded]
    assert {"users", "connections", "ledger", "credit_windows", "plans"} <= tables(postgres_url)


def test_migrating_again_changes_nothing(postgres_url: str) -> None:
    with psycopg.connect(postgres_url) as conn:
        migrate(conn)
        assert migrate(conn) == []


def test_ten_processes_starting_together_apply_each_migration_once(postgres_url: str) -> None:
    start = threading.Barrier(10)
    applied: list[list[int]] = []
    errors: list[BaseException] = []

    def open_store() -> None:
        try:
            with psycopg.connect(postgres_url) as conn:
                start.wait(timeout=30)
                applied.append(migrate(conn))
        except BaseException as exc:  # reported below: a thread's failure must fail the test
            errors.append(exc)

    threads = [threading.Thread(target=open_store) for _ in range(10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    assert sorted(map(len, applied)) == [0] * 9 + [len(MIGRATIONS)]
    with psycopg.connect(postgres_url) as conn:
        count = conn.execute("SELECT count(*) FROM schema_migrations").fetchone()
    assert count is not None
    assert count[0] == len(MIGRATIONS)


def test_a_database_newer_than_the_code_is_refused_and_left_alone(postgres_url: str) -> None:
    with psycopg.connect(postgres_url) as conn:
        migrate(conn)
        conn.execute(
            "INSERT INTO schema_migrations (version, name) VALUES (%s, 'from the future')",
            (latest_version() + 1,),
        )
        conn.commit()
        with pytest.raises(SchemaTooNew, match=r"newer than this cleanair knows"):
            migrate(conn)
        count = conn.execute("SELECT count(*) FROM schema_migrations").fetchone()
    assert count is not None
    assert count[0] == len(MIGRATIONS) + 1


def test_a_failing_migration_leaves_nothing_half_done(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = (
        *MIGRATIONS,
        (latest_version() + 1, "broken", ("CREATE TABLE extra (x INTEGER)", "SELECT nonsense(")),
    )
    monkeypatch.setattr("cleanair_storage.postgres.migrations.MIGRATIONS", broken)
    with psycopg.connect(postgres_url) as conn, pytest.raises(psycopg.errors.SyntaxError):
        migrate(conn)
    assert tables(postgres_url) == set()  # the whole run rolled back, the first migration too

"""Upgrading a database stored before `Plan.claims`: each plan's claims start at its attempts
(so claims >= attempts holds for every plan), and the next claim counts on from there."""

from __future__ import annotations

import sqlite3
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest
from sqlite_utils import Database

from cleanair_core.ports import Store
from cleanair_storage.migrations import sqlite_utils_migrations
from cleanair_storage.postgres import PostgresStore
from cleanair_storage.postgres.migrations import migrate
from cleanair_storage.postgres.schema import MIGRATIONS
from cleanair_storage.sqlite import SqliteStore

T0 = datetime(2026, 3, 10, 9, 30, tzinfo=UTC)
LEASE = timedelta(minutes=2)
PLAN_ID = uuid.UUID("00000000-0000-4000-8000-000000000007")
#: A pending plan tried twice before the upgrade, its last lease long over.
ROW = (str(PLAN_ID), "alice", "conn-1", 60.17, 24.94, 60.16, 24.93, "walking", "pending", 2)
INSERT = (
    "INSERT INTO plans (id, owner, connection_id, start_lat, start_lon, end_lat, end_lon, "
    "activity, status, attempts, start_time, created_at, lease_until) "
    "VALUES ({0}, {0}, {0}, {0}, {0}, {0}, {0}, {0}, {0}, {0}, {0}, {0}, {0})"
)


def assert_counts_on(store: Store) -> None:
    plan = store.get_plan(PLAN_ID)
    assert plan is not None
    assert (plan.attempts, plan.claims) == (2, 2)
    claimed = store.claim_plan(T0 + LEASE, LEASE)
    assert claimed is not None
    assert (claimed.attempts, claimed.claims) == (3, 3)
    assert store.release_plan(PLAN_ID, 2) is False  # the claim before the upgrade is over
    assert store.release_plan(PLAN_ID, 3) is True


def test_sqlite_plans_from_before_claims_start_at_their_attempts(tmp_path: Path) -> None:
    path = tmp_path / "older.db"
    with sqlite3.connect(path) as conn:
        sqlite_utils_migrations().apply(Database(conn), stop_before="m007_plan_claims")
        at = T0.timestamp()
        conn.execute(INSERT.format("?"), (*ROW, at, at, at))
    conn.close()
    store = SqliteStore(path)
    try:
        assert_counts_on(store)
    finally:
        store.close()


def test_postgres_plans_from_before_claims_start_at_their_attempts(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with monkeypatch.context() as before:
        before.setattr("cleanair_storage.postgres.migrations.MIGRATIONS", MIGRATIONS[:1])
        with psycopg.connect(postgres_url) as conn:
            assert migrate(conn) == [1]
            conn.execute(INSERT.format("%s"), (*ROW, T0, T0, T0))
    store = PostgresStore(postgres_url)
    try:
        assert_counts_on(store)
    finally:
        store.close()

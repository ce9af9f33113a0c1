"""SQLite: rate-limit counters (`RateLimitStore`)."""

from __future__ import annotations

import sqlite3

from cleanair_storage.sqlite.database import SqliteDatabase


def count_hit(conn: sqlite3.Connection, key: str, window_start: int, window_seconds: int) -> int:
    """Count one hit on `key` (see `RateLimitStore.hit`) and return the window's count: one
    statement, atomic on its own or inside the caller's transaction."""
    row = conn.execute(
        "INSERT INTO rate_limits (key, window_start, count) VALUES (:key, :start, 1) "
        "ON CONFLICT (key) DO UPDATE SET "
        # See RateLimitStore.hit; every SET reads the row as it was.
        "count = CASE WHEN excluded.window_start > window_start "
        "OR excluded.window_start < window_start - :span THEN 1 ELSE count + 1 END, "
        "window_start = CASE WHEN excluded.window_start > window_start "
        "OR excluded.window_start < window_start - :span "
        "THEN excluded.window_start ELSE window_start END "
        "RETURNING count",
        {"key": key, "start": window_start, "span": window_seconds},
    ).fetchone()
    return int(row[0])


class SqliteRateLimits(SqliteDatabase):
    """Rate-limit counters: one atomic upsert per hit."""

    def hit(self, key: str, window_start: int, window_seconds: int = 60) -> int:
        # One statement, so atomic without an explicit transaction; the lock keeps this
        # process's writer connection to one statement at a time.
        with self._autocommit() as conn:
            return count_hit(conn, key, window_start, window_seconds)

"""SQLite: rate-limit counters (`RateLimitStore`)."""

from __future__ import annotations

import sqlite3

from cleanair_storage.sqlite.database import SqliteDatabase

#: Count one hit on key `?1` in the window starting `?2`, `?3` seconds long (see
#: `RateLimitStore.hit`): every SET reads the row as it was. Callers add the RETURNING clause
#: (the ledger's charge reads its pool's windows in the same statement).
HIT_UPSERT = (
    "INSERT INTO rate_limits (key, window_start, count) VALUES (?1, ?2, 1) "
    "ON CONFLICT (key) DO UPDATE SET "
    "count = CASE WHEN excluded.window_start > window_start "
    "OR excluded.window_start < window_start - ?3 THEN 1 ELSE count + 1 END, "
    "window_start = CASE WHEN excluded.window_start > window_start "
    "OR excluded.window_start < window_start - ?3 "
    "THEN excluded.window_start ELSE window_start END "
)
_COUNT_HIT = HIT_UPSERT + "RETURNING count"


def count_hit(conn: sqlite3.Connection, key: str, window_start: int, window_seconds: int) -> int:
    """Count one hit on `key` (see `RateLimitStore.hit`) and return the window's count: one
    statement, atomic on its own or inside the caller's transaction."""
    row = conn.execute(_COUNT_HIT, (key, window_start, window_seconds)).fetchone()
    return int(row[0])


class SqliteRateLimits(SqliteDatabase):
    """Rate-limit counters: one atomic upsert per hit."""

    def hit(self, key: str, window_start: int, window_seconds: int = 60) -> int:
        # One statement, so atomic without an explicit transaction; the lock keeps this
        # process's writer connection to one statement at a time.
        with self._autocommit() as conn:
            return count_hit(conn, key, window_start, window_seconds)

"""SQLite: rate-limit counters (`RateLimitStore`)."""

from __future__ import annotations

from cleanair_storage.sqlite.database import SqliteDatabase


class SqliteRateLimits(SqliteDatabase):
    """Rate-limit counters: one atomic upsert per hit."""

    def hit(self, key: str, window_start: int) -> int:
        # One statement, so atomic without an explicit transaction; the lock keeps this
        # process's writer connection to one statement at a time.
        with self._autocommit() as conn:
            row = conn.execute(
                "INSERT INTO rate_limits (key, window_start, count) VALUES (?, ?, 1) "
                "ON CONFLICT (key) DO UPDATE SET "
                "count = CASE WHEN excluded.window_start > window_start THEN 1 "
                "ELSE count + 1 END, "
                "window_start = max(window_start, excluded.window_start) "
                "RETURNING count",
                (key, window_start),
            ).fetchone()
            return int(row[0])

"""PostgreSQL: rate-limit counters (`RateLimitStore`)."""

from __future__ import annotations

from cleanair_storage.postgres.database import PostgresDatabase


class PostgresRateLimits(PostgresDatabase):
    """Rate-limit counters: one atomic upsert per hit (the conflicting row is locked)."""

    def hit(self, key: str, window_start: int) -> int:
        with self._statement() as conn:
            row = conn.execute(
                "INSERT INTO rate_limits (key, window_start, count) VALUES (%s, %s, 1) "
                "ON CONFLICT (key) DO UPDATE SET count = CASE "
                "WHEN rate_limits.window_start = EXCLUDED.window_start "
                "THEN rate_limits.count + 1 ELSE 1 END, "
                "window_start = EXCLUDED.window_start RETURNING count",
                (key, window_start),
            ).fetchone()
        assert row is not None  # RETURNING of an upsert always answers
        return int(row[0])

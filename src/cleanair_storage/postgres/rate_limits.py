"""PostgreSQL: rate-limit counters (`RateLimitStore`)."""

from __future__ import annotations

from cleanair_storage.postgres.database import PostgresDatabase


class PostgresRateLimits(PostgresDatabase):
    """Rate-limit counters: one atomic upsert per hit (the conflicting row is locked). A hit
    from an older window (a host whose clock is behind) counts in the stored one: only a
    newer window starts again, so hosts a few seconds apart cannot reset each other."""

    def hit(self, key: str, window_start: int) -> int:
        with self._statement() as conn:
            row = conn.execute(
                "INSERT INTO rate_limits (key, window_start, count) VALUES (%s, %s, 1) "
                "ON CONFLICT (key) DO UPDATE SET count = CASE "
                "WHEN EXCLUDED.window_start > rate_limits.window_start THEN 1 "
                "ELSE rate_limits.count + 1 END, "
                "window_start = GREATEST(rate_limits.window_start, EXCLUDED.window_start) "
                "RETURNING count",
                (key, window_start),
            ).fetchone()
        assert row is not None  # RETURNING of an upsert always answers
        return int(row[0])

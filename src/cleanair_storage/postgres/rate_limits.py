"""PostgreSQL: rate-limit counters (`RateLimitStore`)."""

from __future__ import annotations

from cleanair_storage.postgres.database import PostgresDatabase

#: A hit: one atomic upsert, answering the window's count (parameters: key, start, span).
HIT = (
    "INSERT INTO rate_limits (key, window_start, count) VALUES (%(key)s, %(start)s, 1) "
    "ON CONFLICT (key) DO UPDATE SET count = CASE "
    "WHEN EXCLUDED.window_start > rate_limits.window_start "
    "OR EXCLUDED.window_start < rate_limits.window_start - %(span)s THEN 1 "
    "ELSE rate_limits.count + 1 END, "
    "window_start = CASE WHEN EXCLUDED.window_start > rate_limits.window_start "
    "OR EXCLUDED.window_start < rate_limits.window_start - %(span)s "
    "THEN EXCLUDED.window_start ELSE rate_limits.window_start END "
    "RETURNING count"
)


class PostgresRateLimits(PostgresDatabase):
    """Rate-limit counters: one atomic upsert per hit (the conflicting row is locked). A hit
    up to one window older (a host whose clock is behind) counts in the stored one, so hosts a
    few seconds apart cannot reset each other (see `RateLimitStore.hit`)."""

    def hit(self, key: str, window_start: int, window_seconds: int = 60) -> int:
        with self._statement() as conn:
            row = conn.execute(
                HIT, {"key": key, "start": window_start, "span": window_seconds}
            ).fetchone()
        assert row is not None  # RETURNING of an upsert always answers
        return int(row[0])

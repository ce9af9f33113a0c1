"""SQLite: a request's one read before it runs (`AdmissionStore`)."""

from __future__ import annotations

from datetime import datetime

from cleanair_core.credits.ledger import (
    Usage,
    day_grant_window,
    day_key,
    grant_window,
    month_key,
    windows_at,
)
from cleanair_core.ports import AdmissionRead
from cleanair_storage.sqlite.connections import SqliteConnections, connection_of_row

#: One statement, so one snapshot: the connection, its owner's standing, its rate-limit
#: counter and its pool's four window counters.
_ADMISSION = (
    "SELECT c.id, c.owner_kind, c.owner_name, c.name, c.scopes, c.token_hash, c.created_at, "
    "c.revoked_at, "
    "CASE c.owner_kind WHEN 'user' THEN (SELECT premium FROM users WHERE name = c.owner_name) "
    "ELSE (SELECT active FROM partners WHERE name = c.owner_name) END, "
    "r.window_start, r.count, "
    "(SELECT used FROM credit_windows w "
    "WHERE w.pool = c.owner_kind || ':' || c.owner_name AND w.\"window\" = :mw), "
    "(SELECT used FROM credit_windows w "
    "WHERE w.pool = c.owner_kind || ':' || c.owner_name AND w.\"window\" = :dw), "
    "(SELECT used FROM credit_windows w "
    "WHERE w.pool = c.owner_kind || ':' || c.owner_name AND w.\"window\" = :gw), "
    "(SELECT used FROM credit_windows w "
    "WHERE w.pool = c.owner_kind || ':' || c.owner_name AND w.\"window\" = :gdw) "
    "FROM connections c LEFT JOIN rate_limits r ON r.key = :rule || ':' || c.id "
    "WHERE c.token_hash = :hash"
)


class SqliteAdmission(SqliteConnections):
    """The token's connection and what its request is checked against, in one statement
    (on the writer connection when it is idle: `SqliteDatabase._read_rows`)."""

    def admission(self, token_hash: str, rate_limit: str, at: datetime) -> AdmissionRead:
        month, day = windows_at(at)
        rows = self._read_rows(
            _ADMISSION,
            {
                "hash": token_hash,
                "rule": rate_limit,
                "mw": month,
                "dw": day,
                "gw": grant_window(month_key(at)),
                "gdw": day_grant_window(day_key(at)),
            },
        )
        row = rows[0] if rows else None
        if row is None:
            return AdmissionRead(None)
        standing, start, count, month_used, day_used, granted, day_granted = row[8:]
        return AdmissionRead(
            connection_of_row(row[:8]),
            None if standing is None else bool(standing),
            None if start is None else (int(start), int(count)),
            Usage(month_used or 0, day_used or 0, granted or 0, day_granted or 0),
        )

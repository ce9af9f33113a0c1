"""PostgreSQL: a request's one read before it runs (`AdmissionStore`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from cleanair_core.credits.ledger import (
    Usage,
    day_grant_window,
    day_key,
    grant_window,
    month_key,
    windows_at,
)
from cleanair_core.ports import AdmissionRead
from cleanair_storage.postgres.connections import PostgresConnections, connection_of_row

#: One statement, so one round trip and one snapshot: the connection, its owner's standing,
#: its rate-limit counter and its pool's four window counters.
ADMISSION = (
    "SELECT c.id, c.owner_kind, c.owner_name, c.name, c.scopes, c.token_hash, c.created_at, "
    "c.revoked_at, "
    "CASE c.owner_kind WHEN 'user' THEN (SELECT premium FROM users WHERE name = c.owner_name) "
    "ELSE (SELECT active FROM partners WHERE name = c.owner_name) END, "
    "r.window_start, r.count, "
    "(SELECT used FROM credit_windows w "
    "WHERE w.pool = c.owner_kind || ':' || c.owner_name AND w.\"window\" = %(mw)s), "
    "(SELECT used FROM credit_windows w "
    "WHERE w.pool = c.owner_kind || ':' || c.owner_name AND w.\"window\" = %(dw)s), "
    "(SELECT used FROM credit_windows w "
    "WHERE w.pool = c.owner_kind || ':' || c.owner_name AND w.\"window\" = %(gw)s), "
    "(SELECT used FROM credit_windows w "
    "WHERE w.pool = c.owner_kind || ':' || c.owner_name AND w.\"window\" = %(gdw)s) "
    "FROM connections c LEFT JOIN rate_limits r ON r.key = %(rule)s || ':' || c.id "
    "WHERE c.token_hash = %(hash)s"
)


def admission_params(token_hash: str, rate_limit: str, at: datetime) -> dict[str, str]:
    """`ADMISSION`'s parameters."""
    month, day = windows_at(at)
    return {
        "hash": token_hash,
        "rule": rate_limit,
        "mw": month,
        "dw": day,
        "gw": grant_window(month_key(at)),
        "gdw": day_grant_window(day_key(at)),
    }


def admission_of_row(row: tuple[Any, ...] | None) -> AdmissionRead:
    """What `ADMISSION`'s row (None: no connection has the token) says."""
    if row is None:
        return AdmissionRead(None)
    standing, start, count, month_used, day_used, granted, day_granted = row[8:]
    return AdmissionRead(
        connection_of_row(row[:8]),
        standing,
        None if start is None else (int(start), int(count)),
        Usage(month_used or 0, day_used or 0, granted or 0, day_granted or 0),
    )


class PostgresAdmission(PostgresConnections):
    """The token's connection and what its request is checked against, in one statement."""

    def admission(self, token_hash: str, rate_limit: str, at: datetime) -> AdmissionRead:
        with self._statement() as conn:
            row = conn.execute(ADMISSION, admission_params(token_hash, rate_limit, at)).fetchone()
        return admission_of_row(row)

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
from cleanair_storage.postgres.arrays import array_literal
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


#: `ADMISSION` for a batch of requests, in one statement and one snapshot: each found token's
#: row with its place in the batch (`n`, from 1) first; a token no connection holds has none.
ADMISSIONS = (
    "SELECT t.n, c.id, c.owner_kind, c.owner_name, c.name, c.scopes, c.token_hash, "
    "c.created_at, c.revoked_at, "
    "CASE c.owner_kind WHEN 'user' THEN (SELECT premium FROM users WHERE name = c.owner_name) "
    "ELSE (SELECT active FROM partners WHERE name = c.owner_name) END, "
    "r.window_start, r.count, "
    "(SELECT used FROM credit_windows w "
    "WHERE w.pool = c.owner_kind || ':' || c.owner_name AND w.\"window\" = t.mw), "
    "(SELECT used FROM credit_windows w "
    "WHERE w.pool = c.owner_kind || ':' || c.owner_name AND w.\"window\" = t.dw), "
    "(SELECT used FROM credit_windows w "
    "WHERE w.pool = c.owner_kind || ':' || c.owner_name AND w.\"window\" = t.gw), "
    "(SELECT used FROM credit_windows w "
    "WHERE w.pool = c.owner_kind || ':' || c.owner_name AND w.\"window\" = t.gdw) "
    "FROM unnest(%(hash)s::text[], %(rule)s::text[], %(mw)s::text[], %(dw)s::text[], "
    "%(gw)s::text[], %(gdw)s::text[]) WITH ORDINALITY AS t(hash, rule, mw, dw, gw, gdw, n) "
    "JOIN connections c ON c.token_hash = t.hash "
    "LEFT JOIN rate_limits r ON r.key = t.rule || ':' || c.id"
)


def admissions_params(asked: list[dict[str, str]]) -> dict[str, str]:
    """`ADMISSIONS`' parameters for requests each asking what `admission_params` gives: a
    column each, as an array literal (`array_literal`: far less CPU than a list)."""
    return {
        name: array_literal([one[name] for one in asked])
        for name in ("hash", "rule", "mw", "dw", "gw", "gdw")
    }


def admissions_of_rows(count: int, rows: list[tuple[Any, ...]]) -> list[AdmissionRead]:
    """What `ADMISSIONS`' rows say of each of a batch's `count` requests, in order."""
    found = {int(row[0]): row[1:] for row in rows}
    return [admission_of_row(found.get(n)) for n in range(1, count + 1)]


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

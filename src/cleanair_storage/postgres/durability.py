"""Whether the PostgreSQL server syncs each commit to disk before it says it committed.

The service never changes how the server syncs: its sessions keep the server's, role's and
database's settings. With PostgreSQL's defaults (`fsync=on`, `synchronous_commit=on`) a
COMMIT returns only once its WAL is flushed, so every answered write survives a power cut of
the database's machine. An operator may trade that away for speed; each process that serves
or plans then says so in its log as it starts (`warn_unless_durable`; the operator's CLI
commands do not), and goes on (docs/deployment.md, "Durability").
"""

from __future__ import annotations

import logging
from typing import Any

import psycopg

from cleanair_storage.postgres.database import with_connection_options

log = logging.getLogger("cleanair.storage.postgres")

#: What each setting's weak value costs, for the warning.
_LOSSES = {
    "fsync": "fsync is off: a crash or power cut of the database's machine can lose answered "
    "writes, or corrupt the database",
    "synchronous_commit": "synchronous_commit is off: a crash or power cut of the database's "
    "machine can lose the answered writes of its last moments (up to three times "
    "wal_writer_delay)",
}


def weakened(conn: psycopg.Connection[Any]) -> list[str]:
    """The settings of this session that let a commit return before its WAL is on disk,
    each with what it costs; empty when every commit is synced."""
    found = []
    for name, loss in _LOSSES.items():
        row = conn.execute(f"SHOW {name}").fetchone()
        if row is not None and str(row[0]).lower() == "off":
            found.append(loss)
    return found


def warn_unless_durable(url: str) -> None:
    """Log a warning for each setting that trades durability away in the sessions the
    service opens on `url` (the server's, the database's or the role's)."""
    with psycopg.connect(with_connection_options(url)) as conn:
        losses = weakened(conn)
    for loss in losses:
        log.warning(
            "PostgreSQL %s (docs/deployment.md, Durability); the service leaves the server's "
            "settings as they are",
            loss,
        )

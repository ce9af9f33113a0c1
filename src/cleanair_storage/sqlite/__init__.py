"""SQLite adapter for every storage port, safe across threads and processes on one file.

- WAL journal, so readers never wait for the writer; `synchronous=FULL` (`SYNCHRONOUS`), so
  a committed transaction survives a power cut or a kernel crash: COMMIT returns only once
  the WAL holding it is synced to disk (one sync covers a whole group commit). `normal`
  trades that away (docs/deployment.md, "Durability"): the transaction is in the WAL before
  COMMIT returns, so it survives the process being killed, but not the machine losing power.
- One writer connection per process behind a lock; every read-then-write runs inside
  `BEGIN IMMEDIATE`, which takes the database write lock up front, so two processes cannot
  both read the same balance and both spend it. A busy timeout waits for the other process.
- Readers use one connection per thread.

`database` holds the connections, migrations and checkpoints; each port has its own module
over it, and `store.SqliteStore` puts them together.
"""

from cleanair_storage.sqlite.database import (
    BUSY_TIMEOUT_MS,
    CHECKPOINT_THREAD,
    JOURNAL_SIZE_LIMIT,
    LOOKUP_CHUNK,
    SYNCHRONOUS,
    SYNCHRONOUS_MODES,
    Synchronous,
)
from cleanair_storage.sqlite.store import SqliteStore

__all__ = [
    "BUSY_TIMEOUT_MS",
    "CHECKPOINT_THREAD",
    "JOURNAL_SIZE_LIMIT",
    "LOOKUP_CHUNK",
    "SYNCHRONOUS",
    "SYNCHRONOUS_MODES",
    "SqliteStore",
    "Synchronous",
]

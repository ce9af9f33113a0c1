"""PostgreSQL: the request path's store calls on the event loop (`RequestStore`).

Every charged request makes two round trips, its admission read and its share of a group
commit's settlement; through the sync ports each was also a hand-over to a worker thread and
back, which cost a request more CPU than the round trips themselves (docs/architecture.md,
"What a served score costs"). Here they are psycopg `AsyncConnection`s awaited on the loop:

- Each call is one statement in autocommit, its own transaction: one round trip, no COMMIT
  (the same statements as the sync ports': `ADMISSION`, `HIT`, `SETTLE`).
- The connections are this module's, not psycopg_pool's `AsyncConnectionPool`: that pool
  belongs to the loop it was opened in, its upkeep runs as that loop's tasks, and it must be
  closed from it; the store is opened before any loop runs, and one process may serve from
  several loops in turn (a test's clients). So each loop gets a small pool of its own on first
  use (at most `pool_size` connections, a call waiting `timeout` for one), made with the sync
  pool's connection string and settings, so one place sets them for both.
- Concurrent requests' admission reads go as one statement (`Batches`, `ADMISSIONS`), as
  their final charges do (`GroupCommit`, `SETTLE`): psycopg's asyncio waits cost about
  150 µs of CPU a call, three times a sync call's, paid once a batch.
- A connection that failed, or whose call was cancelled mid-statement, is closed, never
  reused. A call that finds the server gone is StoreUnavailable, drops the loop's idle
  connections and tells the database (in a thread: it probes the server), which then
  fails every call at once, these too, until the server answers again (`_Outage`).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from datetime import datetime
from typing import Any, LiteralString

import psycopg

from cleanair_core.credits.ledger import CreditLimits, FinalCharge, Settlement
from cleanair_core.errors import StoreUnavailable
from cleanair_core.offload import Offload
from cleanair_core.ports import AdmissionRead
from cleanair_storage.postgres.admission import (
    ADMISSION,
    ADMISSIONS,
    admission_of_row,
    admission_params,
    admissions_of_rows,
    admissions_params,
)
from cleanair_storage.postgres.batches import Batches
from cleanair_storage.postgres.database import (
    POOL_TIMEOUT_S,
    PostgresDatabase,
    _KnownDown,
    translated_errors,
)
from cleanair_storage.postgres.ledger import settle_arguments, settlements
from cleanair_storage.postgres.rate_limits import HIT
from cleanair_storage.postgres.settle import CREATE_SETTLE, SETTLE

AsyncConnection = psycopg.AsyncConnection[tuple[Any, ...]]

_IS_CLIENT_LABEL = "SELECT 1 FROM client_labels WHERE label = %s"
#: Connections per event loop, by default: a batch of admissions and one of settlements run
#: at a time, so two carry the charged requests; the rest serve other routes' rate-limit
#: hits and client labels (docs/deployment.md: connection pools).
REQUEST_POOL_SIZE = 4


def _finish(connections: list[AsyncConnection]) -> None:
    """Close `connections` without a loop: closing one is only ending its libpq session."""
    for conn in connections:
        conn.pgconn.finish()
    connections.clear()


class _LoopPool:
    """One event loop's connections: the idle ones, and the slots that bound them all."""

    def __init__(self, size: int) -> None:
        self.idle: list[AsyncConnection] = []
        self.slots = asyncio.Semaphore(size)


class PostgresRequests:
    """`RequestStore` over `database`'s server, awaited on the event loop. `fallback` runs
    what must block (telling the database it found the server gone): a worker thread."""

    def __init__(
        self,
        database: PostgresDatabase,
        fallback: Offload,
        *,
        pool_size: int = REQUEST_POOL_SIZE,
        timeout: float = POOL_TIMEOUT_S,
    ) -> None:
        self._database = database
        self._fallback = fallback
        # The sync pool's connection string and session settings (time zone, and whatever
        # else the database sets per connection), so both paths' sessions agree.
        conninfo, kwargs = database._pool.conninfo, database._pool.kwargs
        self._conninfo = conninfo if isinstance(conninfo, str) else conninfo()
        self._kwargs = dict((kwargs() if callable(kwargs) else kwargs) or {})
        self._size = pool_size
        self._timeout = timeout
        self._pools: dict[asyncio.AbstractEventLoop, _LoopPool] = {}
        self._lock = threading.Lock()
        self._closed = False
        #: Concurrent requests' admission reads, one statement a batch (`Batches`).
        self._admissions: Batches[dict[str, str], AdmissionRead] = Batches(self._admit_batch)

    async def admission(self, token_hash: str, rate_limit: str, at: datetime) -> AdmissionRead:
        return await self._admissions.call(admission_params(token_hash, rate_limit, at))

    async def _admit_batch(self, asked: Sequence[dict[str, str]]) -> list[AdmissionRead]:
        if len(asked) == 1:  # alone: the single statement, planned for one token
            rows = await self._run(ADMISSION, asked[0])
            return [admission_of_row(rows[0] if rows else None)]
        rows = await self._run(ADMISSIONS, admissions_params(list(asked)))
        return admissions_of_rows(len(asked), rows)

    async def hit(self, key: str, window_start: int, window_seconds: int = 60) -> int:
        rows = await self._run(HIT, {"key": key, "start": window_start, "span": window_seconds})
        return int(rows[0][0])

    async def is_client_label(self, label: str) -> bool:
        return bool(await self._run(_IS_CLIENT_LABEL, (label,)))

    async def settle_charges(
        self, charges: Sequence[FinalCharge], limits: CreditLimits
    ) -> list[Settlement]:
        if not charges:
            return []
        order, params = settle_arguments(charges, limits)
        rows = await self._run(SETTLE, params)
        return settlements(charges, order, rows, limits)

    def close(self) -> None:
        """Close every idle connection (those in use close when their call ends); calls
        made afterwards open none."""
        with self._lock:
            self._closed = True
            for pool in self._pools.values():
                _finish(pool.idle)
            self._pools.clear()

    async def _run(self, query: LiteralString, params: Any) -> list[tuple[Any, ...]]:
        """`query`'s rows, run in autocommit on one of this loop's connections; the driver's
        errors as the port's."""
        self._database._outage.check()  # known down: StoreUnavailable at once
        pool = self._pool()
        try:
            return await self._execute(pool, query, params)
        except _KnownDown:
            raise
        except StoreUnavailable:
            _finish(pool.idle)  # they reached the same server: check them by reconnecting
            await self._fallback(self._database._unavailable)
            raise

    async def _execute(
        self, pool: _LoopPool, query: LiteralString, params: Any
    ) -> list[tuple[Any, ...]]:
        try:
            async with asyncio.timeout(self._timeout):
                await pool.slots.acquire()
        except TimeoutError:
            raise StoreUnavailable() from None
        conn: AsyncConnection | None = None
        done = False
        try:
            with translated_errors():
                conn = pool.idle.pop() if pool.idle else await self._connect()
                cursor = await conn.execute(query, params)
                rows = await cursor.fetchall()
            done = True
            return rows
        finally:
            if conn is not None:
                if done and not self._closed:
                    pool.idle.append(conn)
                else:  # failed or cancelled mid-statement: its session's state is unknown
                    _finish([conn])
            pool.slots.release()

    async def _connect(self) -> AsyncConnection:
        if self._closed:
            raise StoreUnavailable()
        conn: AsyncConnection = await psycopg.AsyncConnection.connect(
            self._conninfo, autocommit=True, **self._kwargs
        )
        try:
            await conn.execute(CREATE_SETTLE)  # as the sync pool's `_configure`
        except BaseException:
            _finish([conn])
            raise
        return conn

    def _pool(self) -> _LoopPool:
        loop = asyncio.get_running_loop()
        found = self._pools.get(loop)
        if found is None:
            with self._lock:
                # A loop that has ended leaves its idle connections: close them now.
                for ended in [other for other in self._pools if other.is_closed()]:
                    _finish(self._pools.pop(ended).idle)
                found = self._pools[loop] = _LoopPool(self._size)
        return found

"""The PostgreSQL database every port's module works on: the connection pool, migrations,
units of work and the port-level errors.

- A psycopg_pool `ConnectionPool` (closed by `close()`); sessions run in UTC. A call that
  finds the server gone has the pool check its idle connections, so after a restart only the
  calls already under way can fail on the broken connections the pool still held, and no
  call pays for a check while all is well.
- Each store call is one transaction on a pooled connection (committed when the call
  returns, rolled back when it raises), or joins this thread's open unit of work
  (`transaction()`), so the core composes atomic steps the same way on every adapter.
- Rules that read and then write take the row or advisory locks they need (see each port's
  module); READ COMMITTED is enough with them.
- Driver errors never reach a caller: a lost server, a refused connection or a pool with no
  free connection in time is `StoreUnavailable` (nothing was written: the transaction rolled
  back); a duplicate key is `DuplicateEntry`.
- Calls block on the network, so the server runs them on worker threads (never `WouldBlock`).
- Once a call has found the server unreachable, later calls are StoreUnavailable at once
  (`_Outage`) until a connection succeeds again, tried every second: during an outage each
  call used to wait the pool's whole timeout (10 s) before its 503, and the pool's own
  reconnection, backing off while the server was down, found it back seconds late.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, ParamSpec, Self, TypeVar

import psycopg
import psycopg.errors
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg_pool import ConnectionPool, PoolTimeout

from cleanair_core.errors import DuplicateEntry, StoreUnavailable
from cleanair_storage.postgres.migrations import migrate
from cleanair_storage.postgres.schema import MIGRATIONS
from cleanair_storage.postgres.settle import CREATE_SETTLE

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")
Connection = psycopg.Connection[tuple[Any, ...]]

#: Seconds a call waits for a free pooled connection before it is StoreUnavailable.
POOL_TIMEOUT_S = 10.0
#: Pooled connections per process, by default (docs/deployment.md: pool sizing).
POOL_SIZE = 10
#: Every connection's limits on a network that stops answering without a reset (a partition):
#: connecting gives up after 10 s, TCP keepalives find an idle connection's dead peer within
#: about a minute, and data left unacknowledged for 60 s ends the connection (instead of the
#: kernel retransmitting for some 15 minutes while a call waits in its worker thread). A URL
#: that sets any of them keeps its own value.
CONNECTION_OPTIONS: dict[str, int] = {
    "connect_timeout": 10,
    "keepalives": 1,
    "keepalives_idle": 30,
    "keepalives_interval": 10,
    "keepalives_count": 3,
    "tcp_user_timeout": 60_000,
}


def with_connection_options(url: str) -> str:
    """`url` (a URL or libpq connection string) with `CONNECTION_OPTIONS` it does not set."""
    given = conninfo_to_dict(url)
    missing = {key: value for key, value in CONNECTION_OPTIONS.items() if key not in given}
    return make_conninfo(url, **missing)


FAIL_PENDING_PLAN = (
    "UPDATE plans SET status = 'failed', error = %s, finished_at = %s, lease_until = NULL"
)


def _configure(conn: Connection) -> None:
    """Every pooled connection, when it opens: the session's functions (see `settle`)."""
    conn.execute(CREATE_SETTLE)
    conn.commit()


#: Seconds between attempts to reach a server found unreachable (`_Outage`).
OUTAGE_PROBE_S = 1.0
#: Seconds (libpq's least) an attempt to reach it may take: on a partition, where nothing
#: refuses a connection, the call that found it waits this long once more.
PROBE_CONNECT_TIMEOUT_S = 2
#: Seconds the pool goes on reconnecting with its backoff (1 s, doubling) before it gives up
#: until the next call asks: its default, 5 minutes, let a delay grow to minutes and a server
#: that came back wait for it. Short, the call that follows the outage reconnects at once.
POOL_RECONNECT_S = 2.0

log = logging.getLogger("cleanair.storage.postgres")


class _KnownDown(StoreUnavailable):
    """Refused without asking the server: it was found unreachable, and is not back yet."""


class _Outage:
    """Whether the server is known unreachable: `trip` when a call could not reach it; while
    it is, `check` raises StoreUnavailable at once, and a thread tries to connect every
    `OUTAGE_PROBE_S` until it can. Each outage is logged once, and its end."""

    def __init__(self, conninfo: str, recovered: Callable[[], None]) -> None:
        self._conninfo = make_conninfo(conninfo, connect_timeout=PROBE_CONNECT_TIMEOUT_S)
        self._recovered = recovered
        self._lock = threading.Lock()
        self._down = False
        self._closed = threading.Event()

    def check(self) -> None:
        if self._down:
            raise _KnownDown()

    def trip(self) -> None:
        """A call could not reach the server (or met a connection it broke): if it cannot
        be reached now either, calls fail at once until it can."""
        if self._down or self._reachable():  # a broken connection, a full pool: not down
            return
        with self._lock:
            if self._down or self._closed.is_set():
                return
            self._down = True
        log.warning("PostgreSQL is unreachable: calls answer 503 at once until it answers")
        threading.Thread(target=self._probe, name="cleanair postgres probe", daemon=True).start()

    def close(self) -> None:
        self._closed.set()

    def _probe(self) -> None:
        while not self._closed.wait(OUTAGE_PROBE_S):
            if self._reachable():
                self._recovered()
                self._down = False
                log.warning("PostgreSQL answers again")
                return

    def _reachable(self) -> bool:
        try:
            psycopg.connect(self._conninfo).close()
        except psycopg.Error:
            return False
        return True


def _as_port_error(method: Callable[P, R]) -> Callable[P, R]:
    @functools.wraps(method)
    def translated(*args: P.args, **kwargs: P.kwargs) -> R:
        database = args[0] if args else None
        outage = getattr(database, "_outage", None)
        try:
            with translated_errors():
                if outage is not None:
                    outage.check()
                return method(*args, **kwargs)
        except _KnownDown:
            raise
        except StoreUnavailable:
            if isinstance(database, PostgresDatabase):
                database._unavailable()
            raise

    return translated


@contextmanager
def translated_errors() -> Iterator[None]:
    """Driver errors as the port's: DuplicateEntry, StoreUnavailable."""
    try:
        yield
    except psycopg.errors.UniqueViolation as exc:
        raise DuplicateEntry("an entry with this key is already stored") from exc
    except (psycopg.OperationalError, PoolTimeout) as exc:
        raise StoreUnavailable() from exc


def port_errors(cls: type[T]) -> type[T]:
    """Every public method of `cls` (inherited ones too), and opening it, raise the core's
    port errors instead of the driver's."""
    for name in dir(cls):
        member = inspect.getattr_static(cls, name)
        public = not name.startswith("_") or name == "__init__"
        if inspect.isfunction(member) and public and name not in ("close", "transaction"):
            setattr(cls, name, _as_port_error(member))
    return cls


class PostgresDatabase:
    """One PostgreSQL database: its connection pool and migrations; the base every port's
    module builds on. `url` is a libpq connection string or `postgresql://` URL."""

    def __init__(
        self, url: str, *, pool_size: int = POOL_SIZE, timeout: float = POOL_TIMEOUT_S
    ) -> None:
        self.url = url
        self._local = threading.local()
        self._pool: ConnectionPool[Connection] = ConnectionPool(
            with_connection_options(url),
            min_size=1,
            max_size=pool_size,
            timeout=timeout,
            kwargs={"options": "-c timezone=UTC"},
            configure=_configure,
            open=False,
            name="cleanair",
            reconnect_timeout=POOL_RECONNECT_S,
        )
        self._pool.open(wait=True, timeout=timeout)
        try:
            with self._pool.connection() as conn:
                migrate(conn)
        except BaseException:
            self._pool.close()
            raise
        # Set last: opening goes to the server whatever happened before (a new store).
        self._outage = _Outage(with_connection_options(url), self._check_pool)

    def schema_is_current(self) -> bool:
        """Whether the recorded migrations are exactly those this code knows."""
        with self._conn() as conn:
            row = conn.execute("SELECT to_regclass('schema_migrations') IS NOT NULL").fetchone()
            if row is None or not row[0]:  # the database was emptied or replaced since
                return False
            applied = {
                int(str(v)) for (v,) in conn.execute("SELECT version FROM schema_migrations")
            }
        return applied == {version for version, _, _ in MIGRATIONS}

    def _unavailable(self) -> None:
        """A call found the server gone: replace the pool's broken idle connections, and, if
        the server cannot be reached now either, fail calls at once until it can (`_Outage`).
        Checking every connection handed out instead would cost each call a round trip (a
        score request takes five: 0.12 to 0.2 ms), all the time, for the sake of outages."""
        self._check_pool()
        outage: _Outage | None = getattr(self, "_outage", None)  # None: still opening
        if outage is not None:
            outage.trip()

    def _check_pool(self) -> None:
        with contextlib.suppress(Exception):
            self._pool.check()

    def close(self) -> None:
        """Close every pooled connection."""
        self._outage.close()
        self._pool.close()

    @contextmanager
    def transaction(self) -> Iterator[Self]:
        """The unit of work: this store, every call on it in one transaction on one
        connection until the block ends (on this thread)."""
        if self._joined() is not None:
            yield self
            return
        self._outage.check()
        try:
            with translated_errors(), self._pool.connection() as conn:
                self._local.conn = conn
                try:
                    yield self
                finally:
                    self._local.conn = None
        except _KnownDown:
            raise
        except StoreUnavailable:
            self._unavailable()
            raise

    def _joined(self) -> Connection | None:
        conn: Connection | None = getattr(self._local, "conn", None)
        return conn

    @contextmanager
    def _statement(self) -> Iterator[Connection]:
        """A connection for one statement that is atomic on its own: this thread's unit of
        work's, or a pooled one in autocommit, where the statement is its own transaction and
        costs one round trip instead of two (no COMMIT after it). For the calls every request
        makes: the token lookup, the rate-limit hit, the debit and its confirmation."""
        joined = self._joined()
        if joined is not None:
            yield joined
            return
        with self._pool.connection() as conn:
            conn.autocommit = True
            try:
                yield conn
            finally:
                # Back to transactions for the pool's next borrower; a connection the server
                # dropped cannot be switched, and the pool discards it anyway.
                with contextlib.suppress(psycopg.Error):
                    conn.autocommit = False

    @contextmanager
    def _conn(self) -> Iterator[Connection]:
        """A connection in a transaction: this thread's unit of work's, or a pooled one whose
        transaction commits when the block ends (rolls back when it raises)."""
        joined = self._joined()
        if joined is not None:
            yield joined
            return
        with self._pool.connection() as conn:
            yield conn

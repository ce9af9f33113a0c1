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
"""

from __future__ import annotations

import contextlib
import functools
import inspect
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


def _as_port_error(method: Callable[P, R]) -> Callable[P, R]:
    @functools.wraps(method)
    def translated(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            with translated_errors():
                return method(*args, **kwargs)
        except StoreUnavailable:
            database = args[0] if args else None
            if isinstance(database, PostgresDatabase):
                database.check_connections()
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
        )
        self._pool.open(wait=True, timeout=timeout)
        try:
            with self._pool.connection() as conn:
                migrate(conn)
        except BaseException:
            self._pool.close()
            raise

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

    def check_connections(self) -> None:
        """Replace the pool's broken idle connections (after a call found the server gone).
        Checking every connection handed out instead would cost each call a round trip (a
        score request takes five: 0.12 to 0.2 ms), all the time, for the sake of outages."""
        with contextlib.suppress(Exception):
            self._pool.check()

    def close(self) -> None:
        """Close every pooled connection."""
        self._pool.close()

    @contextmanager
    def transaction(self) -> Iterator[Self]:
        """The unit of work: this store, every call on it in one transaction on one
        connection until the block ends (on this thread)."""
        if self._joined() is not None:
            yield self
            return
        with translated_errors(), self._pool.connection() as conn:
            self._local.conn = conn
            try:
                yield self
            finally:
                self._local.conn = None

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

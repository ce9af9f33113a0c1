"""The SQLite database every port's module works on: connections, migrations, checkpoints.

- WAL journal, so readers never wait for the writer; `synchronous=FULL` (`SYNCHRONOUS`), so
  a committed transaction survives a power cut or a kernel crash: COMMIT returns only once
  the WAL holding it is synced to disk (one sync covers a whole group commit). `normal`
  trades that away (docs/deployment.md, "Durability"): the transaction is in the WAL before
  COMMIT returns, so it survives the process being killed, but not the machine losing power.
- One writer connection per process behind a lock; every read-then-write runs inside
  `BEGIN IMMEDIATE`, which takes the database write lock up front, so two processes cannot
  both read the same balance and both spend it. A busy timeout waits for the other process.
- Readers use one connection per thread.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
import sqlite3
import stat
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, ParamSpec, Self, TypeVar, get_args

from cleanair_core.errors import DuplicateEntry, StoreUnavailable
from cleanair_core.offload import Offload, WouldBlock, waiting_allowed
from cleanair_storage.migrations import applied_migrations, migrate, migration_names
from cleanair_storage.sqlite.group_writes import GroupWriter, WriterUnit

BUSY_TIMEOUT_MS = 10_000
#: How far a commit is synced before COMMIT returns (SQLite's `PRAGMA synchronous`, WAL mode):
#: `full` syncs the WAL at every commit, so an answered write survives a power cut; `normal`
#: syncs it only at checkpoints, so it survives the process being killed but not the machine
#: losing power. Every connection a store opens takes the store's one setting.
Synchronous = Literal["full", "normal"]
SYNCHRONOUS_MODES: tuple[Synchronous, ...] = get_args(Synchronous)
#: The default everywhere (the service's CLEANAIR_SQLITE_SYNCHRONOUS too): power-loss durable.
SYNCHRONOUS: Synchronous = "full"
#: A unit of work that finds another connection writing tries its start again this often for
#: `BUSY_POLL_FOR` seconds, then every `BUSY_POLL_LATER`. SQLite's own busy handler sleeps 1,
#: 2, 5, 10, 15, 20, 25... ms in turn: a charged call waiting out a worker's 15 ms transaction
#: got in after 18 or 33 ms, and one behind two in a row after 53 or 78 ms (`make bench`,
#: section 19). No process has a queue to wait in, only these tries.
BUSY_POLL = 0.001
BUSY_POLL_FOR = 0.1
BUSY_POLL_LATER = 0.005
#: The WAL is cut back to this size when it restarts after a checkpoint: without a limit it
#: keeps the size of the largest transaction ever written (211 MB after a city's network).
JOURNAL_SIZE_LIMIT = 8 * 2**20
#: Seconds between the background thread's checkpoints (see SqliteStore.__init__).
CHECKPOINT_EVERY = 0.25
CHECKPOINT_THREAD = "cleanair-sqlite-checkpoints"
#: The writer checkpoints on commit only past this many WAL pages (40 MB): a backstop.
BACKSTOP_CHECKPOINT_PAGES = 10_000
#: The database and its -wal and -shm files (SQLite gives them the database's mode) hold user
#: names, plan coordinates and the ledger: readable by the service's own user only.
FILE_MODE = 0o600
#: SQLite result codes (the primary code: the low byte) meaning the database cannot be used
#: now (another writer holds it past the busy timeout, a disk fails or is full, the file went
#: away or turned read-only, memory ran out): callers get StoreUnavailable (503, nothing
#: charged) rather than an internal error.
_UNAVAILABLE = frozenset(
    {
        sqlite3.SQLITE_BUSY,
        sqlite3.SQLITE_LOCKED,
        sqlite3.SQLITE_IOERR,
        sqlite3.SQLITE_FULL,
        sqlite3.SQLITE_CANTOPEN,
        sqlite3.SQLITE_PROTOCOL,
        sqlite3.SQLITE_READONLY,
        sqlite3.SQLITE_NOMEM,
    }
)
#: SQLite's extended result codes for an insert that meets an existing key.
_DUPLICATE_KEY = frozenset({sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY, sqlite3.SQLITE_CONSTRAINT_UNIQUE})
#: The pending -> failed transition of a plan (its error, when it ended); callers add WHERE.
FAIL_PENDING_PLAN = (
    "UPDATE plans SET status = 'failed', error = ?, finished_at = ?, lease_until = NULL"
)
P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")
#: Host parameters per `IN (...)` lookup; far below SQLite's limit (999 before 3.32).
LOOKUP_CHUNK = 500


def timestamp(at: datetime) -> float:
    return at.timestamp()


def instant_or_none(ts: float | None) -> datetime | None:
    return None if ts is None else datetime.fromtimestamp(ts, UTC)


def instant(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, UTC)


def _create_private(path: Path) -> None:
    """Create the database file readable by its owner only, before SQLite creates it with
    the umask's mode; an existing one (and its -wal and -shm) loses access for users outside
    its owner and group."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, FILE_MODE))
    except FileExistsError:
        for name in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
            with contextlib.suppress(FileNotFoundError, PermissionError):
                mode = stat.S_IMODE(name.stat().st_mode)
                if mode & 0o007:
                    name.chmod(mode & ~0o007)


def _open(path: str, busy_timeout: float, synchronous: Synchronous) -> sqlite3.Connection:
    conn = sqlite3.connect(
        path, check_same_thread=False, isolation_level=None, timeout=busy_timeout
    )
    conn.execute(f"PRAGMA busy_timeout = {round(busy_timeout * 1000)}")
    # Per connection (SQLite keeps no such setting in the file): the writer's decides how its
    # commits are synced, the checkpointer's how checkpoints are; readers write nothing.
    conn.execute(f"PRAGMA synchronous = {synchronous.upper()}")
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute(f"PRAGMA journal_size_limit = {JOURNAL_SIZE_LIMIT}")
    return conn


def _enable_wal(conn: sqlite3.Connection, busy_timeout: float) -> None:
    # Switching a fresh file to WAL needs an exclusive lock, and SQLite answers "database is
    # locked" at once (without the busy handler) while another connection, e.g. a second
    # process migrating the same new file, holds a lock: retry until the busy timeout.
    deadline = time.monotonic() + busy_timeout
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode != sqlite3.SQLITE_BUSY or time.monotonic() >= deadline:
                raise
            time.sleep(0.005)


def _unavailable_as_port_error(method: Callable[P, R]) -> Callable[P, R]:
    @functools.wraps(method)
    def translated(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return method(*args, **kwargs)
        except sqlite3.IntegrityError as exc:
            if exc.sqlite_errorcode in _DUPLICATE_KEY:
                raise DuplicateEntry("an entry with this key is already stored") from exc
            raise
        except sqlite3.OperationalError as exc:
            if (exc.sqlite_errorcode & 0xFF) in _UNAVAILABLE:
                raise StoreUnavailable() from exc
            raise

    return translated


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    return (exc.sqlite_errorcode & 0xFF) in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


@contextmanager
def _translated() -> Iterator[None]:
    """`_unavailable_as_port_error` for a block (a unit of work's BEGIN and COMMIT)."""
    try:
        yield
    except sqlite3.OperationalError as exc:
        if (exc.sqlite_errorcode & 0xFF) in _UNAVAILABLE:
            raise StoreUnavailable() from exc
        raise


def port_errors(cls: type[T]) -> type[T]:
    """Every public method of `cls` (inherited ones too), and opening it, raise the core's
    StoreUnavailable where SQLite says the database cannot be used now (see `_UNAVAILABLE`),
    so no driver error reaches a caller."""
    for name in dir(cls):
        member = inspect.getattr_static(cls, name)
        public = not name.startswith("_") or name == "__init__"
        if inspect.isfunction(member) and public and name not in ("close", "transaction"):
            setattr(cls, name, _unavailable_as_port_error(member))
    return cls


class SqliteDatabase:
    """One SQLite file: its writer and reader connections, migrations and checkpoints; the
    base every port's module builds on."""

    def __init__(
        self,
        path: str | Path,
        *,
        busy_timeout: float = BUSY_TIMEOUT_MS / 1000,
        synchronous: Synchronous = SYNCHRONOUS,
    ) -> None:
        """Open (creating and migrating) the file at `path`; `synchronous` says how far each
        commit is synced (see `Synchronous`) on every connection this store opens."""
        if synchronous not in SYNCHRONOUS_MODES:
            # The value becomes part of a PRAGMA: nothing else may get that far.
            raise ValueError(f"synchronous must be one of {', '.join(SYNCHRONOUS_MODES)}")
        self.path = str(path)
        self._busy_timeout = busy_timeout
        self.synchronous: Synchronous = synchronous
        self._commits_wait_for_disk = synchronous == "full" and self.path != ":memory:"
        if self.path != ":memory:":
            _create_private(Path(self.path))
        self._writer = _open(self.path, busy_timeout, synchronous)
        self._writer_timeout_ms = round(busy_timeout * 1000)  # as _open set it
        self._write_lock = threading.Lock()
        self._local = threading.local()
        self._readers: list[tuple[threading.Thread, sqlite3.Connection]] = []
        self._readers_lock = threading.Lock()
        try:
            _enable_wal(self._writer, busy_timeout)
            self._migrate()
        except BaseException:
            self._writer.close()
            raise
        self._stop = threading.Event()
        self._group_writer = GroupWriter(
            WriterUnit(
                begin=self._begin_without_waiting,
                joined=self._joined,
                execute=self._writer.execute,
                end=self._end_unit,
                transaction=self.transaction,
            )
        )
        self._checkpointer: threading.Thread | None = None
        if self.path != ":memory:":
            # Checkpoints copy the WAL into the database and fsync it: done by the writer on
            # commit (SQLite's default every 1,000 pages) they land on whichever request
            # commits then, tripling its time. A thread does them instead; the writer's own
            # threshold stays as a backstop should the thread fall behind.
            self._writer.execute(f"PRAGMA wal_autocheckpoint = {BACKSTOP_CHECKPOINT_PAGES}")
            self._checkpointer = threading.Thread(
                target=self._checkpoint_in_background, name=CHECKPOINT_THREAD, daemon=True
            )
            self._checkpointer.start()

    def _checkpoint_in_background(self) -> None:
        conn = _open(self.path, self._busy_timeout, self.synchronous)
        try:
            while not self._stop.wait(CHECKPOINT_EVERY):
                # PASSIVE never waits for readers or writers; what it cannot copy now, it
                # copies next time.
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
        finally:
            conn.close()

    def _migrate(self) -> None:
        # Several processes may start at once: the write lock makes one of them migrate.
        # Foreign keys are off meanwhile (the pragma does nothing inside a transaction, hence
        # around it): a migration that rebuilds a table (SQLite's way to change its columns)
        # drops it under the rows that refer to it, and checks them itself before it is
        # recorded (m017).
        self._writer.execute("PRAGMA foreign_keys = OFF")
        try:
            with self._write() as conn:
                migrate(conn)
        finally:
            self._writer.execute("PRAGMA foreign_keys = ON")

    def schema_is_current(self) -> bool:
        """Whether the applied migrations are exactly those this code knows. A reader's query,
        so a write lock another process holds (a CLI import) does not make it wait."""
        applied = applied_migrations(self._read())
        # None: a file emptied or replaced since this process migrated it
        return applied is not None and set(applied) == migration_names()

    def close(self) -> None:
        """Stop the checkpoint thread and close every connection (the last connection of the
        last process checkpoints the WAL and removes it)."""
        self._group_writer.stop()
        self._stop.set()
        if self._checkpointer is not None:
            self._checkpointer.join()
        with self._readers_lock:
            for _, reader in self._readers:
                reader.close()
            self._readers.clear()
        with self._write_lock:
            self._writer.close()

    def group_writes(self) -> Offload | None:
        """Where the request path's writes go when a commit waits for the disk: queued for
        this store's writer thread, which commits whatever is queued together (one sync) and
        never runs on the event loop (`group_writes.GroupWriter`). None when a commit does
        not wait (`normal`, or a database in memory): the writes are then tried right where
        they are made, as `here_unless_blocked` does."""
        return self._group_writer.write if self._commits_wait_for_disk else None

    @contextmanager
    def transaction(self) -> Iterator[Self]:
        """The unit of work: this store, every call on it one `BEGIN IMMEDIATE` transaction
        until the block ends (on this thread; other threads wait for the write lock)."""
        with _translated(), self._write():
            yield self

    def _begin_without_waiting(self) -> bool:
        """Open a unit of work on the writer, to be ended by `_end_unit` on any thread; False,
        with nothing held, when this process's other threads or another process hold the
        write lock (the group writer then waits for it in a thread)."""
        if not self._write_lock.acquire(blocking=False):
            return False
        try:
            self._writer_waits(0)
            with _translated():
                try:
                    self._writer.execute("BEGIN IMMEDIATE")
                except sqlite3.OperationalError as exc:
                    if not _is_busy(exc):
                        raise
                    self._write_lock.release()
                    return False
        except BaseException:
            self._write_lock.release()
            raise
        return True

    @contextmanager
    def _joined(self) -> Iterator[None]:
        """Store calls on this thread join the unit of work `_begin_without_waiting` opened."""
        self._local.transaction = True
        try:
            yield
        finally:
            self._local.transaction = False

    def _end_unit(self, commit: bool) -> None:
        """COMMIT (or ROLLBACK) the unit `_begin_without_waiting` opened, from any thread (the
        write lock is a plain lock), and let the write lock go."""
        try:
            with _translated():
                try:
                    self._writer.execute("COMMIT" if commit else "ROLLBACK")
                except BaseException:
                    # A COMMIT that failed may leave the transaction open: nothing of it stays.
                    if self._writer.in_transaction:
                        with contextlib.suppress(sqlite3.Error):
                            self._writer.execute("ROLLBACK")
                    raise
        finally:
            self._write_lock.release()

    def _in_transaction(self) -> bool:
        return bool(getattr(self._local, "transaction", False))

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        if self._in_transaction():  # part of this thread's unit of work
            yield self._writer
            return
        with self._writer_held() as conn:
            self._begin(conn)
            self._local.transaction = True
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                # SQLite has often rolled back already (a full disk, an I/O error); a second
                # ROLLBACK would fail and hide the error that matters.
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            finally:
                self._local.transaction = False

    @contextmanager
    def _autocommit(self) -> Iterator[sqlite3.Connection]:
        """The writer for one statement that is atomic on its own (cheaper than BEGIN
        IMMEDIATE), or that joins this thread's open unit of work. Where waiting is allowed
        the statement is a unit of work of its own: its start waits as `_begin` does."""
        if self._in_transaction():
            yield self._writer
            return
        if waiting_allowed():
            with self._write() as conn:
                yield conn
            return
        with self._writer_held() as conn:
            try:
                yield conn
            except sqlite3.OperationalError as exc:
                if _is_busy(exc):
                    raise WouldBlock() from exc
                raise

    @contextmanager
    def _outside_transaction(self) -> Iterator[sqlite3.Connection]:
        """The writer for a statement no transaction may hold (a checkpoint). Where waiting
        is allowed it waits as SQLite's busy handler does; elsewhere a database another
        connection holds raises WouldBlock."""
        with self._writer_held() as conn:
            if waiting_allowed():
                self._writer_waits(round(self._busy_timeout * 1000))
            try:
                yield conn
            except sqlite3.OperationalError as exc:
                if not waiting_allowed() and _is_busy(exc):
                    raise WouldBlock() from exc
                raise

    @contextmanager
    def _writer_held(self) -> Iterator[sqlite3.Connection]:
        """The writer connection, held by this thread. Where waiting is not allowed (see
        `cleanair_core.offload.here_unless_blocked`) a writer busy in another thread raises
        WouldBlock at once instead."""
        if waiting_allowed():
            # Bounded like SQLite's own wait: threads queued behind a long write get a 503
            # after the busy timeout rather than one busy timeout per thread ahead of them.
            if not self._write_lock.acquire(timeout=self._busy_timeout):
                raise StoreUnavailable()
        elif self._commits_wait_for_disk or not self._write_lock.acquire(blocking=False):
            # A commit synced to disk waits for the disk (a millisecond or more): that is a
            # wait like any other, so the work goes to a thread while the event loop goes on
            # serving, and queueing the charges the next group commit syncs together.
            raise WouldBlock()
        try:
            if not waiting_allowed():
                self._writer_waits(0)  # nor does it wait for another connection
            yield self._writer
        finally:
            self._write_lock.release()

    def _writer_waits(self, milliseconds: int) -> None:
        """Set the writer's busy timeout (under the write lock). It stays as last set, so a
        run of writes of one kind (a server's requests never wait) sets it once."""
        if self._writer_timeout_ms != milliseconds:
            self._writer.execute(f"PRAGMA busy_timeout = {milliseconds}")
            self._writer_timeout_ms = milliseconds

    def _begin(self, conn: sqlite3.Connection) -> None:
        """Start a unit of work with the database's write lock. Where waiting is not allowed
        a database another connection is writing raises WouldBlock at once; elsewhere the
        start is tried again every `BUSY_POLL` (then `BUSY_POLL_LATER`) until the busy
        timeout, and the unit of work's statements keep SQLite's own busy wait."""
        self._writer_waits(0)
        if not waiting_allowed():
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as exc:
                if _is_busy(exc):
                    raise WouldBlock() from exc
                raise
            return
        started = time.monotonic()
        while True:
            try:
                conn.execute("BEGIN IMMEDIATE")
                break
            except sqlite3.OperationalError as exc:
                waited = time.monotonic() - started
                if not _is_busy(exc) or waited >= self._busy_timeout:
                    raise
            time.sleep(BUSY_POLL if waited < BUSY_POLL_FOR else BUSY_POLL_LATER)
        # In WAL mode a unit of work holding the write lock is not kept waiting, short of a
        # recovery after a crash: that one waits as SQLite's busy handler does.
        self._writer_waits(round(self._busy_timeout * 1000))

    def _read_rows(self, sql: str, parameters: dict[str, object]) -> list[Any]:
        """The rows of one read, on the writer connection when it is idle, else on this
        thread's reader; either way committed rows only.

        In WAL mode a connection drops its whole page cache whenever it starts a read after
        another connection committed, and every charged request commits: a reader re-read
        each page of every read (about 1.4 pread a score, the admission read 75 µs against
        40 µs with its pages cached). The writer made those commits itself, so its cache
        stays. It is idle when the write lock is free here and it holds no transaction: a
        group batch holds the lock from its BEGIN until its COMMIT returned, so nothing
        uncommitted is ever read. SQLite busy on the writer (its busy timeout may be 0):
        read on the reader instead, which waits as it always did."""
        if not self._in_transaction() and self._write_lock.acquire(blocking=False):
            try:
                if not self._writer.in_transaction:
                    # fetchall: the statement runs to its end and is reset, so no read
                    # transaction stays open on the writer.
                    return self._writer.execute(sql, parameters).fetchall()
            except sqlite3.OperationalError as exc:
                if not _is_busy(exc):
                    raise
            finally:
                self._write_lock.release()
        return self._read().execute(sql, parameters).fetchall()

    def _read(self) -> sqlite3.Connection:
        if self._in_transaction():  # a unit of work reads what it has written
            return self._writer
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = _open(self.path, self._busy_timeout, self.synchronous)
            conn.execute("PRAGMA query_only = ON")
            self._local.conn = conn
            with self._readers_lock:
                # Worker threads come and go (anyio retires idle ones): close the readers
                # of threads that have ended, or every retired thread would keep a file open.
                live = [(t, c) for t, c in self._readers if t.is_alive()]
                for _, ended in set(self._readers) - set(live):
                    ended.close()
                self._readers = [*live, (threading.current_thread(), conn)]
        return conn

"""SQLite adapter for every storage port, safe across threads and processes on one file.

- WAL journal, so readers never wait for the writer; `synchronous=NORMAL`, so a committed
  transaction survives the process being killed (it is in the WAL before COMMIT returns).
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
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import attrs
import numpy as np
from sqlite_utils import Database

from cleanair_core.access.accounts import Owner, OwnerKind, Partner, User
from cleanair_core.access.connections import Connection
from cleanair_core.access.pairing import (
    GUESS_WINDOW,
    GuessLog,
    PairingCode,
    check_guess,
    guess_time,
)
from cleanair_core.access.scopes import format_scopes, parse_scopes
from cleanair_core.air.wifi import KnownAccessPoint, is_bssid_hash
from cleanair_core.clock import Clock
from cleanair_core.credits.ledger import (
    CreditLimits,
    Debit,
    LedgerEntry,
    Usage,
    check_fits,
    day_key,
    month_key,
)
from cleanair_core.errors import StoreUnavailable
from cleanair_core.geo import Point
from cleanair_core.routes.network import NetworkSummary, PlanActivityType, StreetNetwork
from cleanair_core.routes.plans import Plan, PlanRequest, PlanStatus, check_new_plan
from cleanair_core.routes.results import PlanResult
from cleanair_storage.migrations import migrations
from cleanair_storage.plan_results import decode_plan_result, encode_plan_result

BUSY_TIMEOUT_MS = 10_000
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
#: The pending -> failed transition of a plan (its error, when it ended); callers add WHERE.
_FAIL_PENDING_PLAN = (
    "UPDATE plans SET status = 'failed', error = ?, finished_at = ?, lease_until = NULL"
)
P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")
#: Host parameters per `IN (...)` lookup; far below SQLite's limit (999 before 3.32).
LOOKUP_CHUNK = 500


def _ts(at: datetime) -> float:
    return at.timestamp()


def _dt(ts: float | None) -> datetime | None:
    return None if ts is None else datetime.fromtimestamp(ts, UTC)


def _at(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, UTC)


#: Each StreetNetwork array and its element type; stored as raw little-endian bytes, so a
#: database file reads the same on any machine.
_NETWORK_ARRAYS: tuple[tuple[str, type[np.generic]], ...] = (
    ("node_lat", np.float64),
    ("node_lon", np.float64),
    ("edge_from", np.int32),
    ("edge_to", np.int32),
    ("edge_length", np.float64),
    ("edge_class", np.uint8),
    ("edge_access", np.uint8),
)


def _array_bytes(name: str, array: np.ndarray, kind: type[np.generic]) -> bytes:
    native = np.dtype(kind)
    if array.ndim != 1 or array.dtype.newbyteorder("=") != native:
        raise ValueError(
            f"{name} must be a one-dimensional {native.name} array, "
            f"not {array.dtype} of shape {array.shape}"
        )
    return array.astype(native.newbyteorder("<"), copy=False).tobytes()


def _array(blob: bytes, kind: type[np.generic]) -> np.ndarray:
    # A native, writable copy: numpy can work on it in place, and the blob can be freed.
    native = np.dtype(kind)
    return np.frombuffer(blob, dtype=native.newbyteorder("<")).astype(native)


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


def _open(path: str, busy_timeout: float) -> sqlite3.Connection:
    conn = sqlite3.connect(
        path, check_same_thread=False, isolation_level=None, timeout=busy_timeout
    )
    conn.execute(f"PRAGMA busy_timeout = {round(busy_timeout * 1000)}")
    conn.execute("PRAGMA synchronous = NORMAL")
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
        except sqlite3.OperationalError as exc:
            if (exc.sqlite_errorcode & 0xFF) in _UNAVAILABLE:
                raise StoreUnavailable() from exc
            raise

    return translated


def _port_errors(cls: type[T]) -> type[T]:
    """Every public method of `cls`, and opening it, raise the core's StoreUnavailable where
    SQLite says the database cannot be used now (see `_UNAVAILABLE`), so no driver error
    reaches a caller."""
    for name, member in list(vars(cls).items()):
        public = not name.startswith("_") or name == "__init__"
        if inspect.isfunction(member) and public and name != "close":
            setattr(cls, name, _unavailable_as_port_error(member))
    return cls


@_port_errors
class SqliteStore:
    """Implements `cleanair_core.ports.Store` over one SQLite file."""

    def __init__(self, path: str | Path, *, busy_timeout: float = BUSY_TIMEOUT_MS / 1000) -> None:
        self.path = str(path)
        self._busy_timeout = busy_timeout
        if self.path != ":memory:":
            _create_private(Path(self.path))
        self._writer = _open(self.path, busy_timeout)
        self._write_lock = threading.Lock()
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []
        self._readers_lock = threading.Lock()
        try:
            _enable_wal(self._writer, busy_timeout)
            self._migrate()
        except BaseException:
            self._writer.close()
            raise
        self._stop = threading.Event()
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
        conn = _open(self.path, self._busy_timeout)
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
        with self._write() as conn:
            migrations.apply(Database(conn))

    def close(self) -> None:
        """Stop the checkpoint thread and close every connection (the last connection of the
        last process checkpoints the WAL and removes it)."""
        self._stop.set()
        if self._checkpointer is not None:
            self._checkpointer.join()
        with self._readers_lock:
            for reader in self._readers:
                reader.close()
            self._readers.clear()
        with self._write_lock:
            self._writer.close()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with self._write_lock:
            conn = self._writer
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                # SQLite has often rolled back already (a full disk, an I/O error); a second
                # ROLLBACK would fail and hide the error that matters.
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

    def _read(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = _open(self.path, self._busy_timeout)
            conn.execute("PRAGMA query_only = ON")
            self._local.conn = conn
            with self._readers_lock:
                self._readers.append(conn)
        return conn

    # accounts -----------------------------------------------------------------------------
    def add_user(self, user: User) -> bool:
        with self._write() as conn:
            cur = conn.execute(
                "INSERT INTO users (name, premium, created_at) VALUES (?, ?, ?) "
                "ON CONFLICT (name) DO NOTHING",
                (user.name, int(user.premium), _ts(user.created_at)),
            )
            return cur.rowcount == 1

    def get_user(self, name: str) -> User | None:
        row = (
            self._read()
            .execute("SELECT name, premium, created_at FROM users WHERE name = ?", (name,))
            .fetchone()
        )
        return None if row is None else User(row[0], bool(row[1]), _dt(row[2]))  # type: ignore[arg-type]

    def set_premium(self, name: str, premium: bool) -> bool:
        with self._write() as conn:
            cur = conn.execute("UPDATE users SET premium = ? WHERE name = ?", (int(premium), name))
            return cur.rowcount == 1

    def add_partner(self, partner: Partner) -> bool:
        with self._write() as conn:
            cur = conn.execute(
                "INSERT INTO partners (name, active, created_at) VALUES (?, ?, ?) "
                "ON CONFLICT (name) DO NOTHING",
                (partner.name, int(partner.active), _ts(partner.created_at)),
            )
            return cur.rowcount == 1

    def get_partner(self, name: str) -> Partner | None:
        row = (
            self._read()
            .execute("SELECT name, active, created_at FROM partners WHERE name = ?", (name,))
            .fetchone()
        )
        return None if row is None else Partner(row[0], bool(row[1]), _dt(row[2]))  # type: ignore[arg-type]

    def set_partner_active(self, name: str, active: bool) -> bool:
        with self._write() as conn:
            cur = conn.execute("UPDATE partners SET active = ? WHERE name = ?", (int(active), name))
            return cur.rowcount == 1

    # connections --------------------------------------------------------------------------
    _CONNECTION_COLUMNS = (
        "id, owner_kind, owner_name, name, scopes, token_hash, created_at, revoked_at"
    )

    @staticmethod
    def _connection(row: tuple[object, ...]) -> Connection:
        return Connection(
            id=uuid.UUID(str(row[0])),
            owner=Owner(OwnerKind(str(row[1])), str(row[2])),
            name=str(row[3]),
            scopes=parse_scopes(str(row[4])),
            token_hash=str(row[5]),
            created_at=_dt(row[6]),  # type: ignore[arg-type]
            revoked_at=_dt(row[7]),  # type: ignore[arg-type]
        )

    def add_connection(self, connection: Connection) -> None:
        with self._write() as conn:
            conn.execute(
                f"INSERT INTO connections ({self._CONNECTION_COLUMNS}) "  # noqa: S608
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    str(connection.id),
                    connection.owner.kind.value,
                    connection.owner.name,
                    connection.name,
                    " ".join(format_scopes(connection.scopes)),
                    connection.token_hash,
                    _ts(connection.created_at),
                    None if connection.revoked_at is None else _ts(connection.revoked_at),
                ),
            )

    def connection_by_token_hash(self, token_hash: str) -> Connection | None:
        row = (
            self._read()
            .execute(
                f"SELECT {self._CONNECTION_COLUMNS} FROM connections WHERE token_hash = ?",  # noqa: S608
                (token_hash,),
            )
            .fetchone()
        )
        return None if row is None else self._connection(row)

    def connections_of(self, owner: Owner) -> list[Connection]:
        rows = (
            self._read()
            .execute(
                f"SELECT {self._CONNECTION_COLUMNS} FROM connections "  # noqa: S608
                "WHERE owner_kind = ? AND owner_name = ? ORDER BY created_at, rowid",
                (owner.kind.value, owner.name),
            )
            .fetchall()
        )
        return [self._connection(row) for row in rows]

    def revoke_connection(self, connection_id: uuid.UUID, at: datetime) -> bool:
        with self._write() as conn:
            cur = conn.execute(
                "UPDATE connections SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL",
                (_ts(at), str(connection_id)),
            )
            return cur.rowcount == 1

    # pairing codes ------------------------------------------------------------------------
    def add_pairing_code(self, code: PairingCode, now: datetime) -> bool:
        with self._write() as conn:
            conn.execute("DELETE FROM pairing_codes WHERE expires_at <= ?", (_ts(now),))
            live = conn.execute(
                "SELECT 1 FROM pairing_codes WHERE code_hash = ? AND used = 0", (code.code_hash,)
            ).fetchone()
            if live is not None:
                return False
            conn.execute(
                "INSERT OR REPLACE INTO pairing_codes "
                "(code_hash, user, created_at, expires_at, used) VALUES (?, ?, ?, ?, 0)",
                (code.code_hash, code.user, _ts(code.created_at), _ts(code.expires_at)),
            )
            return True

    def redeem_pairing_code(self, code_hash: str, clock: Clock, budget: int) -> str | None:
        with self._write() as conn:
            # The time is read under the write lock, so guesses are timed in lock order.
            (newest,) = conn.execute("SELECT MAX(tried_at) FROM pairing_guesses").fetchone()
            now = guess_time(clock.now(), _dt(newest))
            conn.execute(
                "DELETE FROM pairing_guesses WHERE tried_at <= ?", (_ts(now - GUESS_WINDOW),)
            )
            known, tried, oldest = conn.execute(
                "SELECT EXISTS (SELECT 1 FROM pairing_guesses WHERE code_hash = ?), "
                "COUNT(*), MIN(tried_at) FROM pairing_guesses",
                (code_hash,),
            ).fetchone()
            check_guess(GuessLog(bool(known), tried, _dt(oldest)), budget, now)
            conn.execute(
                "INSERT INTO pairing_guesses (code_hash, tried_at) VALUES (?, ?) "
                "ON CONFLICT (code_hash) DO UPDATE SET tried_at = excluded.tried_at",
                (code_hash, _ts(now)),
            )
            row = conn.execute(
                "UPDATE pairing_codes SET used = 1 "
                "WHERE code_hash = ? AND used = 0 AND expires_at > ? RETURNING user",
                (code_hash, _ts(now)),
            ).fetchone()
            return None if row is None else str(row[0])

    # credit ledger ------------------------------------------------------------------------
    @staticmethod
    def _usage(conn: sqlite3.Connection, pool: str, at: datetime) -> Usage:
        month, day = "m" + month_key(at), "d" + day_key(at)
        used = dict(
            conn.execute(
                "SELECT window, used FROM credit_windows WHERE pool = ? AND window IN (?, ?)",
                (pool, month, day),
            ).fetchall()
        )
        return Usage(month=used.get(month, 0), day=used.get(day, 0))

    @staticmethod
    def _append(
        conn: sqlite3.Connection,
        pool: str,
        connection_id: str,
        label: str,
        amount: int,
        at: datetime,
        month: str,
        day: str,
        reverses: int | None,
    ) -> LedgerEntry:
        row = conn.execute(
            "INSERT INTO ledger (pool, connection_id, label, amount, at, month, day, reverses) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
            (pool, connection_id, label, amount, _ts(at), month, day, reverses),
        ).fetchone()
        conn.executemany(
            "INSERT INTO credit_windows (pool, window, used) VALUES (?, ?, ?) "
            "ON CONFLICT (pool, window) DO UPDATE SET used = used + excluded.used",
            [(pool, "m" + month, amount), (pool, "d" + day, amount)],
        )
        return LedgerEntry(row[0], pool, connection_id, label, amount, at, month, day, reverses)

    @classmethod
    def _debit(cls, conn: sqlite3.Connection, debit: Debit, limits: CreditLimits) -> LedgerEntry:
        """Check and append `debit`; the caller holds the write transaction."""
        check_fits(cls._usage(conn, debit.pool, debit.at), debit.amount, limits, debit.at)
        entry = cls._append(
            conn,
            debit.pool,
            debit.connection_id,
            debit.label,
            debit.amount,
            debit.at,
            month_key(debit.at),
            day_key(debit.at),
            None,
        )
        if debit.hold_until is not None:
            conn.execute(
                "INSERT INTO charge_holds (entry_id, until) VALUES (?, ?)",
                (entry.id, _ts(debit.hold_until)),
            )
        return entry

    @classmethod
    def _refund(cls, conn: sqlite3.Connection, entry_id: int, at: datetime) -> LedgerEntry | None:
        """Reverse debit `entry_id` unless already reversed; the caller holds the write
        transaction."""
        original = conn.execute(
            "SELECT pool, connection_id, label, amount, month, day FROM ledger "
            "WHERE id = ? AND reverses IS NULL "
            "AND NOT EXISTS (SELECT 1 FROM ledger r WHERE r.reverses = ledger.id)",
            (entry_id,),
        ).fetchone()
        if original is None:
            return None
        conn.execute("DELETE FROM charge_holds WHERE entry_id = ?", (entry_id,))
        pool, connection_id, label, amount, month, day = original
        return cls._append(conn, pool, connection_id, label, -amount, at, month, day, entry_id)

    def debit(self, debit: Debit, limits: CreditLimits) -> LedgerEntry:
        with self._write() as conn:
            return self._debit(conn, debit, limits)

    def refund(self, entry_id: int, at: datetime) -> LedgerEntry | None:
        with self._write() as conn:
            return self._refund(conn, entry_id, at)

    def confirm_charge(self, entry_id: int) -> bool:
        # One statement, atomic without BEGIN IMMEDIATE (as `hit`): this runs on every charged
        # call, and the explicit transaction would double its cost.
        with self._write_lock:
            cur = self._writer.execute("DELETE FROM charge_holds WHERE entry_id = ?", (entry_id,))
            return cur.rowcount == 1

    def renew_holds(self, entry_ids: Sequence[int], until: datetime) -> int:
        renewed = 0
        with self._write() as conn:
            for start in range(0, len(entry_ids), LOOKUP_CHUNK):
                chunk = list(entry_ids[start : start + LOOKUP_CHUNK])
                marks = ", ".join("?" * len(chunk))
                cur = conn.execute(
                    f"UPDATE charge_holds SET until = ? WHERE entry_id IN ({marks})",  # noqa: S608
                    [_ts(until), *chunk],
                )
                renewed += cur.rowcount
        return renewed

    def sweep_holds(self, now: datetime, plan_error: str) -> int:
        with self._write() as conn:
            ended = [
                row[0]
                for row in conn.execute(
                    "SELECT entry_id FROM charge_holds WHERE until <= ? ORDER BY entry_id",
                    (_ts(now),),
                ).fetchall()
            ]
            for entry_id in ended:
                self._refund(conn, entry_id, now)
                conn.execute(
                    f"{_FAIL_PENDING_PLAN} WHERE ledger_entry = ? AND status = 'pending'",
                    (plan_error, _ts(now), entry_id),
                )
            return len(ended)

    def usage(self, pool: str, at: datetime) -> Usage:
        return self._usage(self._read(), pool, at)

    def usage_by_label(self, pool: str, month: str) -> dict[str, int]:
        rows = (
            self._read()
            .execute(
                "SELECT label, SUM(amount) FROM ledger WHERE pool = ? AND month = ? GROUP BY label",
                (pool, month),
            )
            .fetchall()
        )
        return {str(label): int(total) for label, total in rows}

    def entries(self, pool: str) -> list[LedgerEntry]:
        rows = (
            self._read()
            .execute(
                "SELECT id, pool, connection_id, label, amount, at, month, day, reverses "
                "FROM ledger WHERE pool = ? ORDER BY id",
                (pool,),
            )
            .fetchall()
        )
        return [
            LedgerEntry(r[0], r[1], r[2], r[3], r[4], _dt(r[5]), r[6], r[7], r[8])  # type: ignore[arg-type]
            for r in rows
        ]

    # rate-limit counters ------------------------------------------------------------------
    def hit(self, key: str, window_start: int) -> int:
        # One statement, so atomic without an explicit transaction; the lock keeps this
        # process's writer connection to one statement at a time.
        with self._write_lock:
            row = self._writer.execute(
                "INSERT INTO rate_limits (key, window_start, count) VALUES (?, ?, 1) "
                "ON CONFLICT (key) DO UPDATE SET "
                "count = CASE WHEN window_start = excluded.window_start THEN count + 1 ELSE 1 END, "
                "window_start = excluded.window_start "
                "RETURNING count",
                (key, window_start),
            ).fetchone()
            return int(row[0])

    # client labels ------------------------------------------------------------------------
    def add_client_label(self, label: str, at: datetime) -> bool:
        with self._write() as conn:
            cur = conn.execute(
                "INSERT INTO client_labels (label, created_at) VALUES (?, ?) "
                "ON CONFLICT (label) DO NOTHING",
                (label, _ts(at)),
            )
            return cur.rowcount == 1

    def is_client_label(self, label: str) -> bool:
        row = (
            self._read().execute("SELECT 1 FROM client_labels WHERE label = ?", (label,)).fetchone()
        )
        return row is not None

    # Wi-Fi access points (keyed by BSSID hash only) ------------------------------------------
    def put_access_points(self, entries: Iterable[tuple[str, KnownAccessPoint]]) -> int:
        # Rows are built before the write lock is taken, so a slow producer never holds it.
        rows = [
            (bssid_hash, ap.point.lat, ap.point.lon, ap.accuracy_m) for bssid_hash, ap in entries
        ]
        if not all(is_bssid_hash(row[0]) for row in rows):
            raise ValueError("access points are stored under a BSSID hash, never a raw BSSID")
        if not rows:
            return 0
        with self._write() as conn:
            conn.executemany(
                "INSERT INTO access_points (bssid_hash, lat, lon, accuracy_m) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (bssid_hash) DO UPDATE SET "
                "lat = excluded.lat, lon = excluded.lon, accuracy_m = excluded.accuracy_m",
                rows,
            )
        return len(rows)

    def find_access_points(self, bssid_hashes: Sequence[str]) -> Mapping[str, KnownAccessPoint]:
        wanted = list(dict.fromkeys(bssid_hashes))
        found: dict[str, KnownAccessPoint] = {}
        conn = self._read()
        for start in range(0, len(wanted), LOOKUP_CHUNK):
            chunk = wanted[start : start + LOOKUP_CHUNK]
            marks = ", ".join("?" * len(chunk))
            rows = conn.execute(
                "SELECT bssid_hash, lat, lon, accuracy_m FROM access_points "  # noqa: S608
                f"WHERE bssid_hash IN ({marks})",
                chunk,
            ).fetchall()
            for bssid_hash, lat, lon, accuracy_m in rows:
                found[bssid_hash] = KnownAccessPoint(Point(lat, lon), accuracy_m)
        return found

    def count_access_points(self) -> int:
        row = self._read().execute("SELECT COUNT(*) FROM access_points").fetchone()
        return int(row[0])

    # route plans ----------------------------------------------------------------------------
    _PLAN_COLUMNS = (
        "id, owner, connection_id, start_lat, start_lon, end_lat, end_lon, activity, "
        "start_time, status, created_at, ledger_entry, result, error, finished_at, attempts, "
        "lease_until"
    )

    @staticmethod
    def _plan(row: Sequence[Any]) -> Plan:
        (
            plan_id,
            owner,
            connection_id,
            start_lat,
            start_lon,
            end_lat,
            end_lon,
            activity,
            start_time,
            status,
            created_at,
            ledger_entry,
            result,
            error,
            finished_at,
            attempts,
            lease_until,
        ) = row
        return Plan(
            id=uuid.UUID(str(plan_id)),
            owner=str(owner),
            connection_id=str(connection_id),
            request=PlanRequest(
                start=Point(start_lat, start_lon),
                end=Point(end_lat, end_lon),
                activity=PlanActivityType(str(activity)),
                start_time=_at(start_time),
            ),
            status=PlanStatus(str(status)),
            created_at=_at(created_at),
            ledger_entry=ledger_entry,
            result=None if result is None else decode_plan_result(result),
            error=error,
            finished_at=_dt(finished_at),
            attempts=attempts,
            lease_until=_dt(lease_until),
        )

    def submit_plan(self, plan: Plan, debit: Debit, limits: CreditLimits) -> Plan:
        check_new_plan(plan)
        request = plan.request
        with self._write() as conn:
            if conn.execute("SELECT 1 FROM plans WHERE id = ?", (str(plan.id),)).fetchone():
                raise ValueError("duplicate plan")
            entry = self._debit(conn, debit, limits)
            stored = attrs.evolve(plan, ledger_entry=entry.id)
            conn.execute(
                f"INSERT INTO plans ({self._PLAN_COLUMNS}) "  # noqa: S608
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    str(stored.id),
                    stored.owner,
                    stored.connection_id,
                    request.start.lat,
                    request.start.lon,
                    request.end.lat,
                    request.end.lon,
                    request.activity.value,
                    _ts(request.start_time),
                    stored.status.value,
                    _ts(stored.created_at),
                    stored.ledger_entry,
                    None,  # a new plan has no result (check_new_plan)
                    stored.error,
                    None if stored.finished_at is None else _ts(stored.finished_at),
                    stored.attempts,
                    None if stored.lease_until is None else _ts(stored.lease_until),
                ),
            )
        return stored

    def get_plan(self, plan_id: uuid.UUID) -> Plan | None:
        row = (
            self._read()
            .execute(
                f"SELECT {self._PLAN_COLUMNS} FROM plans WHERE id = ?",  # noqa: S608
                (str(plan_id),),
            )
            .fetchone()
        )
        return None if row is None else self._plan(row)

    def claim_plan(self, now: datetime, lease: timedelta) -> Plan | None:
        # BEGIN IMMEDIATE: no other process can take the same plan between the pick and the
        # update. The literal 'pending' lets the pick walk the plans_claim index in order.
        with self._write() as conn:
            rows = conn.execute(
                "UPDATE plans SET lease_until = ?, attempts = attempts + 1 "  # noqa: S608
                "WHERE id = (SELECT id FROM plans WHERE status = 'pending' "
                "AND (lease_until IS NULL OR lease_until <= ?) ORDER BY created_at, id LIMIT 1) "
                f"RETURNING {self._PLAN_COLUMNS}",
                (_ts(now + lease), _ts(now)),
            ).fetchall()
        return self._plan(rows[0]) if rows else None

    def renew_lease(self, plan_id: uuid.UUID, until: datetime) -> bool:
        with self._write() as conn:
            cur = conn.execute(
                "UPDATE plans SET lease_until = ? WHERE id = ? AND status = 'pending'",
                (_ts(until), str(plan_id)),
            )
            return cur.rowcount == 1

    def complete_plan(self, plan_id: uuid.UUID, result: PlanResult, now: datetime) -> bool:
        with self._write() as conn:
            cur = conn.execute(
                "UPDATE plans SET status = 'completed', result = ?, finished_at = ?, "
                "lease_until = NULL WHERE id = ? AND status = 'pending'",
                (encode_plan_result(result), _ts(now), str(plan_id)),
            )
            return cur.rowcount == 1

    def fail_plan(self, plan_id: uuid.UUID, error: str, now: datetime, *, refund: bool) -> bool:
        with self._write() as conn:
            rows = conn.execute(
                f"{_FAIL_PENDING_PLAN} WHERE id = ? AND status = 'pending' RETURNING ledger_entry",
                (error, _ts(now), str(plan_id)),
            ).fetchall()
            if not rows:
                return False
            ledger_entry = rows[0][0]
            if refund and ledger_entry is not None:
                self._refund(conn, ledger_entry, now)
            return True

    def prune_plans(self, finished_before: datetime) -> int:
        # Only a finished plan has `finished_at`; filtering on it alone walks plans_finished.
        with self._write() as conn:
            cur = conn.execute("DELETE FROM plans WHERE finished_at < ?", (_ts(finished_before),))
            return cur.rowcount

    # street networks ------------------------------------------------------------------------
    _NETWORK_SUMMARY_COLUMNS = "name, nodes, edges, south, west, north, east, source, imported_at"

    def save_network(self, network: StreetNetwork) -> None:
        # Encoded before the write lock is taken: a large network never holds it for long.
        blobs = [_array_bytes(name, getattr(network, name), kind) for name, kind in _NETWORK_ARRAYS]
        south, west, north, east = network.bounds
        row = (
            network.name,
            network.node_count,
            network.edge_count,
            south,
            west,
            north,
            east,
            network.source,
            None if network.imported_at is None else _ts(network.imported_at),
            *blobs,
        )
        columns = ", ".join([self._NETWORK_SUMMARY_COLUMNS, *(name for name, _ in _NETWORK_ARRAYS)])
        marks = ", ".join("?" * len(row))
        with self._write() as conn:
            conn.execute(
                f"INSERT OR REPLACE INTO street_networks ({columns}) VALUES ({marks})",  # noqa: S608
                row,
            )
        self._shrink_wal()

    def _shrink_wal(self) -> None:
        """Give back the disk a large transaction took in the WAL now, rather than at the
        next write (best effort: a reader in the middle of a read keeps it until then)."""
        with self._write_lock, contextlib.suppress(sqlite3.OperationalError):
            self._writer.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def load_networks(self) -> list[StreetNetwork]:
        rows = (
            self._read()
            .execute(
                "SELECT name, source, imported_at, "
                "node_lat, node_lon, edge_from, edge_to, edge_length, edge_class, edge_access "
                "FROM street_networks ORDER BY name"
            )
            .fetchall()
        )
        return [
            StreetNetwork(
                name=row[0],
                node_lat=_array(row[3], np.float64),
                node_lon=_array(row[4], np.float64),
                edge_from=_array(row[5], np.int32),
                edge_to=_array(row[6], np.int32),
                edge_length=_array(row[7], np.float64),
                edge_class=_array(row[8], np.uint8),
                edge_access=_array(row[9], np.uint8),
                source=row[1],
                imported_at=_dt(row[2]),
            )
            for row in rows
        ]

    def network_summaries(self) -> list[NetworkSummary]:
        rows = (
            self._read()
            .execute(
                f"SELECT {self._NETWORK_SUMMARY_COLUMNS} FROM street_networks "  # noqa: S608
                "ORDER BY name"
            )
            .fetchall()
        )
        return [
            NetworkSummary(
                name=name,
                nodes=nodes,
                edges=edges,
                bounds=(south, west, north, east),
                source=source,
                imported_at=_dt(imported_at),
            )
            for name, nodes, edges, south, west, north, east, source, imported_at in rows
        ]

    def delete_network(self, name: str) -> bool:
        with self._write() as conn:
            cur = conn.execute("DELETE FROM street_networks WHERE name = ?", (name,))
            return cur.rowcount == 1

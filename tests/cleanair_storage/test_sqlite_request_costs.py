"""What SQLite's part of a charged request costs, counted rather than timed: the admission's
connection parsed once per distinct row, the WAL frames a charge's commit writes, and the
ledger's leaner schema (m017) over a database written before it."""

from __future__ import annotations

import asyncio
import sqlite3
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlite_utils import Database

from cleanair_core.access.accounts import Owner, OwnerKind, User
from cleanair_core.access.connections import Connection
from cleanair_core.access.scopes import Scope
from cleanair_core.credits.ledger import CreditLimits, Debit, FinalCharge, LedgerEntry, Settlement
from cleanair_core.credits.rate_limits import RateHit
from cleanair_storage.migrations import applied_migrations, sqlite_utils_migrations
from cleanair_storage.sqlite import SqliteStore
from cleanair_storage.sqlite.connections import SqliteConnections
from cleanair_storage.sqlite.database import instant
from cleanair_storage.sqlite.ledger import SqliteLedger

AT = datetime(2026, 3, 10, 12, tzinfo=UTC)
LIMITS = CreditLimits(monthly=10**6, daily=10**6)
#: SQLite's WAL: a file header, then per frame a header and one page (the store's 4 KiB).
WAL_HEADER, FRAME_HEADER, PAGE = 32, 24, 4096
#: Charges measured, each its own commit.
CHARGES = 5


def add_connection(store: SqliteStore) -> Connection:
    """A connection of alice's with a token hash no other test uses (the parse cache is the
    process's)."""
    connection = Connection(
        id=uuid.uuid4(),
        owner=Owner(OwnerKind.USER, "alice"),
        name="phone",
        scopes=frozenset({Scope.AQ_READ, Scope.ROUTES_PLAN}),
        token_hash=uuid.uuid4().hex * 2,
        created_at=AT,
    )
    store.add_connection(connection)
    return connection


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteStore]:
    opened = SqliteStore(tmp_path / "cleanair.db")
    opened.add_user(User("alice", False, AT))
    yield opened
    opened.close()


def test_the_admission_parses_a_connection_row_once(
    store: SqliteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every request reads its token's row; the row is parsed into a `Connection` the first
    time only, and a changed row (revoked) is parsed anew, so no answer changes."""
    connection = add_connection(store)
    parsed: list[object] = []
    parse = SqliteConnections._connection

    def counted(row: tuple[object, ...]) -> Connection:
        parsed.append(row[0])
        return parse(row)

    monkeypatch.setattr(SqliteConnections, "_connection", staticmethod(counted))
    reads = [store.admission(connection.token_hash, "req", AT) for _ in range(5)]
    assert [read.connection for read in reads] == [connection] * 5
    assert store.connection_by_token_hash(connection.token_hash) == connection
    assert len(parsed) == 1

    revoked_at = AT + timedelta(minutes=1)
    assert store.revoke_connection(connection.id, revoked_at)
    after = store.admission(connection.token_hash, "req", AT).connection
    assert after is not None
    assert after.revoked_at == revoked_at
    assert store.connection_by_token_hash(connection.token_hash) == after
    assert len(parsed) == 2


def charge(connection: Connection, at: datetime = AT) -> FinalCharge:
    """A served score's final charge: its debit and its rate-limit hit, written together."""
    return FinalCharge(
        Debit("user:alice", str(connection.id), "score", 1, at),
        RateHit(f"requests:{connection.id}", int(at.timestamp()) // 60 * 60, 60, 10**6),
    )


def wal_frames(path: Path) -> int:
    wal = Path(f"{path}-wal")
    return (wal.stat().st_size - WAL_HEADER) // (PAGE + FRAME_HEADER) if wal.exists() else 0


def test_a_charge_commits_four_pages(tmp_path: Path) -> None:
    """Each page a commit dirtied is a WAL frame written (and, with synchronous=FULL, synced):
    the hit's counter, the pool's window counters, the ledger row and its (pool, month)
    index entry. AUTOINCREMENT's sqlite_sequence row and a UNIQUE index holding every
    debit's NULL `reverses` made it six."""
    path = tmp_path / "cleanair.db"
    store = SqliteStore(path)
    try:
        store.add_user(User("alice", False, AT))
        connection = add_connection(store)
        # No checkpoint may restart the WAL while it is measured.
        store._stop.set()
        assert store._checkpointer is not None
        store._checkpointer.join()
        store.settle_charges([charge(connection)], LIMITS)
        before = wal_frames(path)
        for _ in range(CHARGES):
            store.settle_charges([charge(connection)], LIMITS)
        written = wal_frames(path) - before
    finally:
        store.close()
    assert written <= 4 * CHARGES, f"{written / CHARGES} frames a charge"


def test_a_charge_runs_three_statements(store: SqliteStore) -> None:
    """What settle_charges runs for one charge with its hit, each statement a round from
    Python into SQLite: the hit with its pool's four windows read in its RETURNING clause,
    the ledger row (its id is the connection's last rowid, no RETURNING result table), and
    both windows counted in one statement. It was five: the hit, the windows read a row per
    window, the row with RETURNING, and each window's upsert."""
    connection = add_connection(store)
    writes = store.group_writes()
    assert writes is not None

    async def settle() -> list[Settlement]:
        # as a served request's final charge: the group writer's batch of one
        return await writes(lambda: store.settle_charges([charge(connection)], LIMITS))

    asyncio.run(settle())  # the windows exist, and the writer's busy timeout is set
    ran: list[str] = []
    store._writer.set_trace_callback(ran.append)
    try:
        [entry] = asyncio.run(settle())
    finally:
        store._writer.set_trace_callback(None)
    body = [sql for sql in ran if sql not in ("BEGIN IMMEDIATE", "COMMIT")]
    assert len(body) == 3, body
    assert [sql for sql in body if "RETURNING" in sql] == [body[0]]
    assert "rate_limits" in body[0]
    assert "credit_windows" in body[0]
    assert store.entries("user:alice")[-1] == entry
    assert store.usage("user:alice", AT).month == 2


def older_ledger(path: Path) -> list[LedgerEntry]:
    """A database migrated up to before m017 (foreign keys on, as the store writes): a debit
    refunded, a held debit, a grant; its ledger as written."""
    with sqlite3.connect(path) as conn:
        sqlite_utils_migrations().apply(Database(conn), stop_before="m017_lean_ledger")
        conn.execute("PRAGMA foreign_keys = ON")
        refunded = SqliteLedger._debit(conn, Debit("user:alice", "c1", "score", 2, AT), LIMITS)
        SqliteLedger._refund(conn, refunded.id, AT + timedelta(seconds=1))
        held = Debit("user:alice", "c1", "plan", 5, AT, hold_until=AT + timedelta(minutes=5))
        SqliteLedger._debit(conn, held, LIMITS)
        conn.execute(
            "INSERT INTO ledger (pool, connection_id, label, amount, at, month, day, reason) "
            "VALUES ('user:alice', '-', 'grant', 10, ?, '2026-03', '2026-03-10', 'gift')",
            (AT.timestamp(),),
        )
        rows = conn.execute(
            "SELECT id, pool, connection_id, label, amount, at, month, day, reverses, reason "
            "FROM ledger ORDER BY id"
        ).fetchall()
    conn.close()
    return [
        LedgerEntry(r[0], r[1], r[2], r[3], r[4], instant(r[5]), r[6], r[7], r[8], r[9])
        for r in rows
    ]


def test_the_lean_ledger_keeps_what_was_written_and_its_rules(tmp_path: Path) -> None:
    path = tmp_path / "older.db"
    written = older_ledger(path)
    refunded, refund, held, _ = written
    store = SqliteStore(path)
    try:
        assert store.schema_is_current()
        assert store.entries("user:alice") == written
        # ids go on from the largest, as AUTOINCREMENT's did
        debit = store.debit(Debit("user:alice", "c1", "score", 1, AT), LIMITS)
        assert debit.id == written[-1].id + 1
        # a debit is reversed at most once, whoever tries
        assert store.refund(refunded.id, AT) is None
        with pytest.raises(sqlite3.IntegrityError):
            store._writer.execute(
                "INSERT INTO ledger (pool, connection_id, label, amount, at, month, day, "
                "reverses) VALUES ('user:alice', 'c1', 'score', -2, 0, 'm', 'd', ?)",
                (refund.reverses,),
            )
        # the hold came along, and its refund ends it
        assert store.sweep_holds(AT + timedelta(hours=1), "expired") == 1
        assert store.entries("user:alice")[-1].reverses == held.id
        # foreign keys are enforced again once the store has migrated
        with pytest.raises(sqlite3.IntegrityError):
            store._writer.execute("INSERT INTO charge_holds (entry_id, until) VALUES (999, 0)")
    finally:
        store.close()


def test_a_ledger_reference_to_nothing_stops_the_migration(tmp_path: Path) -> None:
    """A row written with foreign keys off that refers to no ledger entry: the rebuild does
    not carry it over silently; nothing of the migration is kept."""
    path = tmp_path / "older.db"
    written = older_ledger(path)
    with sqlite3.connect(path) as conn:  # foreign keys off: SQLite's default
        conn.execute("INSERT INTO charge_holds (entry_id, until) VALUES (999, 0)")
    conn.close()
    with pytest.raises(sqlite3.IntegrityError, match="charge_holds"):
        SqliteStore(path)
    with sqlite3.connect(path) as conn:
        applied = applied_migrations(conn)
        assert applied is not None
        assert "m017_lean_ledger" not in applied
        assert len(conn.execute("SELECT * FROM ledger").fetchall()) == len(written)
    conn.close()


LEDGER_ROWS = "SELECT * FROM ledger ORDER BY id"
HOLD_ROWS = "SELECT * FROM charge_holds ORDER BY entry_id"
#: A step of an older ledger's history: a debit (held or not) of an amount on a day, or a
#: refund of the n-th debit so far (modulo), which is refused once it is reversed.
_Step = tuple[str, int, int]
_STEPS = st.lists(
    st.tuples(st.sampled_from(["debit", "held", "refund"]), st.integers(1, 5), st.integers(0, 40)),
    max_size=15,
)


@settings(max_examples=15, deadline=None)
@given(_STEPS)
def test_any_older_ledger_migrates_to_the_same_entries_and_usage(
    tmp_path_factory: pytest.TempPathFactory, steps: list[_Step]
) -> None:
    """Whatever an older ledger holds, the rebuilt one has the same entries, every pool's
    usage is unchanged, and the next entry's id follows the largest."""
    path = tmp_path_factory.mktemp("db") / "older.db"
    debits: list[int] = []
    with sqlite3.connect(path) as conn:
        sqlite_utils_migrations().apply(Database(conn), stop_before="m017_lean_ledger")
        conn.execute("PRAGMA foreign_keys = ON")
        for kind, amount, offset in steps:
            at = AT + timedelta(days=offset)
            if kind == "refund":
                if debits:
                    SqliteLedger._refund(conn, debits[amount % len(debits)], at)
                continue
            hold = at + timedelta(minutes=5) if kind == "held" else None
            debit = Debit("user:alice", "c1", "score", amount, at, hold_until=hold)
            debits.append(SqliteLedger._debit(conn, debit, LIMITS).id)
        days = [AT + timedelta(days=offset) for offset in range(0, 41, 10)]
        usages = [SqliteLedger._usage(conn, "user:alice", at) for at in days]
        rows = conn.execute(LEDGER_ROWS).fetchall()
        holds = conn.execute(HOLD_ROWS).fetchall()
    conn.close()
    store = SqliteStore(path)
    try:
        assert store._read().execute(LEDGER_ROWS).fetchall() == rows
        assert store._read().execute(HOLD_ROWS).fetchall() == holds
        assert [store.usage("user:alice", at) for at in days] == usages
        largest = rows[-1][0] if rows else 0
        assert store.debit(Debit("user:alice", "c1", "score", 1, AT), LIMITS).id == largest + 1
    finally:
        store.close()

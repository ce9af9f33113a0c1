"""Schema history of the SQLite store (sqlite-utils migrations; applied in order, once)."""

from __future__ import annotations

import functools

from sqlite_utils import Database
from sqlite_utils.migrations import Migrations

from cleanair_storage.errors import UPGRADE_ADVICE, SchemaTooNew

migrations = Migrations("cleanair")


@functools.cache
def migration_names() -> frozenset[str]:
    """The name of every migration this code knows (on an empty database all are pending)."""
    return frozenset(migration.name for migration in migrations.pending(Database(memory=True)))


def migrate(db: Database) -> None:
    """Apply the missing migrations in order. Raises SchemaTooNew, changing nothing, when
    `db` records a migration this code does not know: a newer release applied it, and
    sqlite-utils alone would carry on over a schema this code was not written for."""
    unknown = unknown_migrations(db)
    if unknown:
        raise SchemaTooNew(
            f"the database holds migrations newer than this cleanair knows "
            f"({', '.join(unknown)}): {UPGRADE_ADVICE}"
        )
    migrations.apply(db)


def unknown_migrations(db: Database) -> list[str]:
    """The migrations recorded in `db` that this code does not know, in the order applied."""
    known = migration_names()
    return [applied.name for applied in migrations.applied(db) if applied.name not in known]


@migrations()
def m001_accounts_connections_credits(db: Database) -> None:
    db.execute(
        """
        CREATE TABLE users (
            name TEXT PRIMARY KEY,
            premium INTEGER NOT NULL,
            created_at REAL NOT NULL
        )"""
    )
    db.execute(
        """
        CREATE TABLE partners (
            name TEXT PRIMARY KEY,
            active INTEGER NOT NULL,
            created_at REAL NOT NULL
        )"""
    )
    db.execute(
        """
        CREATE TABLE connections (
            id TEXT PRIMARY KEY,
            owner_kind TEXT NOT NULL,
            owner_name TEXT NOT NULL,
            name TEXT NOT NULL,
            scopes TEXT NOT NULL,
            token_hash TEXT NOT NULL UNIQUE,
            created_at REAL NOT NULL,
            revoked_at REAL
        )"""
    )
    db.execute("CREATE INDEX connections_owner ON connections (owner_kind, owner_name)")
    db.execute(
        """
        CREATE TABLE pairing_codes (
            code_hash TEXT PRIMARY KEY,
            user TEXT NOT NULL,
            created_at REAL NOT NULL,
            expires_at REAL NOT NULL,
            used INTEGER NOT NULL DEFAULT 0
        )"""
    )
    # Append-only: a refund is a new negative row that reverses a debit, at most once.
    db.execute(
        """
        CREATE TABLE ledger (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            pool TEXT NOT NULL,
            connection_id TEXT NOT NULL,
            label TEXT NOT NULL,
            amount INTEGER NOT NULL,
            at REAL NOT NULL,
            month TEXT NOT NULL,
            day TEXT NOT NULL,
            reverses INTEGER UNIQUE REFERENCES ledger (id)
        )"""
    )
    db.execute("CREATE INDEX ledger_pool_month ON ledger (pool, month)")
    # Running totals per pool and window, updated in the same transaction as the ledger, so a
    # quota read or a debit check is two primary-key lookups however long the ledger grows.
    db.execute(
        """
        CREATE TABLE credit_windows (
            pool TEXT NOT NULL,
            window TEXT NOT NULL,
            used INTEGER NOT NULL,
            PRIMARY KEY (pool, window)
        ) WITHOUT ROWID"""
    )
    db.execute(
        """
        CREATE TABLE rate_limits (
            key TEXT PRIMARY KEY,
            window_start INTEGER NOT NULL,
            count INTEGER NOT NULL
        ) WITHOUT ROWID"""
    )
    db.execute(
        """
        CREATE TABLE client_labels (
            label TEXT PRIMARY KEY,
            created_at REAL NOT NULL
        )"""
    )


@migrations()
def m002_access_points(db: Database) -> None:
    # Imported Wi-Fi access points, keyed only by `TokenKeys.hash_bssid` of the normalised
    # BSSID: the database never holds a raw BSSID. WITHOUT ROWID keeps the hash once (the
    # table is its primary-key index) instead of twice (rowid table plus a unique index).
    db.execute(
        """
        CREATE TABLE access_points (
            bssid_hash TEXT PRIMARY KEY,
            lat REAL NOT NULL,
            lon REAL NOT NULL,
            accuracy_m REAL
        ) WITHOUT ROWID"""
    )


@migrations()
def m003_plans_and_street_networks(db: Database) -> None:
    # Route plans as shared work (cleanair_core.routes.plans). `ledger_entry` is the debit a
    # rejected plan refunds. Workers claim the oldest pending plan (plans_claim), and the retention
    # job deletes finished plans by age (plans_finished).
    db.execute(
        """
        CREATE TABLE plans (
            id TEXT PRIMARY KEY,
            owner TEXT NOT NULL,
            connection_id TEXT NOT NULL,
            start_lat REAL NOT NULL,
            start_lon REAL NOT NULL,
            end_lat REAL NOT NULL,
            end_lon REAL NOT NULL,
            activity TEXT NOT NULL,
            start_time REAL NOT NULL,
            status TEXT NOT NULL CHECK (status IN ('pending', 'completed', 'failed')),
            created_at REAL NOT NULL,
            ledger_entry INTEGER REFERENCES ledger (id),
            result TEXT,
            error TEXT,
            finished_at REAL,
            attempts INTEGER NOT NULL DEFAULT 0,
            lease_until REAL
        )"""
    )
    db.execute("CREATE INDEX plans_claim ON plans (status, created_at, id)")
    db.execute("CREATE INDEX plans_finished ON plans (finished_at)")
    # Imported street networks. The summary columns come first, so listing networks reads
    # them without touching the arrays, which live in overflow pages after them. Each array
    # is its raw little-endian bytes (float64, int32 or uint8 as StreetNetwork declares).
    db.execute(
        """
        CREATE TABLE street_networks (
            name TEXT PRIMARY KEY,
            nodes INTEGER NOT NULL,
            edges INTEGER NOT NULL,
            south REAL NOT NULL,
            west REAL NOT NULL,
            north REAL NOT NULL,
            east REAL NOT NULL,
            source TEXT NOT NULL,
            imported_at REAL,
            node_lat BLOB NOT NULL,
            node_lon BLOB NOT NULL,
            edge_from BLOB NOT NULL,
            edge_to BLOB NOT NULL,
            edge_length BLOB NOT NULL,
            edge_class BLOB NOT NULL,
            edge_access BLOB NOT NULL
        )"""
    )


@migrations()
def m004_pairing_guesses(db: Database) -> None:
    # The global guess budget (cleanair_core.access.pairing): the keyed hash of each distinct code
    # tried in the last 60 s and when it was last tried. It never holds more than the budget
    # plus the guesses that aged out since the last attempt (they are deleted on the next).
    db.execute(
        """
        CREATE TABLE pairing_guesses (
            code_hash TEXT PRIMARY KEY,
            tried_at REAL NOT NULL
        ) WITHOUT ROWID"""
    )


@migrations()
def m005_charge_holds(db: Database) -> None:
    # Debits not yet confirmed (cleanair_core.credits.charging): the answering process renews
    # `until` while it works and deletes the row when the answer goes out; a row whose
    # `until` has passed belongs to a process that died, and the sweep refunds its debit (and
    # fails the route plan it paid for, found by plans_ledger_entry).
    db.execute(
        """
        CREATE TABLE charge_holds (
            entry_id INTEGER PRIMARY KEY REFERENCES ledger (id),
            until REAL NOT NULL
        )"""
    )
    db.execute("CREATE INDEX charge_holds_until ON charge_holds (until)")
    db.execute("CREATE INDEX plans_ledger_entry ON plans (ledger_entry)")


@migrations()
def m006_street_network_traffic(db: Database) -> None:
    # Each edge's estimated motor vehicles a day (StreetNetwork.edge_traffic), for the
    # street-level air. Networks stored before have NULL and load with the class defaults.
    db.execute("ALTER TABLE street_networks ADD COLUMN edge_traffic BLOB")


@migrations()
def m007_plan_claims(db: Database) -> None:
    # The fencing token of a plan's lease (Plan.claims): it counts every claim and, unlike
    # `attempts`, a hand-back never lowers it, so no earlier claim's token comes round again.
    # Plans stored before start from their attempts, keeping claims >= attempts; no claim
    # taken before the upgrade is still held (every process was stopped for it).
    db.execute("ALTER TABLE plans ADD COLUMN claims INTEGER NOT NULL DEFAULT 0")
    db.execute("UPDATE plans SET claims = attempts")

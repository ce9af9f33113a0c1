"""Schema history of the SQLite store (sqlite-utils migrations; applied in order, once)."""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from cleanair_storage.claim_rows import cells_of_rows
from cleanair_storage.errors import UPGRADE_ADVICE, SchemaTooNew
from cleanair_storage.subscription_rows import SUBSCRIPTION_COLUMNS

# sqlite-utils (which imports NumPy) is imported only when a migration is due: a process
# opening a database that is up to date, an operator CLI command say, starts without it.
if TYPE_CHECKING:
    from sqlite_utils import Database
    from sqlite_utils.migrations import Migrations

#: The sqlite-utils migration set; its applied migrations are rows of `_sqlite_migrations`.
MIGRATION_SET = "cleanair"
#: Every migration, in the order applied.
_MIGRATIONS: list[Callable[[Database], None]] = []


def _migration(function: Callable[[Database], None]) -> Callable[[Database], None]:
    _MIGRATIONS.append(function)
    return function


@functools.cache
def sqlite_utils_migrations() -> Migrations:
    """The migrations as a sqlite-utils `Migrations` set (named by their functions)."""
    from sqlite_utils.migrations import Migrations

    migrations = Migrations(MIGRATION_SET)
    for function in _MIGRATIONS:
        migrations()(function)
    return migrations


def migration_names() -> frozenset[str]:
    """The name of every migration this code knows."""
    return frozenset(function.__name__ for function in _MIGRATIONS)


def applied_migrations(conn: sqlite3.Connection) -> list[str] | None:
    """The migrations `conn`'s database records, in the order applied; None when it has no
    record of any (a new file, or one emptied or replaced)."""
    found = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = '_sqlite_migrations'"
    ).fetchone()
    if found is None:
        return None
    rows = conn.execute(
        "SELECT name FROM _sqlite_migrations WHERE migration_set = ? ORDER BY rowid",
        (MIGRATION_SET,),
    ).fetchall()
    return [str(name) for (name,) in rows]


def migrate(conn: sqlite3.Connection) -> None:
    """Apply the missing migrations in order. Raises SchemaTooNew, changing nothing, when
    the database records a migration this code does not know: a newer release applied it,
    and sqlite-utils alone would carry on over a schema this code was not written for."""
    applied = applied_migrations(conn) or []
    known = migration_names()
    unknown = [name for name in applied if name not in known]
    if unknown:
        raise SchemaTooNew(
            f"the database holds migrations newer than this cleanair knows "
            f"({', '.join(unknown)}): {UPGRADE_ADVICE}"
        )
    if set(applied) == known:
        return
    from sqlite_utils import Database

    sqlite_utils_migrations().apply(Database(conn))


@_migration
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


@_migration
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


@_migration
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


@_migration
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


@_migration
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


@_migration
def m006_street_network_traffic(db: Database) -> None:
    # Each edge's estimated motor vehicles a day (StreetNetwork.edge_traffic), for the
    # street-level air. Networks stored before have NULL and load with the class defaults.
    db.execute("ALTER TABLE street_networks ADD COLUMN edge_traffic BLOB")


@_migration
def m007_plan_claims(db: Database) -> None:
    # The fencing token of a plan's lease (Plan.claims): it counts every claim and, unlike
    # `attempts`, a hand-back never lowers it, so no earlier claim's token comes round again.
    # Plans stored before start from their attempts, keeping claims >= attempts; no claim
    # taken before the upgrade is still held (every process was stopped for it).
    db.execute("ALTER TABLE plans ADD COLUMN claims INTEGER NOT NULL DEFAULT 0")
    db.execute("UPDATE plans SET claims = attempts")


@_migration
def m008_station_observations(db: Database) -> None:
    # Monitoring stations and their hourly observations (cleanair_core.air.observations).
    # `hour_end` is the end of the averaging hour in unix seconds (always on the hour, so an
    # integer holds it exactly). WITHOUT ROWID: the table is its primary-key index, so each
    # observation is stored once, and a station's hours are contiguous for its summary;
    # observations_hour_end serves the time-window reads and the retention delete.
    db.execute(
        """
        CREATE TABLE stations (
            id TEXT PRIMARY KEY,
            name TEXT NOT NULL,
            lat REAL NOT NULL,
            lon REAL NOT NULL,
            station_type TEXT,
            area_type TEXT
        )"""
    )
    db.execute(
        """
        CREATE TABLE observations (
            station_id TEXT NOT NULL,
            pollutant TEXT NOT NULL,
            hour_end INTEGER NOT NULL,
            value REAL NOT NULL,
            PRIMARY KEY (station_id, pollutant, hour_end)
        ) WITHOUT ROWID"""
    )
    db.execute("CREATE INDEX observations_hour_end ON observations (hour_end)")
    # One row, bumped in the transaction of every write that changed stations or
    # observations: readers in any process compare it to what they cached instead of
    # re-reading the observations (ObservationStore.observations_version).
    db.execute(
        """
        CREATE TABLE observations_version (
            id INTEGER PRIMARY KEY CHECK (id = 1),
            version INTEGER NOT NULL
        )"""
    )
    db.execute("INSERT INTO observations_version (id, version) VALUES (1, 0)")


@_migration
def m009_street_names(db: Database) -> None:
    # Each edge's street name (StreetNetwork.edge_name, int32 indices into street_names,
    # UTF-8 names one per line), for the route explorer's map. Networks stored before have
    # NULL and load without names until imported again.
    db.execute("ALTER TABLE street_networks ADD COLUMN edge_name BLOB")
    db.execute("ALTER TABLE street_networks ADD COLUMN street_names BLOB")


@_migration
def m010_credit_grants(db: Database) -> None:
    # An operator's grant is a ledger entry with its reason (NULL for every other entry);
    # it counts in the pool's grant window of credit_windows ("g" + month), never as usage.
    db.execute("ALTER TABLE ledger ADD COLUMN reason TEXT")


@_migration
def m011_network_areas(db: Database) -> None:
    # The water and green-space outlines around a network (StreetNetwork.areas: per ring its
    # kind and end, per point its latitude and longitude), for the route explorer's map.
    # Networks stored before have NULL and load without them until imported again.
    for column in ("area_kind", "area_ring_end", "area_lat", "area_lon"):
        db.execute(f"ALTER TABLE street_networks ADD COLUMN {column} BLOB")


@_migration
def m012_departure_plans(db: Database) -> None:
    # Departures plans (the extension's best time to go) share the plans table and its
    # workers: `kind` tells them apart, `start_time` holds the earliest start and the window
    # adds its latest start and step (NULL for a route plan).
    db.execute(
        "ALTER TABLE plans ADD COLUMN kind TEXT NOT NULL DEFAULT 'routes' "
        "CHECK (kind IN ('routes', 'departures'))"
    )
    db.execute("ALTER TABLE plans ADD COLUMN latest_start_time REAL")
    db.execute("ALTER TABLE plans ADD COLUMN step_seconds INTEGER")


@_migration
def m013_alert_subscriptions(db: Database) -> None:
    # Alert subscriptions (cleanair_core.alerts.subscriptions; the columns are described in
    # cleanair_storage/subscription_rows.py). No webhook secret is stored, only its
    # generation: secrets are derived from the server key. `state` is the evaluator's JSON
    # and `state_version` its compare-and-set counter. subscriptions_owner serves the
    # per-user listing in order and the count of the per-user limit.
    db.execute(
        """
        CREATE TABLE subscriptions (
            id TEXT PRIMARY KEY,
            owner TEXT NOT NULL,
            connection_id TEXT NOT NULL,
            created_at REAL NOT NULL,
            target TEXT NOT NULL CHECK (target IN ('place', 'trip')),
            lat REAL NOT NULL,
            lon REAL NOT NULL,
            end_lat REAL,
            end_lon REAL,
            activity TEXT,
            departure TEXT,
            days TEXT,
            index_code TEXT,
            threshold INTEGER NOT NULL,
            direction TEXT NOT NULL,
            audience TEXT NOT NULL,
            kind TEXT NOT NULL CHECK (kind IN ('observed', 'forecast')),
            hysteresis_categories INTEGER,
            hysteresis_hours INTEGER,
            target_day TEXT,
            send_at TEXT,
            timezone TEXT NOT NULL,
            quiet_start TEXT,
            quiet_end TEXT,
            webhook_url TEXT,
            secret_generation INTEGER NOT NULL,
            previous_generation_until REAL,
            disabled_reason TEXT,
            disabled_at REAL,
            state TEXT,
            state_version INTEGER NOT NULL DEFAULT 0
        )"""
    )
    db.execute("CREATE INDEX subscriptions_owner ON subscriptions (owner, created_at, id)")


@_migration
def m014_alert_outbox(db: Database) -> None:
    # The alert feed and the outbox (cleanair_core.alerts.outbox; docs/alerts.md, "The feed
    # and the outbox"). No foreign key to subscriptions: the feed outlives a deleted
    # subscription (its owner still pages what was told), and a delivery still owed is
    # given up by `abandon_deliveries`, FAILED with its reason, not deleted with it.
    #
    # alert_feed: one row per event recorded, numbered per owner from 1 without gaps; the
    # unique event_id is what makes recording idempotent. WITHOUT ROWID: the table is its
    # (owner, cursor) key, so an owner's page is one contiguous range.
    db.execute(
        """
        CREATE TABLE alert_feed (
            owner TEXT NOT NULL,
            cursor INTEGER NOT NULL,
            event_id TEXT NOT NULL UNIQUE,
            subscription_id TEXT NOT NULL,
            payload TEXT NOT NULL,
            created_at REAL NOT NULL,
            PRIMARY KEY (owner, cursor)
        ) WITHOUT ROWID"""
    )
    # The last cursor given to each owner. The next number comes from here, not from the
    # feed's max(cursor), so numbers are never given twice even once old feed rows are gone.
    db.execute(
        """
        CREATE TABLE alert_feed_ends (
            owner TEXT PRIMARY KEY,
            last_cursor INTEGER NOT NULL
        )"""
    )
    # alert_deliveries: the webhook deliveries owed, one per event with a URL, kept once
    # delivered or failed (for the owner and operators to read). `claimant` and
    # `lease_until` are the lease of the worker attempting it now (NULL when none).
    db.execute(
        """
        CREATE TABLE alert_deliveries (
            event_id TEXT PRIMARY KEY,
            subscription_id TEXT NOT NULL,
            owner TEXT NOT NULL,
            url TEXT NOT NULL,
            payload TEXT NOT NULL,
            created_at REAL NOT NULL,
            attempts INTEGER NOT NULL DEFAULT 0,
            next_attempt_at REAL NOT NULL,
            state TEXT NOT NULL DEFAULT 'pending'
                CHECK (state IN ('pending', 'delivered', 'failed')),
            last_error TEXT,
            claimant TEXT,
            lease_until REAL
        )"""
    )
    # Partial indexes over the pending deliveries only: a claim walks the due ones in order
    # (earliest first, then by id, as every adapter gives them) without reading the
    # delivered and failed ones, however many are kept; abandoning a subscription's finds
    # them at once. Queries must say `state = 'pending'` literally for SQLite to use them.
    db.execute(
        "CREATE INDEX alert_deliveries_due ON alert_deliveries (next_attempt_at, event_id) "
        "WHERE state = 'pending'"
    )
    db.execute(
        "CREATE INDEX alert_deliveries_subscription ON alert_deliveries (subscription_id) "
        "WHERE state = 'pending'"
    )


@_migration
def m015_evaluation_claims(db: Database) -> None:
    # The evaluation claims (cleanair_core.alerts.rounds; cleanair_storage/claim_rows.py
    # describes the columns). A subscription stored before is due at its creation, as a new
    # one is: it has never been evaluated. SQLite adds a NOT NULL column only with a default;
    # every row gets its real value here and every insert writes one.
    db.execute("ALTER TABLE subscriptions ADD COLUMN next_evaluation_at REAL NOT NULL DEFAULT 0")
    db.execute("ALTER TABLE subscriptions ADD COLUMN cell TEXT NOT NULL DEFAULT ''")
    db.execute("ALTER TABLE subscriptions ADD COLUMN lease_claimant TEXT")
    db.execute("ALTER TABLE subscriptions ADD COLUMN lease_until REAL")
    db.execute("UPDATE subscriptions SET next_evaluation_at = created_at")
    # The cell by the very function add_subscription uses (Python's rounding, not SQL's), so
    # old and new rows of one cell come in one batch.
    rows = db.execute(f"SELECT {SUBSCRIPTION_COLUMNS} FROM subscriptions").fetchall()  # noqa: S608
    db.conn.executemany(
        "UPDATE subscriptions SET cell = ? WHERE id = ?",
        cells_of_rows(rows, _instant),
    )
    # A claim walks the active subscriptions in its order (due time, cell, id) and stops at
    # the first not yet due, never reading the disabled ones. Queries must say
    # `disabled_reason IS NULL` literally for SQLite to use it.
    db.execute(
        "CREATE INDEX subscriptions_due ON subscriptions (next_evaluation_at, cell, id) "
        "WHERE disabled_reason IS NULL"
    )


@_migration
def m016_alert_retention(db: Database) -> None:
    # Retention (`use_cases.alert_feed.prune_alert_history`) deletes the oldest feed entries
    # and finished deliveries a batch at a time: these walk them by age without reading the
    # rest (deliveries still owed are never pruned; queries say `state <> 'pending'`
    # literally for SQLite to use the partial index).
    db.execute("CREATE INDEX alert_feed_recorded ON alert_feed (created_at, owner, cursor)")
    db.execute(
        "CREATE INDEX alert_deliveries_finished ON alert_deliveries (created_at, event_id) "
        "WHERE state <> 'pending'"
    )


#: A charge's ledger row, without what m017 drops (see there).
_LEAN_LEDGER = """
    CREATE TABLE ledger_lean (
        id INTEGER PRIMARY KEY,
        pool TEXT NOT NULL,
        connection_id TEXT NOT NULL,
        label TEXT NOT NULL,
        amount INTEGER NOT NULL,
        at REAL NOT NULL,
        month TEXT NOT NULL,
        day TEXT NOT NULL,
        reverses INTEGER REFERENCES ledger (id),
        reason TEXT
    )"""


@_migration
def m017_lean_ledger(db: Database) -> None:
    # Every charge appends a ledger row, and its commit writes one WAL frame (a 4 KiB page,
    # written and synced) per page it dirtied: six, of which two served nothing a charge
    # needs. AUTOINCREMENT updated sqlite_sequence at every insert; without it a new id is
    # still the largest plus one, the same ids, as this code never deletes a ledger row. And
    # `reverses UNIQUE` indexed every debit's NULL; the partial index holds only refunds,
    # keeps "a debit is reversed at most once", and serves `r.reverses = ?` lookups. SQLite
    # rebuilds a table to change its columns: foreign keys are off for the migration
    # (`SqliteDatabase._migrate`), and checked here before the migration is recorded.
    db.execute(_LEAN_LEDGER)
    db.execute(
        "INSERT INTO ledger_lean "
        "SELECT id, pool, connection_id, label, amount, at, month, day, reverses, reason "
        "FROM ledger"
    )
    db.execute("DROP TABLE ledger")
    db.execute("ALTER TABLE ledger_lean RENAME TO ledger")
    db.execute("CREATE INDEX ledger_pool_month ON ledger (pool, month)")
    db.execute(
        "CREATE UNIQUE INDEX ledger_reverses ON ledger (reverses) WHERE reverses IS NOT NULL"
    )
    for child in ("ledger", "plans", "charge_holds"):
        if db.execute(f"PRAGMA foreign_key_check({child})").fetchone() is not None:
            # What SQLite raises for a foreign key, so callers tell it apart alike.
            dangling = sqlite3.IntegrityError(f"a row of {child} refers to no ledger entry")
            dangling.sqlite_errorcode = sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY
            raise dangling


def _instant(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, UTC)  # as sqlite.database.instant, which imports this

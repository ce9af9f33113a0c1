"""The PostgreSQL schema, as numbered migrations (see `migrations.py` for how they apply).

The tables mirror the SQLite store's (`cleanair_storage/migrations.py` says why each exists);
instants are `timestamptz`, street-network arrays `bytea` (raw little-endian bytes, as
`StreetNetwork` declares them), and ledger ids come from an identity column.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeAlias

import psycopg

from cleanair_storage.claim_rows import cells_of_rows
from cleanair_storage.subscription_rows import SUBSCRIPTION_COLUMNS

#: A migration's step: a statement, or a function run on the migrating connection (in the
#: migration's transaction) where rows need computing that SQL cannot do as the code does.
Step: TypeAlias = str | Callable[[psycopg.Connection[tuple[Any, ...]]], None]


def _fill_subscription_cells(conn: psycopg.Connection[tuple[Any, ...]]) -> None:
    """Each stored subscription's cell, by `subscription_cell` itself (as SQLite's
    m015_evaluation_claims does): SQL's rounding is not Python's."""
    rows = conn.execute(f"SELECT {SUBSCRIPTION_COLUMNS} FROM subscriptions").fetchall()  # noqa: S608
    cells = cells_of_rows(rows, lambda at: at)  # TIMESTAMPTZ arrives as an aware datetime
    conn.execute(
        "UPDATE subscriptions SET cell = filled.cell "
        "FROM unnest(%s::text[], %s::text[]) AS filled (cell, id) "
        "WHERE subscriptions.id = filled.id",
        ([cell for cell, _ in cells], [id_ for _, id_ in cells]),
    )


#: (version, name, steps), in order. Append only: never edit a released migration.
MIGRATIONS: tuple[tuple[int, str, tuple[Step, ...]], ...] = (
    (
        1,
        "the store as of cleanair 0.1",
        (
            """
            CREATE TABLE users (
                name TEXT PRIMARY KEY,
                premium BOOLEAN NOT NULL,
                created_at TIMESTAMPTZ NOT NULL
            )""",
            """
            CREATE TABLE partners (
                name TEXT PRIMARY KEY,
                active BOOLEAN NOT NULL,
                created_at TIMESTAMPTZ NOT NULL
            )""",
            """
            CREATE TABLE connections (
                id TEXT PRIMARY KEY,
                owner_kind TEXT NOT NULL,
                owner_name TEXT NOT NULL,
                name TEXT NOT NULL,
                scopes TEXT NOT NULL,
                token_hash TEXT NOT NULL UNIQUE,
                created_at TIMESTAMPTZ NOT NULL,
                revoked_at TIMESTAMPTZ,
                seq BIGINT GENERATED ALWAYS AS IDENTITY  -- insertion order, for listings
            )""",
            "CREATE INDEX connections_owner ON connections (owner_kind, owner_name)",
            """
            CREATE TABLE pairing_codes (
                code_hash TEXT PRIMARY KEY,
                "user" TEXT NOT NULL,
                created_at TIMESTAMPTZ NOT NULL,
                expires_at TIMESTAMPTZ NOT NULL,
                used BOOLEAN NOT NULL DEFAULT false
            )""",
            """
            CREATE TABLE pairing_guesses (
                code_hash TEXT PRIMARY KEY,
                tried_at TIMESTAMPTZ NOT NULL
            )""",
            """
            CREATE TABLE ledger (
                id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                pool TEXT NOT NULL,
                connection_id TEXT NOT NULL,
                label TEXT NOT NULL,
                amount INTEGER NOT NULL,
                at TIMESTAMPTZ NOT NULL,
                month TEXT NOT NULL,
                day TEXT NOT NULL,
                reverses BIGINT UNIQUE REFERENCES ledger (id)
            )""",
            "CREATE INDEX ledger_pool_month ON ledger (pool, month)",
            """
            CREATE TABLE credit_windows (
                pool TEXT NOT NULL,
                "window" TEXT NOT NULL,
                used INTEGER NOT NULL,
                PRIMARY KEY (pool, "window")
            )""",
            """
            CREATE TABLE charge_holds (
                entry_id BIGINT PRIMARY KEY REFERENCES ledger (id),
                until TIMESTAMPTZ NOT NULL
            )""",
            "CREATE INDEX charge_holds_until ON charge_holds (until)",
            """
            CREATE TABLE rate_limits (
                key TEXT PRIMARY KEY,
                window_start BIGINT NOT NULL,
                count INTEGER NOT NULL
            )""",
            """
            CREATE TABLE client_labels (
                label TEXT PRIMARY KEY,
                created_at TIMESTAMPTZ NOT NULL
            )""",
            """
            CREATE TABLE access_points (
                bssid_hash TEXT PRIMARY KEY,
                lat DOUBLE PRECISION NOT NULL,
                lon DOUBLE PRECISION NOT NULL,
                accuracy_m DOUBLE PRECISION
            )""",
            """
            CREATE TABLE plans (
                id TEXT PRIMARY KEY,
                owner TEXT NOT NULL,
                connection_id TEXT NOT NULL,
                start_lat DOUBLE PRECISION NOT NULL,
                start_lon DOUBLE PRECISION NOT NULL,
                end_lat DOUBLE PRECISION NOT NULL,
                end_lon DOUBLE PRECISION NOT NULL,
                activity TEXT NOT NULL,
                start_time TIMESTAMPTZ NOT NULL,
                status TEXT NOT NULL CHECK (status IN ('pending', 'completed', 'failed')),
                created_at TIMESTAMPTZ NOT NULL,
                ledger_entry BIGINT REFERENCES ledger (id),
                result TEXT,
                error TEXT,
                finished_at TIMESTAMPTZ,
                attempts INTEGER NOT NULL DEFAULT 0,
                lease_until TIMESTAMPTZ
            )""",
            "CREATE INDEX plans_claim ON plans (status, created_at, id)",
            "CREATE INDEX plans_finished ON plans (finished_at)",
            "CREATE INDEX plans_ledger_entry ON plans (ledger_entry)",
            """
            CREATE TABLE street_networks (
                name TEXT PRIMARY KEY,
                nodes INTEGER NOT NULL,
                edges INTEGER NOT NULL,
                south DOUBLE PRECISION NOT NULL,
                west DOUBLE PRECISION NOT NULL,
                north DOUBLE PRECISION NOT NULL,
                east DOUBLE PRECISION NOT NULL,
                source TEXT NOT NULL,
                imported_at TIMESTAMPTZ,
                node_lat BYTEA NOT NULL,
                node_lon BYTEA NOT NULL,
                edge_from BYTEA NOT NULL,
                edge_to BYTEA NOT NULL,
                edge_length BYTEA NOT NULL,
                edge_class BYTEA NOT NULL,
                edge_access BYTEA NOT NULL,
                edge_traffic BYTEA
            )""",
        ),
    ),
    (
        2,
        "plans: claims, the lease's fencing token",
        (
            # As SQLite's m007_plan_claims (which says why).
            "ALTER TABLE plans ADD COLUMN claims INTEGER NOT NULL DEFAULT 0",
            "UPDATE plans SET claims = attempts",
        ),
    ),
    (
        3,
        "stations and their hourly observations",
        (
            # As SQLite's m008_station_observations (which says why). Ids and pollutants
            # compare byte-wise (COLLATE "C"), so listings come in the order every adapter
            # gives, whatever the database's collation.
            """
            CREATE TABLE stations (
                id TEXT COLLATE "C" PRIMARY KEY,
                name TEXT NOT NULL,
                lat DOUBLE PRECISION NOT NULL,
                lon DOUBLE PRECISION NOT NULL,
                station_type TEXT,
                area_type TEXT
            )""",
            """
            CREATE TABLE observations (
                station_id TEXT COLLATE "C" NOT NULL,
                pollutant TEXT COLLATE "C" NOT NULL,
                hour_end TIMESTAMPTZ NOT NULL,
                value DOUBLE PRECISION NOT NULL,
                PRIMARY KEY (station_id, pollutant, hour_end)
            )""",
            "CREATE INDEX observations_hour_end ON observations (hour_end)",
            """
            CREATE TABLE observations_version (
                id BOOLEAN PRIMARY KEY DEFAULT true CHECK (id),
                version BIGINT NOT NULL
            )""",
            "INSERT INTO observations_version (id, version) VALUES (true, 0)",
        ),
    ),
    (
        4,
        "street networks: street names per edge",
        (
            # As SQLite's m009_street_names (which says why).
            "ALTER TABLE street_networks ADD COLUMN edge_name BYTEA",
            "ALTER TABLE street_networks ADD COLUMN street_names BYTEA",
        ),
    ),
    (
        5,
        "ledger: operators' credit grants",
        (
            # As SQLite's m010_credit_grants (which says why).
            "ALTER TABLE ledger ADD COLUMN reason TEXT",
        ),
    ),
    (
        6,
        "street networks: water and green-space outlines",
        (
            # As SQLite's m011_network_areas (which says why).
            "ALTER TABLE street_networks ADD COLUMN area_kind BYTEA",
            "ALTER TABLE street_networks ADD COLUMN area_ring_end BYTEA",
            "ALTER TABLE street_networks ADD COLUMN area_lat BYTEA",
            "ALTER TABLE street_networks ADD COLUMN area_lon BYTEA",
        ),
    ),
    (
        7,
        "plans: departures plans",
        (
            # As SQLite's m012_departure_plans (which says why).
            "ALTER TABLE plans ADD COLUMN kind TEXT NOT NULL DEFAULT 'routes' "
            "CHECK (kind IN ('routes', 'departures'))",
            "ALTER TABLE plans ADD COLUMN latest_start_time TIMESTAMPTZ",
            "ALTER TABLE plans ADD COLUMN step_seconds INTEGER",
        ),
    ),
    (
        8,
        "alert subscriptions",
        (
            # As SQLite's m013_alert_subscriptions (which says why). Ids compare byte-wise
            # (COLLATE "C"), so listings come in the order every adapter gives.
            """
            CREATE TABLE subscriptions (
                id TEXT COLLATE "C" PRIMARY KEY,
                owner TEXT NOT NULL,
                connection_id TEXT NOT NULL,
                created_at TIMESTAMPTZ NOT NULL,
                target TEXT NOT NULL CHECK (target IN ('place', 'trip')),
                lat DOUBLE PRECISION NOT NULL,
                lon DOUBLE PRECISION NOT NULL,
                end_lat DOUBLE PRECISION,
                end_lon DOUBLE PRECISION,
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
                previous_generation_until TIMESTAMPTZ,
                disabled_reason TEXT,
                disabled_at TIMESTAMPTZ,
                state TEXT,
                state_version BIGINT NOT NULL DEFAULT 0
            )""",
            "CREATE INDEX subscriptions_owner ON subscriptions (owner, created_at, id)",
        ),
    ),
    (
        9,
        "alert feed and outbox",
        (
            # As SQLite's m014_alert_outbox (which says why). Ids compare byte-wise
            # (COLLATE "C"), so claims come in the order every adapter gives. The owner's
            # row of alert_feed_ends is the lock that orders recordings (postgres/
            # alert_outbox.py).
            """
            CREATE TABLE alert_feed (
                owner TEXT NOT NULL,
                cursor BIGINT NOT NULL,
                event_id TEXT COLLATE "C" NOT NULL UNIQUE,
                subscription_id TEXT NOT NULL,
                payload TEXT NOT NULL,
                created_at TIMESTAMPTZ NOT NULL,
                PRIMARY KEY (owner, cursor)
            )""",
            """
            CREATE TABLE alert_feed_ends (
                owner TEXT PRIMARY KEY,
                last_cursor BIGINT NOT NULL
            )""",
            """
            CREATE TABLE alert_deliveries (
                event_id TEXT COLLATE "C" PRIMARY KEY,
                subscription_id TEXT NOT NULL,
                owner TEXT NOT NULL,
                url TEXT NOT NULL,
                payload TEXT NOT NULL,
                created_at TIMESTAMPTZ NOT NULL,
                attempts INTEGER NOT NULL DEFAULT 0,
                next_attempt_at TIMESTAMPTZ NOT NULL,
                state TEXT NOT NULL DEFAULT 'pending'
                    CHECK (state IN ('pending', 'delivered', 'failed')),
                last_error TEXT,
                claimant TEXT,
                lease_until TIMESTAMPTZ
            )""",
            "CREATE INDEX alert_deliveries_due ON alert_deliveries (next_attempt_at, event_id) "
            "WHERE state = 'pending'",
            "CREATE INDEX alert_deliveries_subscription ON alert_deliveries (subscription_id) "
            "WHERE state = 'pending'",
        ),
    ),
    (
        10,
        "alert evaluation claims",
        (
            # As SQLite's m015_evaluation_claims (which says why). The cell compares
            # byte-wise (COLLATE "C"), so claims come in the order every adapter gives. The
            # columns are NOT NULL once every row has its value.
            "ALTER TABLE subscriptions ADD COLUMN next_evaluation_at TIMESTAMPTZ",
            'ALTER TABLE subscriptions ADD COLUMN cell TEXT COLLATE "C"',
            "ALTER TABLE subscriptions ADD COLUMN lease_claimant TEXT",
            "ALTER TABLE subscriptions ADD COLUMN lease_until TIMESTAMPTZ",
            "UPDATE subscriptions SET next_evaluation_at = created_at",
            _fill_subscription_cells,
            "ALTER TABLE subscriptions ALTER COLUMN next_evaluation_at SET NOT NULL",
            "ALTER TABLE subscriptions ALTER COLUMN cell SET NOT NULL",
            "CREATE INDEX subscriptions_due ON subscriptions (next_evaluation_at, cell, id) "
            "WHERE disabled_reason IS NULL",
        ),
    ),
    (
        11,
        "alert retention",
        (
            # As SQLite's m016_alert_retention (which says why).
            # Owners by their bytes, as the other adapters order them.
            "CREATE INDEX alert_feed_recorded ON alert_feed "
            '(created_at, owner COLLATE "C", cursor)',
            "CREATE INDEX alert_deliveries_finished ON alert_deliveries (created_at, event_id) "
            "WHERE state <> 'pending'",
        ),
    ),
)

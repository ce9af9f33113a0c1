"""A PostgreSQL server that goes away: calls are StoreUnavailable (nothing half-written),
and the store recovers by itself once the server is back.

This test runs its own server, so it can crash and restart it without disturbing the rest.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest
from psycopg.conninfo import conninfo_to_dict

from cleanair_core.access.accounts import User
from cleanair_core.credits.ledger import CreditLimits, Debit, Usage
from cleanair_core.errors import StoreUnavailable
from cleanair_storage.postgres import PostgresStore
from cleanair_storage.postgres.database import CONNECTION_OPTIONS, with_connection_options
from support.postgres import PostgresServer

AT = datetime(2026, 11, 24, 12, tzinfo=UTC)
LIMITS = CreditLimits(monthly=100, daily=100)


def test_an_outage_is_store_unavailable_and_the_store_recovers(own_server: PostgresServer) -> None:
    store = PostgresStore(own_server.database(), timeout=2.0)
    try:
        store.debit(Debit("user:alice", "c", "score", 1, AT), LIMITS)
        own_server.halt()  # the server crashes mid-service
        with pytest.raises(StoreUnavailable):  # what the readiness probe asks
            store.schema_is_current()
        with pytest.raises(StoreUnavailable):
            store.debit(Debit("user:alice", "c", "score", 5, AT), LIMITS)
        with pytest.raises(StoreUnavailable):
            store.add_user(User("bob", True, AT))
        own_server.resume()
        # Back by itself: a call may still wait past its timeout (503) for the pool's next
        # reconnection attempt, which backs off while the server is down.
        deadline = time.monotonic() + 30
        while True:
            try:
                usage = store.usage("user:alice", AT)
                break
            except StoreUnavailable:
                assert time.monotonic() < deadline, "the store did not recover"
        assert usage == Usage(month=1, day=1)  # the failed debit left nothing behind
        store.debit(Debit("user:alice", "c", "score", 2, AT), LIMITS)
        assert store.usage("user:alice", AT) == Usage(month=3, day=3)
        assert store.get_user("bob") is None
    finally:
        store.close()


def test_connections_get_network_limits_unless_the_url_sets_its_own() -> None:
    options = conninfo_to_dict(
        with_connection_options("postgresql://app@db.internal/cleanair?connect_timeout=3")
    )
    assert options["connect_timeout"] == "3"  # the operator's choice stands
    assert options["tcp_user_timeout"] == str(CONNECTION_OPTIONS["tcp_user_timeout"])
    assert options["keepalives"] == "1"
    assert (options["host"], options["dbname"], options["user"]) == (
        "db.internal",
        "cleanair",
        "app",
    )

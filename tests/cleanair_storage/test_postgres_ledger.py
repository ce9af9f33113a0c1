"""PostgreSQL's debit when a concurrent refund makes room between its statement and its look
at the windows: it tries again rather than fail with an internal error."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from cleanair_core.credits.ledger import CreditLimits, Debit, Usage
from cleanair_core.errors import CreditsExhausted
from cleanair_storage.postgres import PostgresStore
from cleanair_storage.postgres.ledger import PostgresLedger

AT = datetime(2026, 3, 10, 10, tzinfo=UTC)
LIMITS = CreditLimits(monthly=100, daily=10)
POOL = "user:alice"


@pytest.fixture
def store(postgres_url: str) -> Iterator[PostgresStore]:
    opened = PostgresStore(postgres_url)
    yield opened
    opened.close()


def test_a_refused_debit_that_then_sees_room_is_tried_again(
    store: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    spent = store.debit(Debit(POOL, "conn", "score", 10, AT), LIMITS)
    real_usage = PostgresLedger._usage
    looks: list[Usage] = []

    def refund_between(conn: object, pool: str, at: datetime) -> Usage:
        # The first look at the windows comes after another process's refund committed.
        if not looks:
            store.refund(spent.id, AT)
        looks.append(real_usage(conn, pool, at))  # type: ignore[arg-type]
        return looks[-1]

    monkeypatch.setattr(PostgresLedger, "_usage", staticmethod(refund_between))
    entry = store.debit(Debit(POOL, "conn", "score", 10, AT), LIMITS)
    assert entry.amount == 10
    assert looks == [Usage(month=0, day=0)]
    assert store.usage(POOL, AT) == Usage(month=10, day=10)


def test_a_debit_that_does_not_fit_still_names_its_window(store: PostgresStore) -> None:
    store.debit(Debit(POOL, "conn", "score", 10, AT), LIMITS)
    with pytest.raises(CreditsExhausted) as raised:
        store.debit(Debit(POOL, "conn", "score", 1, AT), LIMITS)
    assert raised.value.retry_after == 14 * 3600

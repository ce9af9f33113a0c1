"""LISTEN/NOTIFY: a plan made claimable in any process wakes the subscribers, on commit.

PostgreSQL delivers notices in commit order and never those of a rolled-back transaction;
the payload (the plan's id) shows which commit each notice belongs to.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from cleanair_core.credits.ledger import CreditLimits, Debit
from cleanair_core.geo import Point
from cleanair_core.routes import plans as plan_rules
from cleanair_core.routes.network import PlanActivityType
from cleanair_core.routes.plans import Plan, PlanRequest, PlanStatus
from cleanair_storage.postgres import PostgresStore, wakeups
from cleanair_storage.postgres.wakeups import CHANNEL, PostgresPlanWakeups

T0 = datetime(2026, 11, 24, 9, tzinfo=UTC)
LIMITS = CreditLimits(monthly=1000, daily=1000)
#: A bound that only turns a hang into a failure; every wait ends on its event.
WAIT_S = 10.0


def new_plan() -> Plan:
    request = PlanRequest(Point(60.17, 24.94), Point(60.16, 24.95), PlanActivityType.WALKING, T0)
    return Plan(uuid.uuid4(), "alice", "conn", request, PlanStatus.PENDING, T0)


class Notices:
    """A LISTENing connection of its own: the payloads, in delivery order."""

    def __init__(self, url: str) -> None:
        self.conn = psycopg.connect(url, autocommit=True)
        self.conn.execute(f"LISTEN {CHANNEL}")

    def next(self, count: int) -> list[str]:
        payloads = [n.payload for n in self.conn.notifies(timeout=WAIT_S, stop_after=count)]
        assert len(payloads) == count, payloads
        return payloads


@pytest.fixture
def notices(postgres_url: str) -> Iterator[Notices]:
    listening = Notices(postgres_url)
    yield listening
    listening.conn.close()


def test_a_submission_notifies_when_it_commits_not_before(
    postgres_url: str, notices: Notices
) -> None:
    store = PostgresStore(postgres_url)
    try:
        first, second = new_plan(), new_plan()
        with store.transaction() as work:
            plan_rules.submit(work, first, Debit("user:alice", "c", "plan", 25, T0), LIMITS)
            store_elsewhere = PostgresStore(postgres_url)  # another process submits meanwhile
            try:
                store_elsewhere.add_plan(second)
            finally:
                store_elsewhere.close()
        # `second` committed first, so its notice comes first: nothing was sent before commit.
        assert notices.next(2) == [str(second.id), str(first.id)]
        claimed = store.claim_plan(T0, timedelta(minutes=1))
        assert claimed is not None
        assert store.release_plan(claimed.id, claimed.claims)  # handed back: claimable again
        assert notices.next(1) == [str(claimed.id)]
    finally:
        store.close()


def test_a_rolled_back_submission_notifies_nobody(postgres_url: str, notices: Notices) -> None:
    store = PostgresStore(postgres_url)
    try:
        dropped, kept = new_plan(), new_plan()

        def submit_then_change_mind() -> None:
            with store.transaction() as work:
                work.add_plan(dropped)
                raise RuntimeError("changed my mind")

        with pytest.raises(RuntimeError):
            submit_then_change_mind()
        store.add_plan(kept)
        assert notices.next(1) == [str(kept.id)]  # the dropped one would have come first
    finally:
        store.close()


def test_a_subscription_wakes_its_callback_from_its_own_thread(postgres_url: str) -> None:
    store = PostgresStore(postgres_url)
    woken = threading.Event()
    subscription = PostgresPlanWakeups(postgres_url).subscribe(woken.set)
    try:
        assert subscription.listening.wait(WAIT_S)
        store.add_plan(new_plan())
        assert woken.wait(WAIT_S)
    finally:
        subscription.close()
        store.close()
    assert not subscription.listening.is_set()


def test_an_outage_is_logged_once_when_it_starts_and_once_when_it_ends(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Reconnection attempts every poll would write a warning each: an outage of minutes
    would bury the log."""
    real_connect = wakeups._connect
    attempts: list[int] = []
    failed_enough = threading.Event()

    def connect(url: str) -> psycopg.Connection[tuple[object, ...]]:
        attempts.append(1)
        if len(attempts) <= 5:  # the server is away for five attempts
            if len(attempts) == 5:
                failed_enough.set()
            raise psycopg.OperationalError("connection refused")
        return real_connect(url)

    monkeypatch.setattr(wakeups, "_connect", connect)
    with caplog.at_level("INFO", logger="cleanair.plans"):
        listener = wakeups._Listener(postgres_url, lambda: None, poll_s=0.01)
        try:
            assert failed_enough.wait(timeout=10)
            assert listener.listening.wait(timeout=10)
        finally:
            listener.close()
    messages = [r.getMessage() for r in caplog.records if r.name == "cleanair.plans"]
    assert messages == [
        "plan wake-ups lost their connection; reconnecting",
        "plan wake-ups are back",
    ]

"""Alert retention (`use_cases.alert_feed.prune_alert_history`): the feed entries and the
deliveries no longer owed, older than `Policy.alert_retention_seconds`, go a batch at a time;
what is owed or recent stays. The stores' own pruning is in the outbox contract suite."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from cleanair_core import CleanAir, ManualClock, Policy
from cleanair_core.alerts.outbox import DeliveryState, NewEvent
from cleanair_core.keys import TokenKeys, generate_key
from cleanair_core.use_cases import alert_feed
from cleanair_storage.memory import MemoryStore

NOW = datetime(2026, 11, 24, 9, 7, tzinfo=UTC)
RETENTION = timedelta(days=30)


def event(at: datetime, url: str | None = None) -> NewEvent:
    return NewEvent(
        event_id=uuid.uuid4(),
        owner="alice",
        subscription_id=uuid.uuid4(),
        payload="{}",
        created_at=at,
        url=url,
    )


@pytest.fixture
def core() -> CleanAir:
    policy = Policy(alert_retention_seconds=int(RETENTION.total_seconds()))
    return CleanAir(MemoryStore(), TokenKeys(generate_key()), policy, ManualClock(NOW))


def test_history_past_the_retention_goes_a_batch_at_a_time_and_the_rest_stays(
    core: CleanAir, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(alert_feed, "PRUNE_BATCH", 2)
    cutoff = NOW - RETENTION
    old = [event(cutoff - timedelta(seconds=i + 1)) for i in range(5)]
    delivered, owed = (
        event(cutoff - timedelta(hours=1), "https://a.example/h"),
        event(cutoff - timedelta(hours=2), "https://a.example/h"),
    )
    recent = event(cutoff)  # exactly the retention old: kept
    store = core.store
    store.record_alert_events([*old, delivered, owed, recent])
    lease = NOW + timedelta(minutes=1)
    assert len(store.claim_deliveries("w", NOW, lease, 2)) == 2
    assert store.finish_delivery(delivered.event_id, "w", DeliveryState.DELIVERED, NOW)
    # Seven old entries and the delivered delivery, in four batches of at most 2 + 2.
    assert core.prune_alert_history() == 7 + 1
    assert [e.event_id for e in store.alert_feed("alice", 0, 10)] == [recent.event_id]
    assert store.owed_delivery(delivered.event_id) is None
    assert store.owed_delivery(owed.event_id) is not None  # still owed: kept
    assert core.prune_alert_history() == 0


def test_the_retention_is_at_least_a_day() -> None:
    with pytest.raises(ValueError, match="alert_retention_seconds"):
        Policy(alert_retention_seconds=24 * 3600 - 1)
    assert Policy(alert_retention_seconds=24 * 3600).alert_retention_seconds == 24 * 3600

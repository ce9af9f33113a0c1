"""End to end: two `cleanair worker` processes on one database never decide the same event
twice (issue 32), on PostgreSQL (SKIP LOCKED claims) and on a SQLite file.

`cleanair serve` plans nothing (`CLEANAIR_PLAN_WORKERS=0`): only the two workers evaluate and
deliver. A few hundred subscriptions of many users, stored through the store API on the same
database, all alert at once (today's forecast at or past category 0, sent from 00:00 UTC);
a third of them have the webhook of a real receiver process that verifies every request
with the Standard Webhooks reference library.

The air comes from a stand-in for Open-Meteo that holds every request until told: the first
worker is caught mid-round holding the first wave's claims, the second then claims the
second wave, and both are released together, so both store their outcomes, for the same
owners, at once. Then every subscription's event is in its owner's feed exactly once,
debited once under the alerts label, its state saved once (version 1); the receiver got
every webhook, each verified, any repeat with the same `webhook-id` and body; and each
worker's own log shows rounds it recorded events in.
"""

from __future__ import annotations

import json
import signal
import time
from collections import Counter, defaultdict
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from cleanair_core.alerts.costs import PLACE_ALERT_COST
from cleanair_core.alerts.subscriptions import Subscription
from cleanair_core.alerts.webhook_secrets import webhook_secret
from cleanair_core.geo import Point
from cleanair_core.keys import TokenKeys, generate_key
from cleanair_core.ports import Store
from cleanair_core.use_cases.alert_rounds import ALERTS_LABEL
from cleanair_storage.postgres import PostgresStore
from cleanair_storage.sqlite import SqliteStore
from support.alert_load import HELSINKI, workload
from support.fake_open_meteo import FakeOpenMeteo
from support.postgres import PostgresServer
from support.servers import pair, running_server, server_env, spawn, stop
from support.webhook_receiver import Receiver, running_receiver

pytestmark = pytest.mark.e2e

OWNERS = [f"user-{k:02}" for k in range(15)]
#: Per owner and wave: two waves fill each owner's 20 subscriptions, 300 in all.
PER_WAVE = 10
#: Generous on a loaded 2-core machine: start-up, a few hundred events and their webhooks.
WITHIN_S = 240.0
#: Seconds between looks at the database and the receiver while the workers work.
POLL_S = 0.25


@pytest.fixture
def receiver(tmp_path: Path) -> Iterator[Receiver]:
    with running_receiver(tmp_path / "receiver") as running:
        yield running


@pytest.fixture(params=["postgres", "sqlite"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The database both workers share: a fresh PostgreSQL database, or one SQLite file."""
    if request.param == "postgres":
        server: PostgresServer = request.getfixturevalue("postgres")
        return server.database()
    return str(tmp_path / "var" / "cleanair.db")


def open_store(database: str) -> Store:
    if database.startswith("postgresql://"):
        return PostgresStore(database)
    return SqliteStore(Path(database))


@contextmanager
def alert_worker(env: Mapping[str, str], log: Path) -> Iterator[None]:
    """A `cleanair worker`, stopped with SIGTERM at the end (its log then complete)."""
    process = spawn(env, log, "worker", "--concurrency", "1")
    try:
        yield
        assert process.poll() is None, log.read_text()[-4000:]
    finally:
        stop(process, signal.SIGTERM, timeout=30)


def logged_lines(log: Path) -> list[dict[str, Any]]:
    """The JSON lines of a worker's log (whole lines only: it may be writing the last)."""
    lines = log.read_text().split("\n")[:-1]
    return [json.loads(line) for line in lines if line.startswith("{")]


def rounds_logged(log: Path) -> list[dict[str, Any]]:
    """The worker's "alert round" lines (DEBUG: one per round that claimed something)."""
    return [line for line in logged_lines(log) if line.get("message") == "alert round"]


def feeds(store: Store, subscriptions: Sequence[Subscription]) -> dict[str, list[Any]]:
    owners = {subscription.owner for subscription in subscriptions}
    return {owner: store.alert_feed(owner, 0, 1000) for owner in owners}


def wait_until(check: Any, what: str, logs: Sequence[Path]) -> None:
    """Poll, bounded, until `check()`; on time out, fail with the errors the workers logged
    (a round that failed leaves its claims to wait out their lease)."""
    deadline = time.monotonic() + WITHIN_S
    while not check():
        if time.monotonic() > deadline:
            errors = [
                line
                for log in logs
                for line in logged_lines(log)
                if line.get("level") in {"ERROR", "WARNING"}
            ]
            raise AssertionError(f"{what}: not within {WITHIN_S} s; the workers' errors: {errors}")
        time.sleep(POLL_S)


def test_two_workers_decide_every_event_once_and_deliver_every_webhook(
    tmp_path: Path, database: str, receiver: Receiver
) -> None:
    key = generate_key()
    key_file = tmp_path / "shared.key"
    key_file.write_text(key.hex() + "\n")
    with FakeOpenMeteo().running() as upstream:
        env = server_env(
            tmp_path,
            CLEANAIR_DATABASE=database,
            CLEANAIR_SECRET_KEY_FILE=str(key_file),
            CLEANAIR_PLAN_WORKERS="0",
            CLEANAIR_AIR_QUALITY_SOURCE="open-meteo",
            CLEANAIR_OPEN_METEO_URL=upstream.url,
            CLEANAIR_OPEN_METEO_TIMEOUT="120",
            CLEANAIR_WEBHOOK_ALLOW_HTTP="true",
            CLEANAIR_WEBHOOK_ALLOWED_NETWORKS="127.0.0.0/8",
            CLEANAIR_WEBHOOK_PORTS=str(receiver.port),
            CLEANAIR_ALERT_WORKER_IDLE_SECONDS="0.2",
            # The workers' rounds are logged at DEBUG: which worker did what.
            CLEANAIR_LOG_LEVEL="debug",
        )
        with running_server(env, tmp_path / "serve.log") as server:
            headers = pair(env, server.base, user=OWNERS[0])
            store = open_store(database)
            try:
                created_at = datetime.now(UTC) - timedelta(minutes=1)
                waves = [
                    workload(
                        OWNERS,
                        created_at,
                        per_owner=PER_WAVE,
                        origin=origin,
                        cells=1,
                        webhook_url=receiver.url,
                        seed=wave,
                    )
                    for wave, origin in enumerate([HELSINKI, Point(HELSINKI.lat, 25.0)])
                ]
                subscriptions = [subscription for wave in waves for subscription in wave]
                hooked = {s.id: s for s in subscriptions if s.webhook_url is not None}
                keys = TokenKeys(key)
                receiver.configure([webhook_secret(keys, i, 1).as_text() for i in hooked])

                logs = [tmp_path / "worker-1.log", tmp_path / "worker-2.log"]
                upstream.hold()
                for subscription in waves[0]:
                    store.add_subscription(subscription)
                with alert_worker(env, logs[0]):
                    # The first worker holds the first wave's claims, waiting for the air.
                    assert upstream.waiting.acquire(timeout=WITHIN_S)
                    for subscription in waves[1]:
                        store.add_subscription(subscription)
                    with alert_worker(env, logs[1]):
                        # The second claims the second wave (the first's are leased).
                        assert upstream.waiting.acquire(timeout=WITHIN_S)
                        upstream.release()
                        wait_until(
                            lambda: (
                                sum(map(len, feeds(store, subscriptions).values()))
                                >= len(subscriptions)
                            ),
                            "every event in the feeds",
                            logs,
                        )
                        wait_until(
                            lambda: (
                                {d.webhook_id for d in receiver.deliveries()}
                                >= {f"msg_{e.event_id}" for e in owed_events(store, hooked)}
                            ),
                            "every webhook at the receiver",
                            logs,
                        )
                        api_feed = httpx.get(
                            f"{server.base}/ext/v1/alerts/events",
                            headers=headers,
                            timeout=30,
                        )
                told = feeds(store, subscriptions)
                assert_decided_once(store, subscriptions, told)
            finally:
                store.close()

    # The API pages the same feed: the first owner's events, each once.
    assert api_feed.status_code == 200, api_feed.text
    listed = [event["id"] for event in api_feed.json()["events"]]
    assert listed == [str(entry.event_id) for entry in told[OWNERS[0]]]

    # Every webhook arrived, verified; a repeat only with the same id and body.
    expected = {f"msg_{entry.event_id}": entry for entries in told.values() for entry in entries}
    got = receiver.deliveries()
    assert all(delivery.verified for delivery in got), [d.reason for d in got]
    assert all(delivery.status == 200 for delivery in got)
    webhook_ids = {delivery.webhook_id for delivery in got}
    assert webhook_ids == {i for i, e in expected.items() if e.subscription_id in hooked}
    for delivery in got:
        entry = expected[str(delivery.webhook_id)]
        assert json.loads(delivery.body) == json.loads(entry.payload)

    # Both workers decided events, and between them each once, losing no compare-and-set.
    logged = [rounds_logged(log) for log in logs]
    for mine in logged:
        assert sum(line["recorded"] for line in mine) > 0, "each worker recorded events"
    assert len({line["claimant"] for mine in logged for line in mine}) == 2
    every = [line for mine in logged for line in mine]
    assert sum(line["recorded"] for line in every) == len(subscriptions)
    assert sum(line["lost"] for line in every) == 0


def owed_events(store: Store, hooked: Mapping[Any, Subscription]) -> list[Any]:
    """The feed entries of the subscriptions with a webhook, recorded so far."""
    owners = {subscription.owner for subscription in hooked.values()}
    return [
        entry
        for owner in owners
        for entry in store.alert_feed(owner, 0, 1000)
        if entry.subscription_id in hooked
    ]


def assert_decided_once(
    store: Store, subscriptions: Sequence[Subscription], told: Mapping[str, Sequence[Any]]
) -> None:
    """Each subscription's one event is in its owner's feed once (cursors without a gap),
    debited once under the alerts label, and its state was saved once."""
    owned: dict[str, set[Any]] = defaultdict(set)
    for subscription in subscriptions:
        owned[subscription.owner].add(subscription.id)
    for owner, theirs in owned.items():
        feed = told[owner]
        assert Counter(entry.subscription_id for entry in feed) == Counter(list(theirs))
        assert [entry.cursor for entry in feed] == list(range(1, len(feed) + 1))
        debits = [entry.amount for entry in store.entries(owner) if entry.label == ALERTS_LABEL]
        assert debits == [PLACE_ALERT_COST] * len(feed)
    for subscription in subscriptions:
        state = store.load_subscription_state(subscription.id)
        assert state is not None
        assert state.version == 1

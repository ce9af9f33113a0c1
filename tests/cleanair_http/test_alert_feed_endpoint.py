"""GET /ext/v1/alerts/events: a user's alert events in order, paged by cursor, for clients
that poll (issue 32), with the extension's auth, polling limit and error envelope."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from cleanair_core import CleanAir, ManualClock
from cleanair_core.access.scopes import Scope
from cleanair_core.alerts.outbox import NewEvent
from cleanair_runtime.composition.settings import Settings
from support.http import Client, MakeClient, bearer, pair, partner_token, user_token

FEED = "/ext/v1/alerts/events"
#: 15 seconds past the minute: a poll window resets in 45 s.
NOW = datetime(2026, 11, 22, 10, 0, 15, tzinfo=UTC)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(NOW)


@pytest.fixture
def client(make_client: MakeClient) -> Client:
    return make_client(Settings(plan_workers=0))


@pytest.fixture
def token(core: CleanAir, client: Client) -> str:
    return pair(core, client)


def record(core: CleanAir, owner: str, count: int) -> list[uuid.UUID]:
    """`count` events for `owner`, each with a payload naming its position."""
    subscription = uuid.uuid4()
    events = [
        NewEvent(
            event_id=uuid.uuid4(),
            owner=owner,
            subscription_id=subscription,
            payload=json.dumps(
                {"type": "air.alert", "timestamp": NOW.isoformat(), "data": {"n": n}}
            ),
            created_at=NOW + timedelta(seconds=n),
        )
        for n in range(count)
    ]
    return core.store.record_alert_events(events)


def read(client: Client, token: str, **query: Any) -> Any:
    return client.get(FEED, params=query, headers=bearer(token))


def test_an_empty_feed_answers_no_events_and_the_cursor_asked_for(
    client: Client, token: str
) -> None:
    response = read(client, token)
    assert response.status_code == 200
    assert response.json() == {"events": [], "next_after": 0, "more": False}
    assert read(client, token, after=7).json() == {"events": [], "next_after": 7, "more": False}


def test_events_page_in_order_from_the_cursor_with_their_webhook_bodies(
    core: CleanAir, client: Client, token: str
) -> None:
    ids = record(core, "alice", 5)
    first = read(client, token, limit=2).json()
    assert [e["cursor"] for e in first["events"]] == [1, 2]
    assert first["next_after"] == 2
    assert first["more"] is True
    event = first["events"][0]
    assert set(event) == {"cursor", "id", "subscription_id", "recorded_at", "payload"}
    assert event["id"] == str(ids[0])
    assert event["payload"] == {"type": "air.alert", "timestamp": NOW.isoformat(), "data": {"n": 0}}
    assert datetime.fromisoformat(event["recorded_at"]) == NOW
    rest = read(client, token, after=2).json()
    assert [e["data"]["n"] for e in (x["payload"] for x in rest["events"])] == [2, 3, 4]
    assert rest["next_after"] == 5
    assert rest["more"] is False
    assert [e["id"] for e in first["events"] + rest["events"]] == [str(i) for i in ids]


def test_the_default_page_holds_50_and_a_page_at_most_100(
    core: CleanAir, client: Client, token: str
) -> None:
    record(core, "alice", 120)
    assert len(read(client, token).json()["events"]) == 50
    full = read(client, token, limit=100).json()
    assert len(full["events"]) == 100
    assert full["more"] is True


def test_a_user_reads_only_their_own_events_from_any_of_their_connections(
    core: CleanAir, client: Client, token: str
) -> None:
    record(core, "bob", 2)
    mine = record(core, "alice", 1)
    other_app = pair(core, client, "alice", name="second app")
    for each in (token, other_app):
        assert [e["id"] for e in read(client, each).json()["events"]] == [str(mine[0])]


def test_reading_is_free_and_open_to_a_lapsed_premium_user(
    core: CleanAir, client: Client, token: str
) -> None:
    record(core, "alice", 1)
    core.set_premium("alice", False)
    assert len(read(client, token).json()["events"]) == 1
    core.set_premium("alice", True)
    assert client.get("/v1/quota", headers=bearer(token)).json()["used"] == 0


def test_a_token_is_needed(client: Client) -> None:
    assert client.get(FEED).status_code == 401
    refused = client.get(FEED, headers=bearer("cla_live_" + "x" * 43))
    assert refused.status_code == 401


def test_the_air_scope_and_a_user_owned_connection_are_needed(
    core: CleanAir, client: Client
) -> None:
    no_scope = user_token(core, "alice", [Scope.ROUTES_PLAN])
    assert read(client, no_scope).status_code == 403
    partner = partner_token(core, [Scope.AQ_READ])
    refused = read(client, partner)
    assert refused.status_code == 403
    assert refused.json() == {"detail": "Partner connections cannot do this"}


@pytest.mark.parametrize(
    ("query", "field", "rule"),
    [
        ({"after": "-1"}, "after", "type"),
        ({"after": "1.5"}, "after", "type"),
        ({"after": "secret-value"}, "after", "type"),
        ({"after": "9" * 19}, "after", "type"),
        ({"limit": "0"}, "limit", "minimum"),
        ({"limit": "101"}, "limit", "maximum"),
        ({"limit": "ten"}, "limit", "type"),
    ],
)
def test_a_bad_cursor_or_limit_is_422_naming_the_parameter_never_its_value(
    client: Client, token: str, query: dict[str, str], field: str, rule: str
) -> None:
    response = read(client, token, **query)
    assert response.status_code == 422
    answer = response.json()
    assert answer["detail"] == "Request validation failed"
    assert [(e["field"], e["rule"]) for e in answer["errors"]] == [(field, rule)]
    assert next(iter(query.values())) not in response.text


def test_polling_shares_the_plan_polls_limit_of_60_a_minute(
    client: Client, token: str, clock: ManualClock
) -> None:
    for _ in range(60):
        assert read(client, token).status_code == 200
    limited = read(client, token)
    assert limited.status_code == 429
    assert limited.headers["retry-after"] == "45"
    clock.advance(45)
    assert read(client, token).status_code == 200


def test_the_openapi_document_describes_the_feed(client: Client) -> None:
    document = client.get("/schema/openapi.json").json()
    operation = document["paths"][FEED]["get"]
    assert set(operation["responses"]) == {"200", "401", "403", "422", "429", "503"}
    assert {p["name"] for p in operation["parameters"]} == {"after", "limit"}

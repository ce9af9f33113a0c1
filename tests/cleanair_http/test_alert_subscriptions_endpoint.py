"""The alert subscriptions under /ext/v1/alerts (issue 32): create, list, show, delete and
rotate a webhook secret, through the app, with the extension's auth, limits and error
envelope; on the in-memory store, and once on SQLite.

The webhook secrets shown are checked the way a receiver would check them: a delivery signed
by the service's own signing code verifies with the secret shown, by the reference library
(`standardwebhooks`).
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta, tzinfo
from pathlib import Path
from typing import Any, Self
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from litestar.testing import TestClient
from standardwebhooks import webhooks
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from cleanair_core import CleanAir, ManualClock, Policy, TokenKeys, generate_key
from cleanair_core.access.scopes import Scope
from cleanair_core.alerts.destinations import DestinationPolicy
from cleanair_core.alerts.outbox import DeliveryState, NewEvent
from cleanair_core.alerts.signatures import message_id, sign
from cleanair_core.alerts.subscriptions import MAX_SUBSCRIPTIONS_PER_USER
from cleanair_core.alerts.webhook_secrets import signing_secrets
from cleanair_core.credits.ledger import CreditLimits
from cleanair_core.ports import Sources
from cleanair_core.use_cases.alerts import ROTATION_OVERLAP
from cleanair_http.app import create_app
from cleanair_http.offloading import here_or_in_thread, in_thread
from cleanair_runtime.composition.bootstrap import policy_from
from cleanair_runtime.composition.settings import Settings, SettingsError
from cleanair_storage.memory import MemoryStore
from cleanair_storage.sqlite import SqliteStore
from support.http import Client, MakeClient, bearer, pair, partner_token, user_token

SUBSCRIPTIONS = "/ext/v1/alerts/subscriptions"
NOW = datetime(2026, 11, 22, 10, 0, 15, tzinfo=UTC)
#: Requests a connection may make in a minute here: room for every test's calls, and few
#: enough for the rate-limit test to reach.
REQUESTS_PER_MINUTE = 40
DOCS = Path(__file__).parents[2] / "docs"

PLACE: dict[str, Any] = {
    "target": {"type": "place", "lat": 60.1699, "lon": 24.9384},
    "index": "eu_eaqi_2024",
    "threshold": 3,
    "direction": "worse",
    "audience": "general",
    "kind": {"type": "observed", "hysteresis_categories": 2, "hysteresis_hours": 3},
    "timezone": "Europe/Helsinki",
    "quiet_hours": {"start": "22:00", "end": "07:00"},
    "webhook_url": "https://hooks.example.com/cleanair",
}
TRIP: dict[str, Any] = {
    "target": {
        "type": "trip",
        "start": {"latitude": 60.1699, "longitude": 24.9384},
        "end": {"latitude": 60.1841, "longitude": 24.9503},
        "activity_type": "cycling",
        "departure": "07:45",
        "days": [5, 1, 3],
    },
    "threshold": 1,
    "direction": "better",
    "audience": "sensitive",
    "kind": {"type": "forecast", "target_day": "tomorrow", "send_at": "21:00"},
    "timezone": "America/New_York",
}
FEED_ONLY = {key: value for key, value in PLACE.items() if key != "webhook_url"}


def make_core(store: Any, clock: ManualClock, sources: Sources) -> CleanAir:
    policy = Policy(
        credits=CreditLimits(monthly=1000, daily=100), requests_per_minute=REQUESTS_PER_MINUTE
    )
    return CleanAir(
        store,
        TokenKeys(generate_key()),
        policy,
        clock,
        sources=sources,
        offload=in_thread,
        store_calls=here_or_in_thread,
    )


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(NOW)


@pytest.fixture
def core(clock: ManualClock, sources: Sources) -> CleanAir:
    return make_core(MemoryStore(), clock, sources)


@pytest.fixture
def client(make_client: MakeClient) -> Client:
    return make_client(Settings(plan_workers=0))


@pytest.fixture
def token(core: CleanAir, client: Client) -> str:
    return pair(core, client)


def create(client: Client, token: str, body: Any = None) -> Any:
    return client.post(SUBSCRIPTIONS, json=PLACE if body is None else body, headers=bearer(token))


def created(client: Client, token: str, body: Any = None) -> dict[str, Any]:
    response = create(client, token, body)
    assert response.status_code == 201, response.text
    answer: dict[str, Any] = response.json()
    return answer


def one(client: Client, token: str, subscription_id: str) -> Any:
    return client.get(f"{SUBSCRIPTIONS}/{subscription_id}", headers=bearer(token))


def rotate(client: Client, token: str, subscription_id: str) -> Any:
    return client.post(f"{SUBSCRIPTIONS}/{subscription_id}/rotate-secret", headers=bearer(token))


def remove(client: Client, token: str, subscription_id: str) -> Any:
    return client.delete(f"{SUBSCRIPTIONS}/{subscription_id}", headers=bearer(token))


def every_call(client: Client, token: str | None, subscription_id: str) -> dict[str, Any]:
    """Each endpoint called once with `token` (None: no Authorization header)."""
    headers = {} if token is None else bearer(token)
    path = f"{SUBSCRIPTIONS}/{subscription_id}"
    return {
        "create": client.post(SUBSCRIPTIONS, json=PLACE, headers=headers),
        "list": client.get(SUBSCRIPTIONS, headers=headers),
        "show": client.get(path, headers=headers),
        "rotate": client.post(f"{path}/rotate-secret", headers=headers),
        "delete": client.delete(path, headers=headers),
    }


def statuses(responses: dict[str, Any]) -> dict[str, int]:
    return {name: response.status_code for name, response in responses.items()}


def request_body(subscription: dict[str, Any]) -> dict[str, Any]:
    """What a shown subscription says of the request that made it."""
    kept = ("target", "index", "threshold", "direction", "audience", "kind", "timezone")
    shown = {key: subscription[key] for key in kept}
    for optional in ("quiet_hours", "webhook_url"):
        if subscription[optional] is not None:
            shown[optional] = subscription[optional]
    return shown


@contextmanager
def reference_clock(instant: datetime) -> Iterator[None]:
    """The reference library's clock set to `instant` (it reads `datetime.now` itself)."""

    class Frozen(datetime):
        @classmethod
        def now(cls, tz: tzinfo | None = None) -> Self:
            return cls.fromtimestamp(instant.timestamp(), tz)

    with mock.patch.object(webhooks, "datetime", Frozen):
        yield


def delivery(core: CleanAir, subscription_id: str, at: datetime) -> tuple[bytes, dict[str, str]]:
    """A webhook request for the subscription at `at`, signed as the delivery loop signs:
    with the secrets `signing_secrets` gives for the stored generation and overlap."""
    stored = core.store.get_subscription(uuid.UUID(subscription_id), "alice")
    assert stored is not None
    secrets = signing_secrets(
        core.keys, stored.id, stored.secret_generation, stored.previous_generation_until, at
    )
    payload = json.dumps({"type": "air.alert", "data": {"subscription_id": subscription_id}})
    body = payload.encode()
    return body, sign(secrets, message_id(str(uuid.uuid4())), at, body)


def verifies(secret: str, body: bytes, headers: dict[str, str], at: datetime) -> bool:
    with reference_clock(at):
        try:
            Webhook(secret).verify(body, headers)
        except WebhookVerificationError:
            return False
    return True


# -- creating, reading and deleting ----------------------------------------------------------
def test_a_subscription_is_created_shown_listed_and_deleted(client: Client, token: str) -> None:
    answer = created(client, token)
    subscription = answer["subscription"]
    assert request_body(subscription) == PLACE
    assert subscription["created_at"] == "2026-11-22T10:00:15Z"
    assert subscription["status"] == "active"
    assert subscription["disabled_reason"] is subscription["disabled_at"] is None
    assert subscription["previous_secret_valid_until"] is None
    uuid.UUID(subscription["id"])

    shown = one(client, token, subscription["id"])
    assert shown.status_code == 200
    assert shown.json() == subscription
    listed = client.get(SUBSCRIPTIONS, headers=bearer(token))
    assert listed.status_code == 200
    assert listed.json() == {"subscriptions": [subscription], "limit": MAX_SUBSCRIPTIONS_PER_USER}

    gone = remove(client, token, subscription["id"])
    assert (gone.status_code, gone.content) == (204, b"")
    assert one(client, token, subscription["id"]).status_code == 404
    assert client.get(SUBSCRIPTIONS, headers=bearer(token)).json()["subscriptions"] == []
    assert remove(client, token, subscription["id"]).status_code == 404


def test_deleting_gives_up_the_deliveries_owed_and_keeps_the_feed(
    client: Client, token: str, core: CleanAir
) -> None:
    subscription = created(client, token)["subscription"]
    subscription_id = uuid.UUID(subscription["id"])
    event_id = uuid.uuid4()
    owed = NewEvent(
        event_id=event_id,
        owner="alice",
        subscription_id=subscription_id,
        payload="{}",
        created_at=NOW,
        url=PLACE["webhook_url"],
    )
    assert core.store.record_alert_events([owed]) == [event_id]
    assert remove(client, token, subscription["id"]).status_code == 204
    given_up = core.store.owed_delivery(event_id)
    assert given_up is not None
    assert (given_up.state, given_up.last_error) == (DeliveryState.FAILED, "subscription deleted")
    assert [entry.event_id for entry in core.store.alert_feed("alice", 0, 10)] == [event_id]


def test_a_trip_subscription_keeps_its_days_and_times(
    client: Client, token: str, core: CleanAir
) -> None:
    subscription = created(client, token, TRIP)["subscription"]
    shown = request_body(subscription)
    # The days come back in order, each once; the index is the place's own (null).
    assert shown == {**TRIP, "index": None, "target": {**TRIP["target"], "days": [1, 3, 5]}}
    stored = core.store.get_subscription(uuid.UUID(subscription["id"]), "alice")
    assert stored is not None
    # The subscription remembers the connection that made it.
    (connection,) = core.connections_of_user("alice")
    assert stored.connection_id == str(connection.id)


def test_defaults_fill_what_the_body_leaves_out(client: Client, token: str) -> None:
    body = {
        "target": {"type": "place", "lat": 51.5, "lon": -0.12},
        "threshold": 2,
        "kind": {"type": "observed"},
        "timezone": "Europe/London",
    }
    subscription = created(client, token, body)["subscription"]
    assert subscription["index"] is None
    assert (subscription["direction"], subscription["audience"]) == ("worse", "general")
    assert subscription["kind"] == {
        "type": "observed",
        "hysteresis_categories": 1,
        "hysteresis_hours": 2,
    }
    assert subscription["quiet_hours"] is subscription["webhook_url"] is None


def test_every_connection_of_the_user_sees_the_same_subscriptions(
    core: CleanAir, client: Client, token: str
) -> None:
    subscription = created(client, token)["subscription"]
    other = pair(core, client, name="kitchen")
    assert one(client, other, subscription["id"]).json() == subscription
    assert remove(client, other, subscription["id"]).status_code == 204


def test_a_disabled_subscription_shows_why_and_when(
    core: CleanAir, client: Client, token: str
) -> None:
    subscription = created(client, token)["subscription"]
    at = NOW + timedelta(hours=30)
    reason = "the endpoint kept failing (status 404)"
    assert core.store.disable_subscription(uuid.UUID(subscription["id"]), reason, at)
    shown = one(client, token, subscription["id"]).json()
    assert (shown["status"], shown["disabled_reason"]) == ("disabled", reason)
    assert shown["disabled_at"] == "2026-11-23T16:00:15Z"
    listed = client.get(SUBSCRIPTIONS, headers=bearer(token)).json()["subscriptions"]
    assert listed == [shown]


def test_nothing_is_charged(client: Client, token: str) -> None:
    subscription_id = created(client, token)["subscription"]["id"]
    assert one(client, token, subscription_id).status_code == 200
    assert client.get(SUBSCRIPTIONS, headers=bearer(token)).status_code == 200
    assert rotate(client, token, subscription_id).status_code == 200
    assert remove(client, token, subscription_id).status_code == 204
    quota = client.get("/v1/quota", headers=bearer(token)).json()
    assert (quota["used"], quota["daily_used"]) == (0, 0)


# -- the webhook secret ----------------------------------------------------------------------
def test_the_secret_is_shown_once_and_verifies_what_the_service_signs(
    core: CleanAir, client: Client, token: str
) -> None:
    answer = created(client, token)
    secret = answer["webhook_secret"]
    assert re.fullmatch(r"whsec_[A-Za-z0-9+/]{43}=", secret)
    subscription_id = answer["subscription"]["id"]
    # Never again: not when shown, not when listed.
    assert "whsec_" not in one(client, token, subscription_id).text
    assert "whsec_" not in client.get(SUBSCRIPTIONS, headers=bearer(token)).text

    at = datetime.now(UTC)
    body, headers = delivery(core, subscription_id, at)
    assert verifies(secret, body, headers, at)
    # Another subscription's secret does not.
    other = created(client, token)["webhook_secret"]
    assert other != secret
    assert not verifies(other, body, headers, at)


def test_a_feed_only_subscription_has_no_secret(client: Client, token: str) -> None:
    answer = created(client, token, FEED_ONLY)
    assert answer["webhook_secret"] is None
    assert answer["subscription"]["webhook_url"] is None
    refused = rotate(client, token, answer["subscription"]["id"])
    assert refused.status_code == 422
    assert refused.json()["errors"] == [
        {
            "field": "",
            "rule": "invalid",
            "message": "must be a subscription with a webhook_url: a feed-only one has no secret",
        }
    ]


def test_rotation_signs_with_both_secrets_for_a_day_then_the_new_one(
    core: CleanAir, client: Client, token: str, clock: ManualClock
) -> None:
    answer = created(client, token)
    old, subscription_id = answer["webhook_secret"], answer["subscription"]["id"]
    clock.advance(hours=1)
    rotated = rotate(client, token, subscription_id)
    assert rotated.status_code == 200
    new = rotated.json()["webhook_secret"]
    assert new.startswith("whsec_")
    assert new != old
    until = NOW + timedelta(hours=1) + ROTATION_OVERLAP
    assert timedelta(hours=24) == ROTATION_OVERLAP
    assert rotated.json()["previous_secret_valid_until"] == "2026-11-23T11:00:15Z"
    assert rotated.json()["subscription"]["previous_secret_valid_until"] == "2026-11-23T11:00:15Z"
    assert "whsec_" not in one(client, token, subscription_id).text

    during = until - timedelta(minutes=1)
    body, headers = delivery(core, subscription_id, during)
    assert verifies(new, body, headers, during)
    assert verifies(old, body, headers, during)
    after = until + timedelta(seconds=1)
    body, headers = delivery(core, subscription_id, after)
    assert verifies(new, body, headers, after)
    assert not verifies(old, body, headers, after)

    # Each rotation gives a secret of its own.
    again = rotate(client, token, subscription_id).json()["webhook_secret"]
    assert again not in (old, new)


# -- who may -------------------------------------------------------------------------------
def test_without_a_valid_token_every_endpoint_is_401(client: Client, token: str) -> None:
    subscription_id = created(client, token)["subscription"]["id"]
    for bad in (None, "tst_not-a-real-token"):
        answers = every_call(client, bad, subscription_id)
        assert set(statuses(answers).values()) == {401}, bad
        for answer in answers.values():
            assert answer.json() == {"detail": "Invalid or missing bearer token"}
    assert one(client, token, subscription_id).status_code == 200  # nothing was deleted


def test_without_aq_read_every_endpoint_is_403(core: CleanAir, client: Client, token: str) -> None:
    subscription_id = created(client, token)["subscription"]["id"]
    limited = user_token(core, "alice", [Scope.ROUTES_PLAN, Scope.AQ_ROUTES])
    answers = every_call(client, limited, subscription_id)
    assert set(statuses(answers).values()) == {403}
    for answer in answers.values():
        assert answer.json() == {"detail": "Token lacks the required scope aq:read"}


def test_a_trip_needs_routes_plan_too(core: CleanAir, client: Client, clock: ManualClock) -> None:
    reader = user_token(core, "alice", [Scope.AQ_READ])
    refused = create(client, reader, TRIP)
    assert refused.status_code == 403
    assert refused.json() == {"detail": "Token lacks the required scope routes:plan"}
    assert create(client, reader, PLACE).status_code == 201
    clock.advance(seconds=1)  # listed oldest first
    planner = user_token(core, "alice", [Scope.AQ_READ, Scope.ROUTES_PLAN])
    assert create(client, planner, TRIP).status_code == 201
    # Reading a trip subscription needs only aq:read.
    listed = client.get(SUBSCRIPTIONS, headers=bearer(reader)).json()["subscriptions"]
    assert [s["target"]["type"] for s in listed] == ["place", "trip"]


def test_a_lapsed_user_cannot_create_or_rotate_but_can_see_and_delete(
    core: CleanAir, client: Client, token: str
) -> None:
    subscription_id = created(client, token)["subscription"]["id"]
    core.set_premium("alice", False)
    answers = every_call(client, token, subscription_id)
    assert statuses(answers) == {
        "create": 403,
        "list": 200,
        "show": 200,
        "rotate": 403,
        "delete": 204,
    }
    assert answers["create"].json() == {
        "detail": "The owner of this connection has no premium plan"
    }
    assert core.store.list_subscriptions("alice") == []


def test_a_partners_connection_is_refused_everywhere(
    core: CleanAir, client: Client, token: str
) -> None:
    subscription_id = created(client, token)["subscription"]["id"]
    partner = partner_token(core, [Scope.AQ_READ, Scope.ROUTES_PLAN])
    answers = every_call(client, partner, subscription_id)
    assert set(statuses(answers).values()) == {403}
    for answer in answers.values():
        assert answer.json() == {"detail": "Partner connections cannot do this"}


def test_another_users_subscription_is_not_found(
    core: CleanAir, client: Client, token: str
) -> None:
    subscription_id = created(client, token)["subscription"]["id"]
    bob = pair(core, client, user="bob")
    assert one(client, bob, subscription_id).status_code == 404
    assert rotate(client, bob, subscription_id).status_code == 404
    assert remove(client, bob, subscription_id).status_code == 404
    assert client.get(SUBSCRIPTIONS, headers=bearer(bob)).json()["subscriptions"] == []
    unknown = str(uuid.uuid4())
    for answer in (one(client, token, unknown), rotate(client, token, unknown)):
        assert (answer.status_code, answer.json()) == (404, {"detail": "Not found"})
    # Alice's is untouched.
    assert one(client, token, subscription_id).status_code == 200


@pytest.mark.parametrize(
    "malformed", ["not-a-uuid", "{12345678-1234-1234-1234-123456789abc}", "0" * 32]
)
def test_a_malformed_id_is_422_naming_the_parameter(
    client: Client, token: str, malformed: str
) -> None:
    answers = every_call(client, token, malformed)
    del answers["create"], answers["list"]
    for name, answer in answers.items():
        assert answer.status_code == 422, name
        assert answer.json() == {
            "detail": "Request validation failed",
            "errors": [
                {
                    "field": "subscription_id",
                    "rule": "format",
                    "message": "must be a UUID in its hyphenated form",
                }
            ],
        }


# -- what is refused -------------------------------------------------------------------------
def test_a_body_breaking_the_schema_lists_every_field_without_echo(
    client: Client, token: str
) -> None:
    body = {
        **TRIP,
        "target": {**TRIP["target"], "departure": "7:45pm", "days": [0, 3]},
        "threshold": 9,
        "kind": {"type": "forecast", "target_day": "yesterday-secret", "send_at": "24:00"},
        "timezone": "",
    }
    refused = create(client, token, body)
    assert refused.status_code == 422
    wall_time = "must match the pattern ^([01][0-9]|2[0-3]):[0-5][0-9]$"
    assert refused.json()["errors"] == [
        {"field": "target.departure", "rule": "pattern", "message": wall_time},
        {"field": "target.days.0", "rule": "minimum", "message": "must be at least 1"},
        {"field": "threshold", "rule": "maximum", "message": "must be at most 5"},
        {
            "field": "kind.target_day",
            "rule": "enum",
            "message": 'must be one of "today", "tomorrow"',
        },
        {"field": "kind.send_at", "rule": "pattern", "message": wall_time},
        {"field": "timezone", "rule": "too_short", "message": "must have at least 1 character"},
    ]
    assert "secret" not in refused.text
    assert "7:45pm" not in refused.text


def test_an_unknown_target_or_kind_names_the_allowed_types(client: Client, token: str) -> None:
    refused = create(
        client, token, {**PLACE, "target": {"type": "region"}, "kind": {"hysteresis_hours": 2}}
    )
    assert refused.status_code == 422
    assert refused.json()["errors"] == [
        {"field": "target.type", "rule": "enum", "message": 'must be one of "place", "trip"'},
        {"field": "kind.type", "rule": "required", "message": "is required"},
    ]


def test_the_core_rules_are_422_without_echo(client: Client, token: str) -> None:
    body = {
        **PLACE,
        "index": None,
        "threshold": 5,
        "timezone": "Mars/Olympus_Mons",
        "quiet_hours": {"start": "06:30", "end": "06:30"},
        "webhook_url": "http://hooks.example.com/x?token=hunter2",
    }
    refused = create(client, token, body)
    assert refused.status_code == 422
    assert refused.json()["errors"] == [
        {"field": "quiet_hours.end", "rule": "invalid", "message": "must differ from start"},
        {
            "field": "threshold",
            "rule": "maximum",
            "message": "must be at most 3 without a named index (name one for more)",
        },
        {
            "field": "timezone",
            "rule": "format",
            "message": "must be an IANA timezone name, e.g. Europe/Paris",
        },
        {"field": "webhook_url", "rule": "format", "message": "must use https"},
    ]
    for sent in ("hunter2", "Olympus", "hooks.example.com"):
        assert sent not in refused.text


def test_a_trip_day_named_twice_is_refused(client: Client, token: str) -> None:
    body = {**TRIP, "target": {**TRIP["target"], "days": [1, 2, 1]}}
    refused = create(client, token, body)
    assert refused.status_code == 422
    assert refused.json()["errors"] == [
        {"field": "target.days", "rule": "unique", "message": "must not name a day twice"}
    ]


def test_a_private_webhook_host_is_refused_unless_the_operator_allows_it(
    core: CleanAir, clock: ManualClock, sources: Sources, client: Client, token: str
) -> None:
    body = {**PLACE, "webhook_url": "http://10.1.2.3:9000/hook"}
    refused = create(client, token, body)
    assert refused.status_code == 422
    assert [e["field"] for e in refused.json()["errors"]] == ["webhook_url"]
    # The operator's settings reach the check: plain http, any port, and the network.
    settings = Settings.from_env(
        {
            "CLEANAIR_WEBHOOK_ALLOW_HTTP": "true",
            "CLEANAIR_WEBHOOK_PORTS": "any",
            "CLEANAIR_WEBHOOK_ALLOWED_NETWORKS": "10.0.0.0/8",
        }
    )
    allowing = CleanAir(MemoryStore(), core.keys, policy_from(settings), clock, sources=sources)
    with TestClient(create_app(allowing, Settings(plan_workers=0))) as other:
        assert create(other, pair(allowing, other), body).status_code == 201


def test_over_the_per_user_limit_is_422_and_deleting_frees_a_place(
    client: Client, token: str
) -> None:
    ids = [created(client, token, FEED_ONLY)["subscription"]["id"] for _ in range(20)]
    assert len(ids) == MAX_SUBSCRIPTIONS_PER_USER
    refused = create(client, token, FEED_ONLY)
    assert refused.status_code == 422
    assert refused.json() == {
        "detail": "Too many alert subscriptions",
        "errors": [
            {"field": "", "rule": "maximum", "message": "at most 20 subscriptions per user"}
        ],
    }
    assert len(client.get(SUBSCRIPTIONS, headers=bearer(token)).json()["subscriptions"]) == 20
    assert remove(client, token, ids[0]).status_code == 204
    assert create(client, token, FEED_ONLY).status_code == 201


def test_every_endpoint_counts_against_the_rate_limit(
    client: Client, token: str, clock: ManualClock
) -> None:
    subscription_id = created(client, token)["subscription"]["id"]
    for _ in range(REQUESTS_PER_MINUTE - 1):
        assert client.get(SUBSCRIPTIONS, headers=bearer(token)).status_code == 200
    answers = every_call(client, token, subscription_id)
    assert set(statuses(answers).values()) == {429}
    for answer in answers.values():
        assert answer.json() == {"detail": "Rate limit exceeded"}
        assert 1 <= int(answer.headers["Retry-After"]) <= 60
    clock.advance(minutes=1)
    assert one(client, token, subscription_id).status_code == 200


# -- what is accepted is what is shown -------------------------------------------------------
times = st.tuples(st.integers(0, 23), st.integers(0, 59)).map(lambda t: f"{t[0]:02d}:{t[1]:02d}")
places = st.fixed_dictionaries(
    {
        "type": st.just("place"),
        "lat": st.floats(-90, 90, allow_nan=False),
        "lon": st.floats(-180, 180, allow_nan=False),
    }
)
trips = st.fixed_dictionaries(
    {
        "type": st.just("trip"),
        "start": st.just({"latitude": 48.8566, "longitude": 2.3522}),
        "end": st.just({"latitude": 48.8606, "longitude": 2.3376}),
        "activity_type": st.sampled_from(["walking", "cycling", "running"]),
        "departure": times,
        "days": st.sets(st.integers(1, 7), min_size=1).map(sorted),
    }
)
observed = st.fixed_dictionaries(
    {
        "type": st.just("observed"),
        "hysteresis_categories": st.just(1),
        "hysteresis_hours": st.integers(1, 48),
    }
)
forecasts = st.fixed_dictionaries(
    {
        "type": st.just("forecast"),
        "target_day": st.sampled_from(["today", "tomorrow"]),
        "send_at": times,
    }
)
bodies = st.fixed_dictionaries(
    {
        "target": places | trips,
        "index": st.sampled_from(["us_epa_2024", "eu_eaqi_2024", "uk_daqi"]),
        "threshold": st.integers(1, 2),
        "direction": st.sampled_from(["worse", "better"]),
        "audience": st.sampled_from(["general", "sensitive"]),
        "kind": observed | forecasts,
        "timezone": st.sampled_from(["UTC", "Europe/Paris", "Pacific/Auckland", "Asia/Kolkata"]),
    },
    optional={
        "quiet_hours": st.tuples(times, times)
        .filter(lambda t: t[0] != t[1])
        .map(lambda t: {"start": t[0], "end": t[1]}),
        "webhook_url": st.sampled_from(
            ["https://hooks.example.com/a", "https://203.0.113.9:8443/x?k=1"]
        ),
    },
)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(body=bodies)
def test_a_valid_body_is_shown_back_as_sent(
    client: Client, token: str, clock: ManualClock, body: dict[str, Any]
) -> None:
    clock.advance(minutes=1)  # a fresh rate-limit window for each example
    answer = created(client, token, body)
    assert request_body(answer["subscription"]) == body
    assert (answer["webhook_secret"] is None) == ("webhook_url" not in body)
    subscription_id = answer["subscription"]["id"]
    assert one(client, token, subscription_id).json() == answer["subscription"]
    assert remove(client, token, subscription_id).status_code == 204  # room for the next


# -- SQLite, the OpenAPI document and the docs -------------------------------------------------
def test_a_round_trip_on_sqlite(tmp_path: Path, clock: ManualClock, sources: Sources) -> None:
    store = SqliteStore(tmp_path / "cleanair.db")
    core = make_core(store, clock, sources)
    try:
        with TestClient(create_app(core, Settings(plan_workers=0))) as client:
            token = pair(core, client)
            answer = created(client, token, {**TRIP, "webhook_url": PLACE["webhook_url"]})
            subscription = answer["subscription"]
            assert one(client, token, subscription["id"]).json() == subscription
            listed = client.get(SUBSCRIPTIONS, headers=bearer(token)).json()
            assert listed["subscriptions"] == [subscription]
            rotated = rotate(client, token, subscription["id"]).json()
            at = clock.now() + timedelta(hours=1)
            body, headers = delivery(core, subscription["id"], at)
            assert verifies(rotated["webhook_secret"], body, headers, at)
            assert verifies(answer["webhook_secret"], body, headers, at)
            assert remove(client, token, subscription["id"]).status_code == 204
            assert one(client, token, subscription["id"]).status_code == 404
    finally:
        store.close()


def test_the_openapi_document_lists_the_paths_and_their_statuses(client: Client) -> None:
    document = client.get("/schema/openapi.json").json()
    paths = document["paths"]
    documented = {
        (path, method): set(operation["responses"])
        for path, item in paths.items()
        if path.startswith(SUBSCRIPTIONS)
        for method, operation in item.items()
    }
    errors = {"401", "403", "429", "503"}
    one_path = f"{SUBSCRIPTIONS}/{{subscription_id}}"
    assert documented == {
        (SUBSCRIPTIONS, "post"): {"201", "422"} | errors,
        (SUBSCRIPTIONS, "get"): {"200"} | errors,
        (one_path, "get"): {"200", "404", "422"} | errors,
        (one_path, "delete"): {"204", "404", "422"} | errors,
        (f"{one_path}/rotate-secret", "post"): {"200", "404", "422"} | errors,
    }


def curl_bodies() -> list[dict[str, Any]]:
    """The JSON bodies of docs/alerts.md's `curl` examples creating a subscription."""
    text = (DOCS / "alerts.md").read_text()
    found = re.findall(r"curl [^`]*?/ext/v1/alerts/subscriptions \\\n.*?-d '(\{.*?\})'", text, re.S)
    return [json.loads(body) for body in found]


def test_the_docs_curl_examples_are_accepted(client: Client, token: str) -> None:
    examples = curl_bodies()
    assert examples
    for body in examples:
        assert create(client, token, body).status_code == 201


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("CLEANAIR_WEBHOOK_ALLOWED_NETWORKS", "10.1.2.3/8"),  # host bits set: a likely typo
        ("CLEANAIR_WEBHOOK_ALLOWED_NETWORKS", "intranet"),
        ("CLEANAIR_WEBHOOK_PORTS", "443,70000"),
        ("CLEANAIR_WEBHOOK_PORTS", ","),
        ("CLEANAIR_WEBHOOK_ALLOW_HTTP", "perhaps"),
    ],
)
def test_a_bad_webhook_setting_stops_start_up_naming_it(variable: str, value: str) -> None:
    with pytest.raises(SettingsError, match=variable):
        Settings.from_env({variable: value})


def test_the_webhook_settings_default_to_the_cores_policy() -> None:
    assert policy_from(Settings()).webhook_destinations == DestinationPolicy()


def test_the_openapi_document_tells_the_unions_apart_by_type(client: Client) -> None:
    schemas = client.get("/schema/openapi.json").json()["components"]["schemas"]
    ref = "#/components/schemas/"
    for name in ("SubscriptionRequest", "AlertSubscription"):
        properties = schemas[name]["properties"]
        assert properties["target"]["discriminator"] == {
            "propertyName": "type",
            "mapping": {"place": f"{ref}PlaceTarget", "trip": f"{ref}TripTarget"},
        }
        assert properties["kind"]["discriminator"] == {
            "propertyName": "type",
            "mapping": {"observed": f"{ref}ObservedKind", "forecast": f"{ref}ForecastKind"},
        }
    for member in ("PlaceTarget", "TripTarget", "ObservedKind", "ForecastKind"):
        assert "type" in schemas[member]["required"]
        assert schemas[member]["properties"]["type"]["description"], member


def test_a_browser_app_on_a_listed_origin_may_delete(make_client: MakeClient) -> None:
    app = "https://app.example"
    cors = make_client(Settings(plan_workers=0, cors_allow_origins=(app,)))
    response = cors.options(
        f"{SUBSCRIPTIONS}/{uuid.uuid4()}",
        headers={
            "Origin": app,
            "Access-Control-Request-Method": "DELETE",
            "Access-Control-Request-Headers": "authorization",
        },
    )
    assert response.status_code == 204
    assert response.headers["access-control-allow-origin"] == app
    assert "DELETE" in response.headers["access-control-allow-methods"]

"""`cleanair alerts list|show|disable`: an operator sees every user's alert subscriptions (or
one user's), one by id whoever its owner, and disables one with a reason its owner then reads
through the API. The CLI runs in process over a SQLite file the test makes, as in
test_cli_credits.py; webhook URLs are shown by their host alone."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import datetime, time, timedelta
from pathlib import Path

import attrs
import pytest
from litestar.testing import TestClient

from cleanair_core.alerts.alert_states import encode_state
from cleanair_core.alerts.episodes import ObservedState
from cleanair_core.alerts.outbox import DeliveryState, NewEvent
from cleanair_core.alerts.subscriptions import Disabled, Forecast, Subscription, TargetDay, Trip
from cleanair_core.geo import Point
from cleanair_core.routes.network import PlanActivityType
from cleanair_core.service import CleanAir
from cleanair_core.use_cases import alert_operators
from cleanair_http.app import create_app
from cleanair_runtime import cli
from cleanair_runtime.composition.bootstrap import Deployment, open_deployment
from cleanair_runtime.composition.settings import Settings
from support.http import Client, bearer, pair
from support.subscriptions import T0, make_subscription

#: Ids in a known order (the listing of every user's is by id), none in creation order.
IDS = [uuid.UUID(f"{n}0000000-0000-4000-8000-000000000000") for n in (3, 1, 2)]
#: A URL whose path and query are the customer's secret for their own receiver.
TOKEN_URL = "https://example.org:8443/in/s3cr3t-path?token=s3cr3t"
HEADER = "id\towner\ttarget\tkind\tindex\tthreshold\tdirection\twebhook\tstatus\tcreated"


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    status = cli.main(argv)
    out, err = capsys.readouterr()
    return status, out, err


@pytest.fixture
def core(database: Path) -> Iterator[CleanAir]:
    """A core over the CLI's database (its own connections, as a server's)."""
    deployment = open_deployment(Settings.from_env(), with_sources=False)
    try:
        yield deployment.core
    finally:
        deployment.close()


@pytest.fixture
def stored(core: CleanAir) -> list[Subscription]:
    """alice's place subscription with a webhook, bob's feed-only one, alice's with a
    token in its URL, created in that order; bob's disabled."""
    for user in ("alice", "bob"):
        core.add_user(user)
    subscriptions = [
        make_subscription("alice", subscription_id=IDS[0]),
        make_subscription(
            "bob", subscription_id=IDS[1], created_at=T0 + timedelta(1), webhook_url=None
        ),
        make_subscription(
            "alice", subscription_id=IDS[2], created_at=T0 + timedelta(2), webhook_url=TOKEN_URL
        ),
    ]
    for subscription in subscriptions:
        core.store.add_subscription(subscription)
    gone = Disabled("the webhook answered 410 Gone", T0)
    assert core.store.disable_subscription(IDS[1], gone.reason, gone.at)
    subscriptions[1] = attrs.evolve(subscriptions[1], disabled=gone)
    return subscriptions


def rows(out: str) -> list[list[str]]:
    lines = out.splitlines()
    assert lines[0] == HEADER
    return [line.split("\t") for line in lines[1:]]


def test_list_shows_every_users_subscriptions_by_id(
    stored: list[Subscription], capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, err = run(["alerts", "list"], capsys)

    assert (status, err) == (0, "")
    settings = ["place", "observed", "eu_eaqi_2024", "3", "worse"]  # make_subscription's
    t0 = "2026-11-28T07:30:15+00:00"
    assert rows(out) == [
        [str(IDS[1]), "bob", *settings, "-", "disabled", "2026-11-29T07:30:15+00:00"],
        [str(IDS[2]), "alice", *settings, "example.org", "active", "2026-11-30T07:30:15+00:00"],
        [str(IDS[0]), "alice", *settings, "hooks.example.com", "active", t0],
    ]
    assert "s3cr3t" not in out


@pytest.mark.parametrize("page_size", [1, 2, 3])
def test_list_reads_page_after_page(
    stored: list[Subscription],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    page_size: int,
) -> None:
    monkeypatch.setattr(alert_operators, "PAGE_SIZE", page_size)
    _, out, _ = run(["alerts", "list"], capsys)
    assert [row[0] for row in rows(out)] == [str(IDS[1]), str(IDS[2]), str(IDS[0])]
    _, out, _ = run(["alerts", "list", "--json", "--status", "active"], capsys)
    assert [item["id"] for item in json.loads(out)] == [str(IDS[2]), str(IDS[0])]


def test_list_filters_by_user_oldest_first_and_by_status(
    stored: list[Subscription], capsys: pytest.CaptureFixture[str]
) -> None:
    def listed(*options: str) -> list[str]:
        status, out, err = run(["alerts", "list", *options], capsys)
        assert (status, err) == (0, "")
        return [row[0] for row in rows(out)]

    assert listed("--user", "alice") == [str(IDS[0]), str(IDS[2])]  # created first, first
    assert listed("--user", "bob") == [str(IDS[1])]
    assert listed("--status", "active") == [str(IDS[2]), str(IDS[0])]
    assert listed("--status", "disabled") == [str(IDS[1])]
    assert listed("--user", "alice", "--status", "disabled") == []
    assert listed("--user", "bob", "--status", "disabled") == [str(IDS[1])]


def test_list_for_an_unknown_user_is_refused_in_one_line(
    stored: list[Subscription], capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(["alerts", "list", "--user", "nobody"], capsys) == (
        1,
        "",
        "cleanair: no user nobody\n",
    )


def test_list_json_is_the_shown_subscriptions_with_hosts_only(
    stored: list[Subscription], capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, _ = run(["alerts", "list", "--json"], capsys)

    assert status == 0
    listed = json.loads(out)
    assert [item["id"] for item in listed] == [str(IDS[1]), str(IDS[2]), str(IDS[0])]
    assert [item["webhook_host"] for item in listed] == [None, "example.org", "hooks.example.com"]
    assert "webhook_url" not in listed[0]
    assert "s3cr3t" not in out
    assert listed[0]["status"] == "disabled"
    assert listed[0]["disabled_reason"] == "the webhook answered 410 Gone"
    for item in listed:  # each as `alerts show --json` gives it, bar the state's version
        _, shown, _ = run(["alerts", "show", item["id"], "--json"], capsys)
        assert {**item, "state_version": 0} == json.loads(shown)
    assert run(["alerts", "list", "--json", "--user", "nobody"], capsys)[0] == 1
    assert json.loads(run(["alerts", "list", "--json", "--status", "disabled"], capsys)[1]) == [
        listed[0]
    ]


def test_an_empty_json_list_is_an_empty_array(
    database: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(["alerts", "list", "--json"], capsys) == (0, "[]\n", "")


def test_show_prints_settings_status_and_state_version_but_the_webhooks_host_only(
    core: CleanAir, stored: list[Subscription], capsys: pytest.CaptureFixture[str]
) -> None:
    subscription = stored[2]
    assert core.store.save_subscription_state(subscription.id, 0, encode_state(ObservedState()))

    status, out, err = run(["alerts", "show", str(subscription.id)], capsys)

    assert (status, err) == (0, "")
    assert dict(line.split("\t") for line in out.splitlines()) == {
        "id": str(subscription.id),
        "owner": "alice",
        "connection": subscription.connection_id,
        "created": "2026-11-30T07:30:15+00:00",
        "status": "active",
        "disabled at": "-",
        "reason": "-",
        "target": "place 48.85660 2.35220",
        "index": "eu_eaqi_2024",
        "threshold": "3",
        "direction": "worse",
        "audience": "general",
        "kind": "observed, all-clear after 2 hours at least 1 categories back",
        "timezone": "Europe/Paris",
        "quiet hours": "22:00 to 07:00",
        "webhook host": "example.org",
        "secret generation": "1",
        "previous secret until": "-",
        "state version": "1",
    }
    assert "s3cr3t" not in out
    assert "whsec_" not in out


def test_show_tells_why_a_subscription_was_disabled(
    stored: list[Subscription], capsys: pytest.CaptureFixture[str]
) -> None:
    _, out, _ = run(["alerts", "show", str(IDS[1])], capsys)
    shown = dict(line.split("\t") for line in out.splitlines())
    assert (shown["status"], shown["reason"], shown["disabled at"]) == (
        "disabled",
        "the webhook answered 410 Gone",
        "2026-11-28T07:30:15+00:00",
    )
    assert shown["webhook host"] == "- (feed only)"


@pytest.mark.parametrize("action", [["show"], ["disable", "--reason", "abuse"]])
def test_an_unknown_or_malformed_id_is_refused_in_one_line(
    stored: list[Subscription], capsys: pytest.CaptureFixture[str], action: list[str]
) -> None:
    unknown = uuid.UUID(int=7)
    assert run(["alerts", action[0], str(unknown), *action[1:]], capsys) == (
        1,
        "",
        f"cleanair: no alert subscription {unknown}\n",
    )
    assert run(["alerts", action[0], "not-an-id\x1b[2J", *action[1:]], capsys) == (
        1,
        "",
        "cleanair: an alert subscription id is a UUID\n",
    )


def test_disable_stops_a_subscription_gives_up_its_deliveries_and_says_so(
    core: CleanAir, stored: list[Subscription], capsys: pytest.CaptureFixture[str]
) -> None:
    subscription = stored[0]
    event = NewEvent(
        event_id=uuid.uuid4(),
        owner="alice",
        subscription_id=subscription.id,
        payload="{}",
        created_at=T0,
        url=subscription.webhook_url,
    )
    core.store.record_alert_events([event])

    status, out, err = run(
        ["alerts", "disable", str(subscription.id), "--reason", "abuse  report\t#12"], capsys
    )

    assert (status, err) == (0, "")
    assert out == (
        f"disabled alert subscription {subscription.id} of alice: nothing more is decided or "
        'sent for it; 1 pending deliveries given up; its owner reads "disabled by an '
        'operator: abuse report #12"\n'
    )
    found = core.store.find_subscription(subscription.id)
    assert found is not None
    assert found.disabled is not None
    assert found.disabled.reason == "disabled by an operator: abuse report #12"
    owed = core.store.owed_delivery(event.event_id)
    assert owed is not None
    assert (owed.state, owed.last_error) == (DeliveryState.FAILED, "subscription disabled")
    _, listed, _ = run(["alerts", "list", "--status", "active"], capsys)
    assert [row[0] for row in rows(listed)] == [str(IDS[2])]


def test_disabling_again_is_refused_and_keeps_the_first_reason(
    core: CleanAir, stored: list[Subscription], capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(["alerts", "disable", str(IDS[1]), "--reason", "later"], capsys) == (
        1,
        "",
        f"cleanair: alert subscription {IDS[1]} is already disabled since "
        "2026-11-28T07:30:15+00:00: the webhook answered 410 Gone\n",
    )
    assert core.store.find_subscription(IDS[1]) == stored[1]


@pytest.mark.parametrize("reason", ["", " \t ", "x" * 201, "bell\x07"])
def test_disable_needs_a_printable_reason(
    core: CleanAir, stored: list[Subscription], capsys: pytest.CaptureFixture[str], reason: str
) -> None:
    assert run(["alerts", "disable", str(IDS[0]), "--reason", reason], capsys) == (
        1,
        "",
        "cleanair: disabling needs a reason for the owner: printable text of at most 200 "
        "characters\n",
    )
    assert core.store.find_subscription(IDS[0]) == stored[0]


def test_disable_without_a_reason_is_a_usage_error(
    database: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["alerts", "disable", str(IDS[0])])
    assert exited.value.code == 2
    assert "--reason" in capsys.readouterr().err


@pytest.fixture
def api(database: Path) -> Iterator[tuple[Deployment, Client]]:
    """A server's deployment and app over the CLI's database (its own connections)."""
    deployment = open_deployment(Settings.from_env(), with_sources=False)
    try:
        with TestClient(create_app(deployment.core, Settings(plan_workers=0))) as client:
            yield deployment, client
    finally:
        deployment.close()


def test_the_owner_reads_the_operators_reason_through_the_api(
    api: tuple[Deployment, Client], capsys: pytest.CaptureFixture[str]
) -> None:
    deployment, client = api
    token = pair(deployment.core, client)
    body = {
        "target": {"type": "place", "lat": 60.1699, "lon": 24.9384},
        "threshold": 3,
        "kind": {"type": "observed"},
        "timezone": "Europe/Helsinki",
        "webhook_url": TOKEN_URL,
    }
    created = client.post("/ext/v1/alerts/subscriptions", json=body, headers=bearer(token))
    assert created.status_code == 201, created.text
    subscription_id = created.json()["subscription"]["id"]

    _, out, _ = run(["alerts", "list", "--user", "alice"], capsys)
    assert [row[0] for row in rows(out)] == [subscription_id]
    assert (
        run(["alerts", "disable", subscription_id, "--reason", "abuse report #12"], capsys)[0] == 0
    )

    shown = client.get(f"/ext/v1/alerts/subscriptions/{subscription_id}", headers=bearer(token))
    assert shown.status_code == 200
    assert {k: shown.json()[k] for k in ("status", "disabled_reason")} == {
        "status": "disabled",
        "disabled_reason": "disabled by an operator: abuse report #12",
    }
    _, out, _ = run(["alerts", "show", subscription_id], capsys)
    shown_here = dict(line.split("\t") for line in out.splitlines())
    disabled_at = datetime.fromisoformat(shown.json()["disabled_at"])
    assert datetime.fromisoformat(shown_here["disabled at"]) == disabled_at.replace(microsecond=0)


def test_a_trip_and_a_forecast_are_shown_in_full(
    core: CleanAir, capsys: pytest.CaptureFixture[str]
) -> None:
    core.add_user("carol")
    trip = attrs.evolve(
        make_subscription("carol", webhook_url=None),
        target=Trip(
            start=Point(51.5072, -0.1276),
            end=Point(51.5155, -0.0922),
            activity=PlanActivityType.CYCLING,
            departure=time(7, 45),
            days=frozenset({5, 1, 3}),
        ),
        index=None,
        kind=Forecast(TargetDay.TOMORROW, time(21, 0)),
        quiet_hours=None,
    )
    core.store.add_subscription(trip)

    _, out, _ = run(["alerts", "show", str(trip.id)], capsys)
    shown = dict(line.split("\t") for line in out.splitlines())
    assert shown["target"] == (
        "trip 51.50720 -0.12760 to 51.51550 -0.09220 cycling, leaving at 07:45 on days 1,3,5"
    )
    assert shown["kind"] == "forecast of tomorrow, sent at 21:00"
    assert (shown["index"], shown["quiet hours"]) == ("the place's own", "-")
    _, out, _ = run(["alerts", "show", str(trip.id), "--json"], capsys)
    as_json = json.loads(out)
    assert as_json["target"] == {
        "type": "trip",
        "start": {"lat": 51.5072, "lon": -0.1276},
        "end": {"lat": 51.5155, "lon": -0.0922},
        "activity_type": "cycling",
        "departure": "07:45",
        "days": [1, 3, 5],
    }
    assert as_json["kind"] == {"type": "forecast", "target_day": "tomorrow", "send_at": "21:00"}
    assert as_json["index"] is None
    _, out, _ = run(["alerts", "list"], capsys)
    assert rows(out)[0][2:5] == ["trip", "forecast", "-"]


def test_a_stored_reason_cannot_drive_the_terminal(
    core: CleanAir, stored: list[Subscription], capsys: pytest.CaptureFixture[str]
) -> None:
    """A reason the outbox wrote may quote what a receiver answered: shown escaped."""
    assert core.store.disable_subscription(IDS[0], "status 500: \x1b[2J\rok\u202e", T0)

    _, shown, _ = run(["alerts", "show", str(IDS[0])], capsys)
    _, _, refused = run(["alerts", "disable", str(IDS[0]), "--reason", "again"], capsys)

    assert "reason\tstatus 500: \\x1b[2J\\rok\\u202e\n" in shown
    assert refused.endswith(": status 500: \\x1b[2J\\rok\\u202e\n")
    for text in (shown, refused):
        assert all(char in "\t\n" or char.isprintable() for char in text)

"""`cleanair credits show|grant`: a support operator sees a user's pool and adds credits for
this month, or (`--today`) lifts today's burst cap; a running API's `GET /v1/quota` shows the
grant at once."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from litestar.testing import TestClient

from cleanair_core.credits.ledger import Billable
from cleanair_core.errors import CreditsExhausted, Limit
from cleanair_http.app import create_app
from cleanair_runtime import cli
from cleanair_runtime.composition.bootstrap import Deployment, open_deployment
from cleanair_runtime.composition.settings import Settings
from support.http import Client, bearer, pair


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    status = cli.main(argv)
    out, err = capsys.readouterr()
    return status, out, err


@pytest.fixture
def api(database: Path) -> Iterator[tuple[Deployment, Client]]:
    """A server's deployment and app over the CLI's database (its own connections)."""
    deployment = open_deployment(Settings.from_env(), with_sources=False)
    try:
        with TestClient(create_app(deployment.core, Settings(plan_workers=0))) as client:
            yield deployment, client
    finally:
        deployment.close()


def test_a_grant_shows_in_the_quota_and_in_credits_show(
    api: tuple[Deployment, Client], capsys: pytest.CaptureFixture[str]
) -> None:
    deployment, client = api
    token = pair(deployment.core, client)
    with deployment.core.charge(deployment.core.authenticate(token), Billable.FORECAST):
        pass
    before = client.get("/v1/quota", headers=bearer(token)).json()
    assert (before["used"], before["limit"], before["remaining"]) == (2, 1000, 998)

    status, out, err = run(["credits", "grant", "alice", "250", "--reason", "outage #42"], capsys)

    assert (status, err) == (0, "")
    assert out == "granted 250 credits to alice for this month: limit 1250, remaining 1248\n"
    after = client.get("/v1/quota", headers=bearer(token)).json()
    assert after == {
        **before,
        "limit": 1250,
        "remaining": before["remaining"] + 250,
    }  # used and the day's figures unchanged: the daily burst cap is not raised

    status, out, _ = run(["credits", "show", "alice"], capsys)
    assert status == 0
    lines = out.splitlines()
    assert lines[:4] == [
        "month\tused 2\tlimit 1250\tremaining 1248",
        "day\tused 2\tlimit 100\tremaining 98",
        "granted this month\t250",
        "granted today\t0",
    ]
    assert lines[4].startswith("grant\t250\t")
    assert lines[4].endswith("\toutage #42")
    assert lines[5:] == ["usage\tforecast\t2"]

    status, out, _ = run(["credits", "show", "alice", "--json"], capsys)
    shown = json.loads(out)
    assert shown["quota"] == after
    assert [(g["credits"], g["reason"], len(g["for"])) for g in shown["grants"]] == [
        (250, "outage #42", len("YYYY-MM"))
    ]
    assert shown["usage"] == {"forecast": 2}


def test_a_day_grant_lifts_todays_cap_in_the_quota_and_in_credits_show(
    api: tuple[Deployment, Client], capsys: pytest.CaptureFixture[str]
) -> None:
    deployment, client = api
    token = pair(deployment.core, client)
    caller = deployment.core.authenticate(token)
    for _ in range(4):  # 100 credits: today's whole burst cap
        with deployment.core.charge(caller, Billable.ROUTE_PLAN):
            pass
    with pytest.raises(CreditsExhausted) as refused:
        deployment.core.charge(caller, Billable.ROUTE_PLAN).__enter__()
    assert refused.value.limit is Limit.DAILY_BURST

    status, out, err = run(
        ["credits", "grant", "alice", "50", "--reason", "README walkthrough", "--today"], capsys
    )

    assert (status, err) == (0, "")
    status, shown_out, _ = run(["credits", "show", "alice", "--json"], capsys)
    shown = json.loads(shown_out)
    [grant] = shown["grants"]
    day = grant["for"]
    assert (grant["credits"], grant["reason"], len(day)) == (50, "README walkthrough", 10)
    assert out == (
        f"granted 50 credits to alice for today ({day} UTC): daily limit 150, daily remaining "
        "50; this month's remaining 900 still applies\n"
    )
    quota = client.get("/v1/quota", headers=bearer(token)).json()
    assert quota == {
        "used": 100,
        "limit": 1000,  # the month's pool is not raised
        "remaining": 900,
        "daily_used": 100,
        "daily_limit": 150,
        "daily_remaining": 50,
    }
    assert shown["quota"] == quota
    with deployment.core.charge(caller, Billable.ROUTE_PLAN):  # refused before the grant
        pass

    status, out, _ = run(["credits", "show", "alice"], capsys)
    assert status == 0
    lines = out.splitlines()
    assert lines[:4] == [
        "month\tused 125\tlimit 1000\tremaining 875",
        "day\tused 125\tlimit 150\tremaining 25",
        "granted this month\t0",
        "granted today\t50",
    ]
    assert lines[4].startswith(f"day grant\t50\t{day}T")
    assert lines[4].endswith("\tREADME walkthrough")
    assert lines[5:] == ["usage\troute_plan\t125"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["credits", "grant", "nobody", "5", "--reason", "x"], "cleanair: no user nobody\n"),
        (
            ["credits", "grant", "alice", "0", "--reason", "x"],
            "cleanair: a grant is 1 to 1,000,000 credits\n",
        ),
        (
            ["credits", "grant", "alice", "5", "--reason", "  \t "],
            "cleanair: a grant needs a reason: printable text of at most 200 characters\n",
        ),
        (
            ["credits", "grant", "alice", "0", "--reason", "x", "--today"],
            "cleanair: a grant is 1 to 1,000,000 credits\n",
        ),
        (["credits", "show", "nobody"], "cleanair: no user nobody\n"),
    ],
)
def test_refused_grants_exit_1_and_change_nothing(
    database: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    run(["users", "add", "alice"], capsys)

    assert run(argv, capsys) == (1, "", message)

    _, out, _ = run(["credits", "show", "alice"], capsys)
    assert {"granted this month\t0", "granted today\t0"} <= set(out.splitlines())


def test_a_grant_needs_a_reason(database: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["credits", "grant", "alice", "5"])
    assert exited.value.code == 2
    assert "--reason" in capsys.readouterr().err

"""End to end: the real `cleanair serve` process driven by the real operator CLI."""

from __future__ import annotations

import json
import os
import re
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from cleanair_core import Billable
from cleanair_runtime.composition.bootstrap import open_deployment
from cleanair_runtime.composition.settings import Settings
from support.servers import STARTUP_S, cli, running_server, server_env, spawn

pytestmark = pytest.mark.e2e


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        "CLEANAIR_DATABASE": str(tmp_path / "var" / "cleanair.db"),
        "CLEANAIR_ENVIRONMENT": "tst",
    }


@pytest.fixture
def server(env: dict[str, str], tmp_path: Path) -> Iterator[str]:
    with running_server(env, tmp_path / "server.log") as running:
        yield running.base


def test_pair_through_the_cli_and_read_the_quota(env: dict[str, str], server: str) -> None:
    assert cli(env, "users", "add", "alice").returncode == 0
    code = cli(env, "pairing-code", "alice").stdout.strip()
    assert re.fullmatch(r"[0-9]{6}", code)

    redeemed = httpx.post(
        f"{server}/v1/connections/token", json={"code": code, "name": "e2e"}, timeout=10
    )
    assert redeemed.status_code == 201
    token = redeemed.json()["token"]
    quota = httpx.get(
        f"{server}/v1/quota", headers={"Authorization": f"Bearer {token}"}, timeout=10
    )
    assert quota.status_code == 200
    assert quota.json() == {
        "used": 0,
        "limit": 1000,
        "remaining": 1000,
        "daily_used": 0,
        "daily_limit": 100,
        "daily_remaining": 100,
    }

    listing = cli(env, "connections", "list", "alice").stdout
    assert redeemed.json()["connection_id"] in listing
    assert token not in listing
    assert cli(env, "connections", "revoke", redeemed.json()["connection_id"]).returncode == 0
    revoked = httpx.get(
        f"{server}/v1/quota", headers={"Authorization": f"Bearer {token}"}, timeout=10
    )
    assert revoked.status_code == 401


def test_partner_tokens_stop_working_when_deactivated(env: dict[str, str], server: str) -> None:
    assert cli(env, "partners", "add", "acme").returncode == 0
    issued = cli(env, "partners", "issue-token", "acme", "--name", "int", "--scope", "aq:read")
    token = issued.stdout.strip()
    headers = {"Authorization": f"Bearer {token}"}
    assert httpx.get(f"{server}/v1/quota", headers=headers, timeout=10).status_code == 200
    assert cli(env, "partners", "deactivate", "acme").returncode == 0
    assert httpx.get(f"{server}/v1/quota", headers=headers, timeout=10).status_code == 401


def test_usage_by_attribution_label(env: dict[str, str]) -> None:
    assert cli(env, "users", "add", "alice").returncode == 0
    assert cli(env, "clients", "add", "myapp").returncode == 0
    settings = Settings.from_env(env)
    deployment = open_deployment(settings, with_sources=False)  # credits only: no place data needed
    core = deployment.core
    try:
        caller = core.redeem_pairing_code(core.create_pairing_code("alice"), "x", "127.0.0.1")
        who = core.authenticate(caller.token)
        with core.charge(who, Billable.FORECAST, client="myapp"):
            pass
        with core.charge(who, Billable.SCORE, client="unknown-app"):
            pass
    finally:
        deployment.close()
    usage = cli(env, "usage", "alice", "--json")
    assert usage.returncode == 0
    assert json.loads(usage.stdout) == {"client:myapp": 2, "score": 1}


def test_operator_errors_and_bad_settings(env: dict[str, str]) -> None:
    assert cli(env, "users", "add", "bob", "--no-premium").returncode == 0
    refused = cli(env, "pairing-code", "bob")
    assert refused.returncode == 1
    assert "premium" in refused.stderr
    assert cli(env, "users", "set-premium", "bob", "on").returncode == 0
    assert cli(env, "pairing-code", "bob").returncode == 0
    assert cli(env, "users", "add", "bob").returncode == 1
    assert cli(env, "connections", "revoke", "not-a-uuid").returncode == 1

    bad = cli(
        {**env, "CLEANAIR_DAILY_CREDITS": "lots", "CLEANAIR_ENVIRONMENT": "prod"}, "usage", "bob"
    )
    assert bad.returncode == 2
    assert "CLEANAIR_DAILY_CREDITS" in bad.stderr
    assert "CLEANAIR_ENVIRONMENT" in bad.stderr


def test_scores_and_forecasts_from_the_embedded_model_and_imported_wifi(
    env: dict[str, str], server: str, tmp_path: Path
) -> None:
    """The default, offline set-up: embedded model, local Wi-Fi store filled by the CLI."""
    csv = tmp_path / "aps.csv"
    csv.write_text(
        "bssid,lat,lon,accuracy_m\n"
        "3c:84:6a:10:20:31,60.16990,24.93840,15\n"
        "3c:84:6a:10:20:32,60.16995,24.93870,15\n"
        "not-a-mac,60.1,24.9,10\n"
    )
    imported = cli(env, "wifi", "import", str(csv))
    assert imported.returncode == 0, imported.stderr
    assert "imported 2 access points, skipped 1 rows" in imported.stdout

    assert cli(env, "users", "add", "alice").returncode == 0
    code = cli(env, "pairing-code", "alice").stdout.strip()
    token = httpx.post(
        f"{server}/v1/connections/token", json={"code": code, "name": "e2e"}, timeout=10
    ).json()["token"]
    headers = {"Authorization": f"Bearer {token}"}

    by_point = httpx.post(
        f"{server}/v1/airquality/score", json={"lat": 60.17, "lon": 24.94}, headers=headers
    )
    assert by_point.status_code == 200
    assert 0 <= by_point.json()["score"] <= 100
    assert 60 <= by_point.json()["ttl"] <= 3600

    scan = [
        {"mac": "3C-84-6A-10-20-31", "rssi": -48},
        {"mac": "3C:84:6A:10:20:32", "rssi": -60},
    ]
    by_wifi = httpx.post(f"{server}/v1/airquality/score", json={"wifi": scan}, headers=headers)
    assert by_wifi.status_code == 200
    unknown = [{"mac": "8c:3b:ad:44:55:66", "rssi": -40}, {"mac": "8c:3b:ad:44:55:67", "rssi": -41}]
    assert (
        httpx.post(
            f"{server}/v1/airquality/score", json={"wifi": unknown}, headers=headers
        ).status_code
        == 422
    )

    today = time.strftime("%Y-%m-%d", time.gmtime())
    forecast = httpx.post(
        f"{server}/v1/airquality/forecast",
        json={"latitude": 60.17, "longitude": 24.94, "date": today, "timezone": "UTC"},
        headers=headers,
    )
    assert forecast.status_code == 200
    body = forecast.json()
    assert "Helsinki" in body["location"]
    assert len(body["timestamps"]) == 24
    assert {"clean_air_score", "pm25", "pm10", "no2", "o3", "so2"} == set(body["measures"])
    # The loopback caller has no IP country: no location, not charged.
    assert (
        httpx.post(
            f"{server}/v1/airquality/forecast",
            json={"date": today, "timezone": "UTC"},
            headers=headers,
        ).status_code
        == 422
    )
    walk = [{"lat": 60.1699 + i * 0.001, "lon": 24.9384} for i in range(5)]
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    route = httpx.post(
        f"{server}/v1/airquality/routes",
        json={"waypoints": walk, "start_time": now, "activity_type": "walking"},
        headers=headers,
    )
    assert route.status_code == 200
    enriched = route.json()
    assert len(enriched["waypoints"]) == len(enriched["measures"]["clean_air_score"]) == 5
    assert enriched["summary"]["inhaled_dose"] > 0
    assert enriched["summary"]["clean_air_score"]["band"] in {"1", "2", "3", "4", "5"}
    quota = httpx.get(f"{server}/v1/quota", headers=headers, timeout=10).json()
    assert quota["used"] == 1 + 1 + 2 + 5


@pytest.mark.parametrize("workers", ["1", "2"])
def test_serve_on_port_0_announces_the_port_it_was_given(tmp_path: Path, workers: str) -> None:
    """`--port 0` leaves the port to the system: the banner names the one it gave."""
    env = server_env(tmp_path)
    log = tmp_path / "server.log"
    process = spawn(env, log, "serve", "--port", "0", "--workers", workers, session=True)
    try:
        deadline = time.monotonic() + STARTUP_S
        while not (found := re.search(r"API on http://127\.0\.0\.1:(\d+) ", log.read_text())):
            assert process.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
        port = int(found.group(1))
        assert port > 0
        while True:  # the processes may still be opening the deployment; bounded
            try:
                assert httpx.get(f"http://127.0.0.1:{port}/livez", timeout=2).status_code == 200
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.05)
    finally:
        os.killpg(process.pid, signal.SIGINT)
        process.wait(timeout=30)

"""End to end: every process of `cleanair serve --workers 2` (two API processes, each with its
plan process) maps the one street-network file the first of them wrote beside the SQLite
database; none loads a copy of its own, and a plan on it is answered."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import httpx
import pytest

from support.servers import (
    STARTUP_S,
    free_port,
    pair,
    plan_row,
    server_env,
    spawn,
    stop,
    wait_until_serving,
)

pytestmark = pytest.mark.e2e

WALK = {
    "start": {"latitude": 60.1699, "longitude": 24.9384},
    "end": {"latitude": 60.1645, "longitude": 24.9525},
    "activity_type": "walking",
}


def mapped_files(pid: int) -> set[str]:
    """The network files process `pid` maps."""
    lines = Path(f"/proc/{pid}/maps").read_text().splitlines()
    return {line.split()[-1] for line in lines if line.endswith(".network")}


def test_every_process_of_serve_maps_one_network_file(tmp_path: Path) -> None:
    env = server_env(tmp_path, CLEANAIR_DEFAULT_NETWORK="true", CLEANAIR_PLAN_WORKERS="1")
    log, port = tmp_path / "serve.log", free_port()
    command = spawn(env, log, "serve", "--port", str(port), "--workers", "2")
    base = f"http://127.0.0.1:{port}"
    try:
        children = wait_until_serving(command, log, 4, f"{base}/livez")
        [written] = (tmp_path / "var" / "cleanair.db.networks").glob("*.network")
        deadline = time.monotonic() + STARTUP_S
        while not all(mapped_files(child) == {str(written)} for child in children):
            assert time.monotonic() < deadline, {c: mapped_files(c) for c in children}
            time.sleep(0.1)

        submitted = httpx.post(f"{base}/v1/routes", json=WALK, headers=pair(env, base), timeout=10)
        assert submitted.status_code == 202, submitted.text
        request_id = submitted.json()["request_id"]
        while plan_row(env["CLEANAIR_DATABASE"], request_id)[0] == "pending":
            assert time.monotonic() < deadline + STARTUP_S, log.read_text()
            time.sleep(0.1)
        assert plan_row(env["CLEANAIR_DATABASE"], request_id)[0] == "completed", log.read_text()
    finally:
        stop(command, signal.SIGTERM, timeout=30)
    assert command.returncode == 0, log.read_text()

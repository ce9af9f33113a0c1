"""End to end: a street network imported with the CLI while a server and a plan worker run
is picked up by both without a restart, on SQLite and on PostgreSQL; `network list` shows
every network's import time, the shipped one's included."""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx
import osmium
import pytest
from osmium.osm.mutable import Node, Way

from support.servers import (
    cli,
    pair,
    poll_until_finished,
    running_server,
    server_env,
    worker_process,
)

pytestmark = pytest.mark.e2e

#: A 3 x 3 grid of streets about 100 m apart in Kallio, north of the shipped extract.
NODES = {
    1 + 3 * row + col: (60.184 + row * 0.0009, 24.95 + col * 0.0018)
    for row in range(3)
    for col in range(3)
}
WAYS = [
    (101, [1, 2, 3], {"highway": "residential"}),
    (102, [4, 5, 6], {"highway": "footway"}),
    (103, [7, 8, 9], {"highway": "residential"}),
    (104, [1, 4, 7], {"highway": "residential"}),
    (105, [3, 6, 9], {"highway": "residential"}),
]
WALK = {
    "start": {"latitude": 60.184, "longitude": 24.95},
    "end": {"latitude": 60.1858, "longitude": 24.9536},
    "activity_type": "walking",
}
CHECK_SECONDS = 1


def write_pbf(path: Path) -> Path:
    with osmium.SimpleWriter(str(path)) as writer:
        for node_id in sorted(NODES):
            lat, lon = NODES[node_id]
            writer.add_node(Node(id=node_id, location=(lon, lat)))
        for way_id, refs, tags in WAYS:
            writer.add_way(Way(id=way_id, nodes=list(refs), tags=dict(tags)))
    return path


def listed(env: Mapping[str, str]) -> dict[str, str]:
    """`cleanair network list`: name -> its import time as shown."""
    result = cli(env, "network", "list")
    assert result.returncode == 0, result.stderr
    _, *rows = result.stdout.splitlines()
    return {row.split("\t")[0]: row.split("\t")[-1] for row in rows}


def plan(base: str, headers: Mapping[str, str]) -> dict[str, Any]:
    submitted = httpx.post(f"{base}/v1/routes", json=WALK, headers=dict(headers), timeout=10)
    assert submitted.status_code == 202, submitted.text
    return poll_until_finished(base, headers, submitted.json()["request_id"], within=30)


@pytest.fixture(params=["sqlite", "postgres"])
def env(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, str]:
    settings = {
        "CLEANAIR_DEFAULT_NETWORK": "true",  # the shipped Helsinki network, not Kallio
        "CLEANAIR_NETWORK_CHECK_SECONDS": str(CHECK_SECONDS),
        "CLEANAIR_PLAN_WORKERS": "0",  # plans are the worker process's
        "CLEANAIR_PLAN_WORKER_IDLE_SECONDS": "0.2",
    }
    if request.param == "postgres":
        key = tmp_path / "shared.key"
        key.write_text("c0ffee" * 11 + "\n")
        settings["CLEANAIR_DATABASE"] = request.getfixturevalue("postgres_url")
        settings["CLEANAIR_SECRET_KEY_FILE"] = str(key)
    return server_env(tmp_path, **settings)


def test_an_imported_network_is_planned_on_without_a_restart(
    env: dict[str, str], tmp_path: Path
) -> None:
    with (
        running_server(env, tmp_path / "server.log") as server,
        worker_process(env, tmp_path / "worker.log"),
    ):
        headers = pair(env, server.base)
        before = plan(server.base, headers)
        assert before["status"] == "failed"  # Kallio is outside the shipped network
        imported = cli(env, "network", "import", str(write_pbf(tmp_path / "kallio.osm.pbf")))
        assert imported.returncode == 0, imported.stderr

        # Both processes look every second; loading nine nodes takes no time.
        deadline = time.monotonic() + 10 * CHECK_SECONDS
        while "street networks reloaded" not in (tmp_path / "worker.log").read_text():
            assert time.monotonic() < deadline, (tmp_path / "worker.log").read_text()
            time.sleep(0.1)
        server.wait_for_log("street networks reloaded", timeout=10 * CHECK_SECONDS)

        after = plan(server.base, headers)
        assert after["status"] == "completed", after

    for log in ("server.log", "worker.log"):  # once: what they loaded at start is no change
        assert (tmp_path / log).read_text().count("street networks reloaded") == 1, log
    shown = listed(env)
    assert set(shown) == {"helsinki", "kallio"}
    for name, imported_at in shown.items():
        assert imported_at != "-", name  # the shipped network's import time too

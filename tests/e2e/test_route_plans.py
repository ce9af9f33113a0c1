"""End to end: asynchronous route plans on the shipped Helsinki street network (4.5, 4.6).

Real `cleanair serve` processes on one SQLite database: a plan is submitted and polled to
completion, a server killed with SIGKILL while it plans leaves the plan to a new process once
the lease runs out, and `cleanair network import` reads a real PBF file.
"""

from __future__ import annotations

import math
import os
import re
import signal
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx
import osmium
import pytest
from osmium.osm.mutable import Node, Way

from support.servers import cli, pair, plan_row, poll_until_finished, running_server

pytestmark = pytest.mark.e2e

#: Helsinki railway station to the south end of the Esplanadi, about 1 km apart as the crow
#: flies and about 1.2 km on foot. (The market square's own quay, 60.1631, lies just south of
#: the shipped extract.)
START = {"latitude": 60.1699, "longitude": 24.9384}
END = {"latitude": 60.1645, "longitude": 24.9525}
WALK = {"start": START, "end": END, "activity_type": "walking"}
LEASE_SECONDS = 2


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        "CLEANAIR_DATABASE": str(tmp_path / "var" / "cleanair.db"),
        "CLEANAIR_ENVIRONMENT": "tst",
        "CLEANAIR_PLAN_LEASE_SECONDS": str(LEASE_SECONDS),
        "CLEANAIR_DEFAULT_NETWORK": "true",
    }


def submit(base: str, headers: Mapping[str, str], body: Mapping[str, Any] = WALK) -> str:
    submitted = httpx.post(f"{base}/v1/routes", json=dict(body), headers=dict(headers), timeout=10)
    assert submitted.status_code == 202, submitted.text
    request_id = submitted.json()["request_id"]
    assert isinstance(request_id, str)
    return request_id


def networks(env: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """`cleanair network list`, parsed: name -> nodes, edges, bounds (south, west, north, east)."""
    listed = cli(env, "network", "list")
    assert listed.returncode == 0, listed.stderr
    header, *rows = listed.stdout.splitlines()
    assert header.split("\t")[:4] == ["name", "nodes", "edges", "south,west,north,east"]
    parsed = {}
    for row in rows:
        name, nodes, edges, bounds, *_ = row.split("\t")
        south, west, north, east = (float(v) for v in bounds.split(","))
        parsed[name] = {
            "nodes": int(nodes),
            "edges": int(edges),
            "bounds": (south, west, north, east),
        }
    return parsed


def inside(bounds: tuple[float, float, float, float], lat: float, lon: float) -> bool:
    south, west, north, east = bounds
    return south <= lat <= north and west <= lon <= east


def metres(a: tuple[float, float], b: tuple[float, float]) -> float:
    """Equirectangular distance: fine over a few kilometres."""
    dlat = math.radians(b[0] - a[0])
    dlon = math.radians(b[1] - a[1]) * math.cos(math.radians((a[0] + b[0]) / 2))
    return 6_371_000 * math.hypot(dlat, dlon)


def check_result(result: dict[str, Any], bounds: tuple[float, float, float, float]) -> None:
    """The PlanResult shape of contract 2.12, and that the routes are walks from start to end."""
    start, end = (START["latitude"], START["longitude"]), (END["latitude"], END["longitude"])
    direct = metres(start, end)
    assert result["activity_type"] == "walking"
    routes = result["routes"]
    assert 1 <= len(routes) <= 4
    assert 0 <= result["best_route_index"] < len(routes)
    assert direct <= result["original_distance"] <= 2.5 * direct
    assert result["original_dose"] > 0
    for route in routes:
        waypoints = route["waypoints"]
        assert len(waypoints) >= 2
        assert all(len(p) == 2 and inside(bounds, p[0], p[1]) for p in waypoints)
        assert metres(tuple(waypoints[0]), start) < 250
        assert metres(tuple(waypoints[-1]), end) < 250
        assert route["summary"]["inhaled_dose"] > 0
        assert route["summary"]["clean_air_score"]["band"] in {"1", "2", "3", "4", "5"}
        assert route["goal"]["title"]
        assert route["goal"]["description"]
        assert route["distance"] >= direct - 500  # snapped ends may each move up to 250 m
        assert route["distance_delta"] == round(route["distance"] - result["original_distance"])
        assert route["duration"] > 0
        assert len(route["measures"]["clean_air_score"]) == len(waypoints)
    # The baseline (the direct route) comes last, cleaner alternatives first.
    assert routes[-1]["distance"] == result["original_distance"]
    assert routes[-1]["distance_delta"] == 0
    for alternative in routes[:-1]:
        assert alternative["summary"]["inhaled_dose"] < result["original_dose"]
        assert alternative["dose_delta_pct"] > 0


def test_plans_survive_restarts_and_killed_servers(env: dict[str, str], tmp_path: Path) -> None:
    """Three server processes, one after the other, on one database:

    1. without runners (CLEANAIR_PLAN_WORKERS=0): it takes a plan (202, 25 credits) but plans
       nothing, and is killed; the plan waits in the database, not in the process;
    2. with runners: it plans that walk (checked in full), then is SIGKILLed in the middle of
       planning a second one it has claimed;
    3. with runners: it takes the second plan again once its lease has run out.
    """
    database = env["CLEANAIR_DATABASE"]
    idle_env = {**env, "CLEANAIR_PLAN_WORKERS": "0"}
    with running_server(idle_env, tmp_path / "idle.log") as idle:
        base = idle.base
        # First start: the shipped central-Helsinki extract was imported and stored.
        stored = networks(env)
        assert set(stored) == {"helsinki"}
        helsinki = stored["helsinki"]
        assert helsinki["nodes"] > 1000
        assert helsinki["edges"] > 1000
        bounds = helsinki["bounds"]
        assert inside(bounds, START["latitude"], START["longitude"])
        assert inside(bounds, END["latitude"], END["longitude"])

        headers = pair(env, base)
        walk = submit(base, headers)
        polled = httpx.get(f"{base}/v1/routes/{walk}", headers=headers, timeout=10)
        assert polled.json() == {"status": "pending", "result": None, "error": None}
        idle.process.send_signal(signal.SIGKILL)
        idle.process.wait(timeout=10)
    assert plan_row(database, walk)[:2] == ("pending", 0)

    with running_server(env, tmp_path / "first.log") as first:
        base = first.base
        done = poll_until_finished(base, headers, walk)
        assert done["status"] == "completed", done
        assert done["error"] is None
        check_result(done["result"], bounds)
        quota = httpx.get(f"{base}/v1/quota", headers=headers, timeout=10).json()
        assert quota["used"] == 25
        assert quota["daily_used"] == 25

        # Once a runner of this process has claimed the next plan, SIGKILL the process in the
        # middle of planning (a plan takes seconds; the claim shows in the database at once).
        crashed = submit(base, headers)
        deadline = time.monotonic() + 10
        while plan_row(database, crashed)[1] == 0:
            assert time.monotonic() < deadline, "no runner claimed the plan"
            time.sleep(0.005)
        first.process.send_signal(signal.SIGKILL)
        first.process.wait(timeout=10)
    status, attempts, lease_until = plan_row(database, crashed)
    assert (status, attempts) == ("pending", 1), "the plan finished before the kill"
    assert lease_until is not None

    # A new process on the same database takes the plan again once the lease has run out.
    with running_server(env, tmp_path / "second.log") as second:
        base = second.base
        done = poll_until_finished(base, headers, crashed)
        assert done["status"] == "completed", done
        check_result(done["result"], bounds)
        assert plan_row(database, crashed)[:2] == ("completed", 2)
        # Charged once for each plan: no second charge for the retry, no refund.
        quota = httpx.get(f"{base}/v1/quota", headers=headers, timeout=10).json()
        assert quota["used"] == 50
        # The first plan's result is still there for any later poll.
        again = httpx.get(f"{base}/v1/routes/{walk}", headers=headers, timeout=10)
        assert again.json()["status"] == "completed"


def write_pbf(path: Path, nodes: Mapping[int, tuple[float, float]], ways: list[Any]) -> Path:
    with osmium.SimpleWriter(str(path)) as writer:
        for node_id in sorted(nodes):
            lat, lon = nodes[node_id]
            writer.add_node(Node(id=node_id, location=(lon, lat)))
        for way_id, refs, tags in ways:
            writer.add_way(Way(id=way_id, nodes=list(refs), tags=dict(tags)))
    return path


def test_network_import_from_the_cli(env: dict[str, str], tmp_path: Path) -> None:
    # Three streets about 100 m apart in Kallio, and one way nobody may walk or cycle on.
    nodes = {
        1 + 3 * row + col: (60.184 + row * 0.0009, 24.95 + col * 0.0018)
        for row in range(3)
        for col in range(3)
    }
    ways = [
        (101, [1, 2, 3], {"highway": "residential"}),
        (102, [4, 5, 6], {"highway": "footway"}),
        (103, [7, 8, 9], {"highway": "cycleway"}),
        (104, [2, 5, 8], {"highway": "tertiary", "oneway": "yes"}),
        (105, [1, 4], {"highway": "service", "access": "private"}),
        (106, [3, 6], {"building": "yes"}),
    ]
    pbf = write_pbf(tmp_path / "kallio.osm.pbf", nodes, ways)

    imported = cli(env, "network", "import", str(pbf))
    assert imported.returncode == 0, imported.stderr
    assert re.fullmatch(
        r"imported network kallio: 9 nodes, 8 edges in \d+\.\d s\n", imported.stdout
    ), imported.stdout
    assert "cleanair: ways: " in imported.stderr
    assert "cleanair: nodes: 9" in imported.stderr
    assert "cleanair: edges: 8" in imported.stderr
    renamed = cli(env, "network", "import", str(pbf), "--name", "north")
    assert renamed.returncode == 0, renamed.stderr
    assert "imported network north:" in renamed.stdout
    listed = networks(env)
    assert set(listed) == {"kallio", "north"}
    assert listed["kallio"]["nodes"] == 9
    assert listed["kallio"]["edges"] == 8
    south, west, north, east = listed["kallio"]["bounds"]
    assert (south, west) == pytest.approx((60.184, 24.95))
    assert (north, east) == pytest.approx((60.1858, 24.9536))

    # Files that are no street networks: exit status 1 and one readable line, no traceback.
    garbage = tmp_path / "garbage.osm.pbf"
    garbage.write_bytes(bytes(range(256)) * 40)
    nothing_walkable = write_pbf(
        tmp_path / "motorway.osm.pbf",
        {1: (60.2, 24.9), 2: (60.201, 24.9)},
        [(1, [1, 2], {"highway": "motorway"})],
    )
    for bad, message in [
        (garbage, "cannot read the OpenStreetMap file"),
        (nothing_walkable, "no walkable or cyclable streets"),
    ]:
        failed = cli(env, "network", "import", str(bad))
        assert failed.returncode == 1, (bad, failed.stdout, failed.stderr)
        assert failed.stdout == ""
        assert failed.stderr.startswith("cleanair: ")
        assert message in failed.stderr
        assert str(bad) in failed.stderr
        assert "Traceback" not in failed.stderr

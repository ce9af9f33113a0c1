"""End to end: real CAMS-like data (one value per grid cell) downscaled to street level.

A real `cleanair serve` over a fake Open-Meteo on loopback that answers the same values for
every CAMS cell, with the shipped central-Helsinki network: two points of one CAMS cell score
differently where the traffic differs, and a walking plan finds a cleaner alternative.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from cleanair_core.geo import Point
from cleanair_sources.open_meteo import snap
from support.fake_open_meteo import FakeOpenMeteo
from support.servers import pair, running_server, server_env

pytestmark = pytest.mark.e2e

#: The kerb of Mannerheimintie, the city's main artery, and Kaisaniemi park, 600 m east.
KERB = {"lat": 60.1718, "lon": 24.9368}
QUIET = {"lat": 60.1740, "lon": 24.9470}
#: The railway station to the south end of the Esplanadi (as in test_route_plans).
WALK = {
    "start": {"latitude": 60.1699, "longitude": 24.9384},
    "end": {"latitude": 60.1645, "longitude": 24.9525},
    "activity_type": "walking",
}
POLL_EVERY = 1.1
POLL_FOR = 60.0


def test_one_cams_cell_gets_street_level_scores_and_cleaner_routes(tmp_path: Path) -> None:
    kerb, quiet = Point(KERB["lat"], KERB["lon"]), Point(QUIET["lat"], QUIET["lon"])
    assert snap(kerb) == snap(quiet)  # one CAMS Europe cell: one background value
    with FakeOpenMeteo().running() as upstream:
        env = server_env(
            tmp_path,
            CLEANAIR_AIR_QUALITY_SOURCE="open-meteo",
            CLEANAIR_OPEN_METEO_URL=upstream.url,
            CLEANAIR_DEFAULT_NETWORK="true",
            CLEANAIR_PLAN_WORKERS="1",
        )
        with running_server(env, tmp_path / "server.log") as server:
            headers = pair(env, server.base)
            scores = {}
            for name, point in (("kerb", KERB), ("quiet", QUIET)):
                answer = httpx.post(
                    f"{server.base}/v1/airquality/score", json=point, headers=headers, timeout=30
                )
                assert answer.status_code == 200, answer.text
                scores[name] = answer.json()["score"]
            assert scores["kerb"] < scores["quiet"]

            submitted = httpx.post(
                f"{server.base}/v1/routes", json=WALK, headers=headers, timeout=30
            )
            assert submitted.status_code == 202, submitted.text
            request_id = submitted.json()["request_id"]
            deadline = time.monotonic() + POLL_FOR
            while True:
                polled = httpx.get(
                    f"{server.base}/v1/routes/{request_id}", headers=headers, timeout=10
                )
                assert polled.status_code == 200, polled.text
                body: dict[str, Any] = polled.json()
                if body["status"] != "pending":
                    break
                assert time.monotonic() < deadline, "the plan is still pending"
                time.sleep(POLL_EVERY)
    assert body["status"] == "completed", body
    routes = body["result"]["routes"]
    assert len(routes) >= 2, [r["goal"] for r in routes]
    cleaner = routes[0]
    assert cleaner["dose_delta_pct"] > 0
    assert cleaner["summary"]["inhaled_dose"] < body["result"]["original_dose"]

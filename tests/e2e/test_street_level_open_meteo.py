"""End to end: real CAMS-like data (one value per grid cell) downscaled to street level.

A real `cleanair serve` over a fake Open-Meteo on loopback that answers the same values for
every CAMS cell, with the shipped central-Helsinki network: two points of one CAMS cell get
different air and scores where the traffic differs, and a walking plan finds a cleaner route.
Both look at 10:00 UTC today (midday in Helsinki): traffic, and so the street-level
contrast, is much smaller at night.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
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
KERB = Point(60.1718, 24.9368)
PARK = Point(60.1740, 24.9470)
#: From Mannerheimintie by the Kiasma museum to Kluuvi, across the busy centre.
WALK_FROM = {"latitude": 60.17207, "longitude": 24.93883}
WALK_TO = {"latitude": 60.16762, "longitude": 24.94766}
POLL_EVERY = 1.1
POLL_FOR = 60.0


def test_one_cams_cell_gets_street_level_air_and_cleaner_routes(tmp_path: Path) -> None:
    assert snap(KERB) == snap(PARK)  # one CAMS Europe cell: one background value
    midday = datetime.now(UTC).replace(hour=10, minute=0, second=0, microsecond=0)
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
            days: dict[str, dict[str, list[float | None]]] = {}
            for name, point in (("kerb", KERB), ("park", PARK)):
                forecast = httpx.post(
                    f"{server.base}/v1/airquality/forecast",
                    json={
                        "latitude": point.lat,
                        "longitude": point.lon,
                        "date": midday.date().isoformat(),
                        "timezone": "UTC",
                    },
                    headers=headers,
                    timeout=30,
                )
                assert forecast.status_code == 200, forecast.text
                days[name] = forecast.json()["measures"]
            kerb_no2, park_no2 = days["kerb"]["no2"][10], days["park"]["no2"][10]
            assert kerb_no2 is not None
            assert park_no2 is not None
            assert kerb_no2 > 1.2 * park_no2
            kerb_score, park_score = (days[n]["clean_air_score"][10] for n in ("kerb", "park"))
            assert kerb_score is not None
            assert park_score is not None
            assert kerb_score < park_score

            walk = {
                "start": WALK_FROM,
                "end": WALK_TO,
                "activity_type": "walking",
                "start_time": midday.isoformat(),
            }
            submitted = httpx.post(
                f"{server.base}/v1/routes", json=walk, headers=headers, timeout=30
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
    assert cleaner["goal"]["title"] == "Cleanest air"
    assert cleaner["dose_delta_pct"] >= 3
    assert cleaner["summary"]["inhaled_dose"] < body["result"]["original_dose"]

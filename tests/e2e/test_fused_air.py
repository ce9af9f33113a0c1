"""Station observations imported with the real CLI into the database of a running server are
fused into the air it answers with, without a restart (issue "Measured air")."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from support.servers import cli, pair, running_server, server_env

pytestmark = pytest.mark.e2e

#: In the shipped central-Helsinki network (street level applies), and a block away.
STATION = (60.1699, 24.9384)
NEARBY = (60.1702, 24.9420)


def route_no2(base: str, headers: dict[str, str], start: datetime) -> list[float]:
    answer = httpx.post(
        f"{base}/v1/airquality/routes",
        headers=headers,
        json={
            "start_time": start.isoformat().replace("+00:00", "Z"),
            "activity_type": "walking",
            "waypoints": [
                {"lat": STATION[0], "lon": STATION[1]},
                {"lat": NEARBY[0], "lon": NEARBY[1]},
            ],
        },
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    return [float(v) for v in answer.json()["measures"]["no2"]]


def test_imported_stations_correct_the_air_of_a_running_server(tmp_path: Path) -> None:
    env = server_env(
        tmp_path,
        CLEANAIR_DEFAULT_NETWORK="true",
        CLEANAIR_MONTHLY_CREDITS="100000",
        CLEANAIR_DAILY_CREDITS="100000",
    )
    # A past hour: the route's first waypoint is at its middle, the time an hourly mean is
    # compared with the background at (so the check holds at every hour of the day, however
    # fast the background changes within it).
    hour_end = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=3)
    middle = hour_end - timedelta(minutes=30)
    with running_server(env, tmp_path / "server.log") as server:
        headers = pair(env, server.base)
        before = route_no2(server.base, headers, middle)
        observed = round(before[0] + 40.0, 1)
        archive = tmp_path / "stations.csv"
        archive.write_text(
            "location_id,sensors_id,location,datetime,lat,lon,parameter,units,value\n"
            f"7,70,Kaivokatu,{hour_end.isoformat()},{STATION[0]},{STATION[1]},no2,µg/m³,"
            f"{observed}\n"
        )
        imported = cli(env, "stations", "import", str(archive))
        assert imported.returncode == 0, imported.stderr
        deadline = time.monotonic() + 30  # the server reads the store's version each second
        while (after := route_no2(server.base, headers, middle)) == before:
            assert time.monotonic() < deadline, "the server never fused the new observation"
            time.sleep(0.2)
        listed = cli(env, "stations", "list")
    # At the station: its observation, up to its noise; a block away, most of the way there.
    assert abs(after[0] - observed) <= 0.1 * (observed - before[0])
    assert before[1] + 20.0 < after[1] < observed + 5.0
    assert "openaq:7\tKaivokatu" in listed.stdout

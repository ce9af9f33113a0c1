"""End to end: `cleanair serve --workers 2` with an OpenAQ key polls from one process only,
stores what it found for all of them, and its answers are fused with it. OpenAQ is a
stand-in on this machine speaking v3's documented JSON (the internet is out of reach)."""

from __future__ import annotations

import json
import signal
import threading
import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from support.servers import cli, free_port, pair, server_env, spawn, stop, wait_until_serving

pytestmark = pytest.mark.e2e

KEY = "openaq-e2e-key-never-logged"
STATION = {"latitude": 60.17, "longitude": 24.94}


class OpenAQStandIn(BaseHTTPRequestHandler):
    """One location with an NO2 sensor whose latest value ends the current hour."""

    requests: Counter[str] = Counter()
    keys: set[str | None] = set()

    def do_GET(self) -> None:
        path = urlsplit(self.path).path
        type(self).requests[path] += 1
        type(self).keys.add(self.headers.get("X-API-Key"))
        hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
        utc = hour.isoformat().replace("+00:00", "Z")
        body: dict[str, Any]
        if path == "/v3/locations":
            sensor = {
                "id": 11,
                "name": "no2 µg/m³",
                "parameter": {"id": 7, "name": "no2", "units": "µg/m³", "displayName": "NO2"},
            }
            body = {
                "meta": {"page": 1, "limit": 1000, "found": 1},
                "results": [
                    {
                        "id": 1,
                        "name": "Mannerheimintie",
                        "coordinates": STATION,
                        "sensors": [sensor],
                        "datetimeLast": {"utc": utc, "local": utc},
                    }
                ],
            }
        elif path == "/v3/locations/1/latest":
            body = {
                "meta": {"page": 1, "limit": 1000, "found": 1},
                "results": [
                    {
                        "datetime": {"utc": utc, "local": utc},
                        "value": 321.0,
                        "coordinates": STATION,
                        "sensorsId": 11,
                        "locationsId": 1,
                    }
                ],
            }
        else:
            self.send_error(404)
            return
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def openaq() -> Iterator[str]:
    OpenAQStandIn.requests = Counter()
    OpenAQStandIn.keys = set()
    server = ThreadingHTTPServer(("127.0.0.1", 0), OpenAQStandIn)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v3"
    finally:
        server.shutdown()
        server.server_close()


def test_one_of_the_processes_polls_and_the_answers_are_fused(tmp_path: Path, openaq: str) -> None:
    env = server_env(
        tmp_path,
        CLEANAIR_OPENAQ_API_KEY=KEY,
        CLEANAIR_OPENAQ_URL=openaq,
        CLEANAIR_OPENAQ_BOX="60.10,24.85,60.25,25.10",
    )
    port = free_port()
    log = tmp_path / "server.log"
    command = spawn(env, log, "serve", "--port", str(port), "--workers", "2", session=True)
    try:
        wait_until_serving(command, log, 2, f"http://127.0.0.1:{port}/livez", within=120)
        deadline = time.monotonic() + 120
        while "openaq:1\tMannerheimintie" not in (listed := cli(env, "stations", "list")).stdout:
            assert time.monotonic() < deadline, (listed.stderr, log.read_text())
            time.sleep(0.2)
        headers = pair(env, f"http://127.0.0.1:{port}")
        now = datetime.now(UTC).isoformat().replace("+00:00", "Z")
        body = {
            "start_time": now,
            "activity_type": "walking",
            "waypoints": [
                {"lat": STATION["latitude"], "lon": STATION["longitude"]},
                {"lat": STATION["latitude"], "lon": STATION["longitude"] + 0.001},
            ],
        }
        for _ in range(6):  # answered by either process, each reading the shared store
            answer = httpx.post(
                f"http://127.0.0.1:{port}/v1/airquality/routes",
                json=body,
                headers=headers,
                timeout=30,
            )
            assert answer.status_code == 200, answer.text
            assert answer.json()["measures"]["no2"][0] > 250.0
    finally:
        stop(command, signal.SIGTERM, timeout=30)
    # Both processes started their lifespans before they answered: a second poller would
    # have asked for the locations by now.
    assert OpenAQStandIn.requests["/v3/locations"] == 1
    assert OpenAQStandIn.requests["/v3/locations/1/latest"] == 1
    assert OpenAQStandIn.keys == {KEY}
    assert KEY not in log.read_text()
    assert "\t1\t" in listed.stdout  # one observation stored

"""A stand-in for Open-Meteo's air-quality API on loopback, for end-to-end tests.

It speaks the documented format (`GET /v1/air-quality` with comma-separated `latitude` and
`longitude`, `hourly` variables, `start_date`/`end_date` and `timeformat=unixtime`: one object
per location, a list when several were asked, `location_id` on all but the first) with the same
concentrations everywhere. `hold()` makes it keep every request waiting, as an upstream that
stopped answering does, until `release()`.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, date, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

VALUES = {
    "pm10": 12.0,
    "pm2_5": 6.0,
    "nitrogen_dioxide": 15.0,
    "ozone": 55.0,
    "sulphur_dioxide": 1.0,
}


def answer(query: str) -> object:
    params = {name: values[0] for name, values in parse_qs(query).items()}
    lats = [float(v) for v in params["latitude"].split(",")]
    lons = [float(v) for v in params["longitude"].split(",")]
    first = date.fromisoformat(params["start_date"])
    last = date.fromisoformat(params["end_date"])
    start = int(datetime(first.year, first.month, first.day, tzinfo=UTC).timestamp())
    times = list(range(start, start + ((last - first).days + 1) * 86_400, 3600))
    variables = params["hourly"].split(",")
    locations: list[dict[str, object]] = []
    for index, (lat, lon) in enumerate(zip(lats, lons, strict=True)):
        location: dict[str, object] = {
            "latitude": lat,
            "longitude": lon,
            "hourly": {"time": times, **{v: [VALUES[v]] * len(times) for v in variables}},
        }
        if index:
            location["location_id"] = index
        locations.append(location)
    return locations[0] if len(locations) == 1 else locations


class FakeOpenMeteo:
    def __init__(self) -> None:
        self._answering = threading.Event()
        self._answering.set()
        self.requests = 0
        self.waiting = threading.Semaphore(0)
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                fake.requests += 1
                if not fake._answering.is_set():
                    fake.waiting.release()
                    fake._answering.wait(timeout=120)
                url = urlsplit(self.path)
                if url.path != "/v1/air-quality":
                    self.send_error(404)
                    return
                body = json.dumps(answer(url.query)).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                """Quiet: the test output is not the place for access logs."""

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def hold(self) -> None:
        """Keep every request from now on waiting, until `release()`."""
        self._answering.clear()

    def release(self) -> None:
        self._answering.set()

    @contextmanager
    def running(self) -> Iterator[FakeOpenMeteo]:
        thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self.release()
            self._server.shutdown()
            self._server.server_close()

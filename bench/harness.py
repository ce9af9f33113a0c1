"""The in-process harness: requests sent straight to an ASGI app, timed one by one.

Its own module so that `__main__` and the sections it runs (`loaded`) both import it
without importing each other.
"""

from __future__ import annotations

import json
import time
from typing import Any

SCORE_BODY = json.dumps({"lat": 60.17, "lon": 24.94}).encode()


def scope_for(method: str, path: str, token: str | None, body: bytes) -> dict[str, Any]:
    headers = [(b"host", b"bench")]
    if token:
        headers.append((b"authorization", f"Bearer {token}".encode()))
    if body:
        headers += [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": headers,
        "client": ("127.0.0.1", 5000),
        "server": ("bench", 80),
        "state": {},
    }


async def run_requests(
    app: Any, method: str, path: str, token: str | None, n: int, body: bytes = b""
) -> list[float]:
    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    status: list[int] = []

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            status.append(message["status"])

    timings = []
    for _ in range(n):
        started = time.perf_counter()
        await app(scope_for(method, path, token, body), receive, send)
        timings.append(time.perf_counter() - started)
    if set(status) != {200}:
        raise SystemExit(f"{path}: unexpected statuses {sorted(set(status))}")
    return timings

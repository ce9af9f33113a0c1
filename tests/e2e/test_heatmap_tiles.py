"""Heatmap tiles from a running `cleanair serve` with the shipped Helsinki network: the
render runs off the event loop of a real process, the streets are drawn over the
background, and a revalidation is a 304 (issue 33)."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from PIL import Image

from cleanair_core.air.tiles.geometry import px_of, py_of
from support.servers import pair, running_server, server_env

pytestmark = pytest.mark.e2e

#: Central Helsinki (Mannerheimintie near the railway station), inside the shipped network.
CENTRE = (60.1699, 24.9384)


def morning_rush() -> str:
    """A past weekday's 06:00 UTC (08:00 or 09:00 in Helsinki), inside the data window: the
    streets' traffic then stands out of the background. At the hour the test runs it may
    not: at night the street-level increments drew in the background's own colour."""
    at = datetime.now(UTC).replace(hour=6, minute=0, second=0, microsecond=0) - timedelta(days=1)
    while at.weekday() >= 5:
        at -= timedelta(days=1)
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def test_a_served_street_level_tile_and_its_revalidation(tmp_path: Path) -> None:
    env = server_env(tmp_path, CLEANAIR_DEFAULT_NETWORK="true")
    z = 16
    x, y = int(px_of(CENTRE[1], z) // 256), int(py_of(CENTRE[0], z) // 256)
    path = f"/ext/v1/airquality/tiles/no2/{z}/{x}/{y}.png?time={morning_rush()}"
    with running_server(env, tmp_path / "server.log") as server:
        headers = pair(env, server.base)
        answer = httpx.get(f"{server.base}{path}", headers=headers, timeout=60)
        assert answer.status_code == 200, answer.text
        image = Image.open(io.BytesIO(answer.content)).convert("RGBA")
        assert image.size == (256, 256)
        colours = image.getcolors(256) or []
        # The background and, over it, streets in colours of their own.
        assert len(colours) >= 2
        again = httpx.get(
            f"{server.base}{path}",
            headers={**headers, "If-None-Match": answer.headers["etag"]},
            timeout=60,
        )
        assert again.status_code == 304

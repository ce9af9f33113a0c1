"""Every endpoint that returns air answers with the fused field: the sources the composition
root builds correct the embedded model by the stored station observations."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from cleanair_core import CleanAir, ManualClock, TokenKeys, generate_key
from cleanair_core.air.observations import Observation, Station
from cleanair_core.air.pollutants import Pollutant
from cleanair_core.geo import Point
from cleanair_core.ports import Sources
from cleanair_runtime.composition.bootstrap import Deployment, build_sources
from cleanair_runtime.composition.settings import Settings
from cleanair_storage.sqlite import SqliteStore
from support.http import Client, bearer, pair

NOW = datetime(2026, 1, 15, 12, 0, tzinfo=UTC)
WHERE = Point(60.17, 24.94)
HEAVY = 400.0  # µg/m³ of PM2.5 and NO2: far above anything the model says in Helsinki


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(NOW)


@pytest.fixture
def sources(tmp_path: Path, clock: ManualClock) -> Sources:
    """The real sources over the test core's database file (a second connection to it, as
    another process would have)."""
    store = SqliteStore(tmp_path / "cleanair.db")
    settings = Settings.from_env({"CLEANAIR_DEFAULT_NETWORK": "false"})
    return build_sources(settings, store, TokenKeys(generate_key()), Deployment(), clock=clock)


def observe(core: CleanAir, *pollutants: Pollutant) -> None:
    core.store.put_stations([Station("test:1", "Mannerheimintie", WHERE)])
    core.store.put_observations(Observation("test:1", p, NOW, HEAVY) for p in pollutants)


def test_the_score_follows_the_stations(core: CleanAir, client: Client, clock: ManualClock) -> None:
    headers = bearer(pair(core, client))
    body = {"lat": WHERE.lat, "lon": WHERE.lon}
    before = client.post("/v1/airquality/score", json=body, headers=headers).json()["score"]
    observe(core, Pollutant.PM25, Pollutant.NO2)
    clock.advance(seconds=1)
    after = client.post("/v1/airquality/score", json=body, headers=headers).json()["score"]
    assert after < before - 30


def test_the_forecast_starts_at_the_stations_and_fades_back(
    core: CleanAir, client: Client, clock: ManualClock
) -> None:
    headers = bearer(pair(core, client))
    body = {"latitude": WHERE.lat, "longitude": WHERE.lon, "date": "2026-01-15", "timezone": "UTC"}
    before = client.post("/v1/airquality/forecast", json=body, headers=headers).json()
    observe(core, Pollutant.NO2)
    clock.advance(seconds=1)
    after = client.post("/v1/airquality/forecast", json=body, headers=headers).json()
    hours = [datetime.fromtimestamp(t, UTC) for t in after["timestamps"]]
    change = [
        a - b for a, b in zip(after["measures"]["no2"], before["measures"]["no2"], strict=True)
    ]
    noon = hours.index(NOW)
    assert change[noon] > 0.9 * (HEAVY - before["measures"]["no2"][noon])
    assert change[noon] > change[noon + 6] > change[-1] > 0.0  # faded, not gone, by midnight
    assert all(c == 0.0 for c in change[:noon])  # no observation came before noon


def test_route_enrichment_is_fused_at_each_waypoints_own_time(
    core: CleanAir, client: Client, clock: ManualClock
) -> None:
    headers = bearer(pair(core, client))
    body = {
        "start_time": (NOW - timedelta(minutes=30)).isoformat(),
        "activity_type": "walking",
        "waypoints": [{"lat": WHERE.lat, "lon": WHERE.lon}, {"lat": 60.20, "lon": 24.90}],
    }
    before = client.post("/v1/airquality/routes", json=body, headers=headers).json()
    observe(core, Pollutant.NO2)
    clock.advance(seconds=1)
    after = client.post("/v1/airquality/routes", json=body, headers=headers).json()
    assert after["measures"]["no2"][0] > 0.9 * HEAVY
    assert after["measures"]["no2"][1] > before["measures"]["no2"][1] + 100.0
    assert after["summary"]["inhaled_dose"] > before["summary"]["inhaled_dose"]

"""POST /ext/v1/airquality/history over the real sources (embedded model, place data,
fusion): each hour's provenance with stations near and far, and the latest hour the
conditions' own."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

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

PATH = "/ext/v1/airquality/history"
NOW = datetime(2026, 1, 15, 12, 20, tzinfo=UTC)
HOUR = datetime(2026, 1, 15, 12, 0, tzinfo=UTC)
HELSINKI = {"lat": 60.17, "lon": 24.94}


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(NOW)


@pytest.fixture
def sources(tmp_path: Path, clock: ManualClock) -> Sources:
    """The real sources over the test core's file (as the conditions' tests)."""
    store = SqliteStore(tmp_path / "cleanair.db")
    settings = Settings.from_env({"CLEANAIR_DEFAULT_NETWORK": "false"})
    return build_sources(settings, store, TokenKeys(generate_key()), Deployment(), clock=clock)


def history(client: Client, headers: dict[str, str], hours: int) -> list[dict[str, Any]]:
    body = {**HELSINKI, "start": (HOUR - timedelta(hours=hours - 1)).isoformat(), "page_size": 168}
    answer = client.post(PATH, json=body, headers=headers)
    assert answer.status_code == 200, answer.text
    found: list[dict[str, Any]] = answer.json()["hours"]
    assert len(found) == hours
    return found


def test_the_latest_hour_is_the_conditions(core: CleanAir, client: Client) -> None:
    headers = bearer(pair(core, client))
    core.store.put_stations([Station("test:1", "Kallio", Point(60.187, 24.951))])
    core.store.put_observations([Observation("test:1", Pollutant.NO2, HOUR, 90.0)])
    latest = history(client, headers, 30)[-1]
    conditions = client.post("/ext/v1/airquality/conditions", json=HELSINKI, headers=headers).json()
    assert datetime.fromisoformat(latest["time"]) == HOUR
    assert latest["clean_air_score"] == conditions["clean_air_score"]
    assert latest["pollutants"] == conditions["pollutants"]
    assert latest["indexes"] == conditions["indexes"]  # the same 24 hours behind them
    assert latest["provenance"]["source"] == conditions["provenance"]["source"]
    assert latest["provenance"]["stations"] == conditions["provenance"]["stations"]


def test_hours_a_station_nearby_measured_are_measured_and_the_rest_fused_or_modelled(
    core: CleanAir, client: Client
) -> None:
    headers = bearer(pair(core, client))
    core.store.put_stations([Station("test:1", "Kallio", Point(60.171, 24.941))])
    measured = [HOUR - timedelta(hours=k) for k in (6, 5, 4)]
    core.store.put_observations(
        [Observation("test:1", Pollutant.NO2, hour, 90.0) for hour in measured]
    )
    hours = history(client, headers, 9)  # 04:00 .. 12:00
    kinds = [hour["provenance"]["kind"] for hour in hours]
    assert kinds == ["modelled"] * 2 + ["measured"] * 3 + ["fused"] * 4
    [station] = hours[2]["provenance"]["stations"]
    assert station["id"] == "test:1"
    assert station["weight"] >= 0.5
    assert datetime.fromisoformat(station["last_value_time"]) == measured[0]
    assert hours[2]["pollutants"]["no2"]["corrected"] is True
    assert hours[0]["provenance"] == {
        "kind": "modelled",
        "source": "embedded-model",
        "stations": [],
    }


def test_a_station_far_away_fuses_but_never_measures_the_point(
    core: CleanAir, client: Client
) -> None:
    headers = bearer(pair(core, client))
    core.store.put_stations([Station("test:2", "Tallinn", Point(59.44, 24.75))])
    core.store.put_observations(
        [Observation("test:2", Pollutant.NO2, HOUR - timedelta(hours=k), 30.0) for k in (3, 2)]
    )
    kinds = [hour["provenance"]["kind"] for hour in history(client, headers, 5)]
    assert kinds == ["modelled", "fused", "fused", "fused", "fused"]

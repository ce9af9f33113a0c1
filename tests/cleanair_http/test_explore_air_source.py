"""`GET /explore/air-source`: the deployment's air source named for people and, for a point
inside a loaded network, the stations correcting its air now; public and free like the rest
of the explorer, never making the source work for a point outside every network."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from cleanair_core import CleanAir, ManualClock
from cleanair_core.air.gridded_fused_air import fused_air
from cleanair_core.air.observations import Observation, Station
from cleanair_core.air.pollutants import Pollutant
from cleanair_core.ports import Sources
from cleanair_runtime.composition.settings import Settings
from cleanair_sources.street_router import LoadedNetworks
from cleanair_storage.sqlite import SqliteStore
from support.fakes import FakeSource
from support.http import Client, MakeClient, bearer, pair
from support.networks import ORIGIN, grid

NOW = datetime(2026, 1, 15, 12, 0, tzinfo=UTC)
#: A point inside the grid network.
INSIDE = ORIGIN
OUTSIDE = (ORIGIN.lat + 1.0, ORIGIN.lon + 1.0)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(NOW)


@pytest.fixture
def background() -> FakeSource:
    return FakeSource()


@pytest.fixture
def sources(tmp_path: Path, background: FakeSource) -> Sources:
    """Fused over the test core's database file (a second connection, as in the server)."""
    store = SqliteStore(tmp_path / "cleanair.db")
    return Sources(fused_air(background, store), networks=LoadedNetworks([grid(3, 3)]))


def observe(core: CleanAir) -> None:
    core.store.put_stations([Station("test:1", "Mannerheimintie", INSIDE)])
    core.store.put_observations(
        Observation("test:1", pollutant, NOW, 40.0) for pollutant in (Pollutant.NO2, Pollutant.PM25)
    )


def test_without_observations_the_source_is_named_and_nothing_is_fused(client: Client) -> None:
    answer = client.get("/explore/air-source", params={"lat": INSIDE.lat, "lon": INSIDE.lon})
    assert answer.status_code == 200
    assert answer.headers["cache-control"] == "no-store"
    body = answer.json()
    assert body["source"] == "embedded"
    assert body["label"].startswith("the embedded air-quality model")
    assert body["fused"] is False
    assert body["stations"] == []
    assert body["at"] == "2026-01-15T12:00:00Z"


def test_the_stations_correcting_a_point_are_listed_with_their_hour(
    core: CleanAir, client: Client
) -> None:
    observe(core)
    body = client.get("/explore/air-source", params={"lat": INSIDE.lat, "lon": INSIDE.lon}).json()
    assert body["fused"] is True
    assert body["stations"] == ["test:1"]
    assert [entry["pollutant"] for entry in body["pollutants"]] == ["no2", "pm25"]
    for entry in body["pollutants"]:
        assert entry["stations"] == ["test:1"]
        assert entry["hour_end"] == "2026-01-15T12:00:00Z"


def test_a_point_outside_every_network_is_not_asked_for(
    core: CleanAir, client: Client, background: FakeSource
) -> None:
    observe(core)
    body = client.get("/explore/air-source", params={"lat": OUTSIDE[0], "lon": OUTSIDE[1]}).json()
    assert background.samples == []
    assert body["source"] == "embedded"
    assert body["stations"] == []


def test_open_meteo_is_named_for_people(make_client: MakeClient) -> None:
    settings = Settings.from_env({"CLEANAIR_AIR_QUALITY_SOURCE": "open-meteo"})
    body = make_client(settings).get("/explore/air-source").json()
    assert body == {
        "source": "open-meteo",
        "label": "CAMS forecasts via Open-Meteo",
        "fused": False,
        "stations": [],
        "pollutants": [],
        "at": "2026-01-15T12:00:00Z",
    }


@pytest.mark.parametrize("query", ["lat=91&lon=0", "lat=0&lon=181", "lat=north&lon=0"])
def test_an_invalid_point_is_refused_without_echoing_it(client: Client, query: str) -> None:
    answer = client.get(f"/explore/air-source?{query}")
    assert answer.status_code == 422
    assert "north" not in answer.text
    assert "91" not in answer.text
    assert "181" not in answer.text


def test_it_needs_no_token_costs_nothing_and_is_not_in_the_openapi_document(
    core: CleanAir, client: Client
) -> None:
    token = pair(core, client)
    before = client.get("/v1/quota", headers=bearer(token)).json()
    where = {"lat": INSIDE.lat, "lon": INSIDE.lon}
    assert client.get("/explore/air-source", params=where, headers=bearer(token)).status_code == 200
    assert client.get("/v1/quota", headers=bearer(token)).json() == before
    assert "/explore/air-source" not in client.get("/schema/openapi.json").json()["paths"]

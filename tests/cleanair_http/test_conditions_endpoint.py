"""POST /ext/v1/airquality/conditions: a point's score, concentrations, official indexes and
provenance, with the contract's auth, credits and error envelope (the extension API)."""

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

PATH = "/ext/v1/airquality/conditions"
NOW = datetime(2026, 1, 15, 12, 20, tzinfo=UTC)
HOUR = datetime(2026, 1, 15, 12, 0, tzinfo=UTC)
HELSINKI = {"lat": 60.17, "lon": 24.94}


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(NOW)


@pytest.fixture
def sources(tmp_path: Path, clock: ManualClock) -> Sources:
    """The real sources (embedded model, place data, fusion) over the test core's file."""
    store = SqliteStore(tmp_path / "cleanair.db")
    settings = Settings.from_env({"CLEANAIR_DEFAULT_NETWORK": "false"})
    return build_sources(settings, store, TokenKeys(generate_key()), Deployment(), clock=clock)


def remaining(client: Client, headers: dict[str, str]) -> int:
    value: int = client.get("/v1/quota", headers=headers).json()["remaining"]
    return value


def ask(client: Client, headers: dict[str, str], **body: Any) -> Any:
    return client.post(PATH, json=body, headers=headers)


def test_the_places_own_index_with_its_averages_advice_and_provenance(
    core: CleanAir, client: Client
) -> None:
    headers = bearer(pair(core, client))
    before = remaining(client, headers)
    answer = ask(client, headers, **HELSINKI)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert remaining(client, headers) == before - 1  # the score's price
    assert 0 <= body["clean_air_score"] <= 100
    assert set(body["pollutants"]) == {"pm25", "pm10", "no2", "o3", "so2"}
    assert all(p["units"] == "ug/m3" for p in body["pollutants"].values())
    [index] = body["indexes"]  # Finland: the European index only
    assert index["code"] == "eu_eaqi_2024"
    assert 1 <= index["value"] <= 6
    assert index["colour"].startswith("#")
    assert index["dominant_pollutant"] in index["concentrations"]
    no2 = index["concentrations"]["no2"]
    assert no2["averaging"] == "1h"
    assert no2["concentration"] == pytest.approx(body["pollutants"]["no2"]["concentration"])
    assert body["health"] == {"index": "eu_eaqi_2024", **index["health"]}
    provenance = body["provenance"]
    assert provenance["source"] == "embedded-model"
    assert datetime.fromisoformat(provenance["data_time"]) == HOUR
    assert provenance["age_seconds"] == 20 * 60
    assert provenance["stations"] == []


def test_indexes_asked_for_and_their_averaging_periods(core: CleanAir, client: Client) -> None:
    headers = bearer(pair(core, client))
    body = ask(client, headers, **HELSINKI, indexes=["us_epa_2024", "uk_daqi"]).json()
    us, uk = body["indexes"]
    assert (us["code"], uk["code"]) == ("us_epa_2024", "uk_daqi")
    assert us["concentrations"]["pm25"]["averaging"] == "nowcast"  # 24 hours of history
    assert us["concentrations"]["o3"]["averaging"] == "8h"
    assert uk["concentrations"]["pm10"]["averaging"] == "24h"
    assert 0 <= us["value"] <= 500
    assert 1 <= uk["value"] <= 10
    assert body["health"]["index"] == "us_epa_2024"


@pytest.mark.parametrize(
    ("where", "codes"),
    [
        ({"lat": 40.71, "lon": -74.0}, ["us_epa_2024"]),
        ({"lat": 51.51, "lon": -0.13}, ["uk_daqi"]),
        ({"lat": 0.0, "lon": -30.0}, ["us_epa_2024", "eu_eaqi_2024", "uk_daqi"]),  # at sea
    ],
)
def test_the_default_follows_the_country(
    core: CleanAir, client: Client, where: dict[str, float], codes: list[str]
) -> None:
    headers = bearer(pair(core, client))
    body = ask(client, headers, **where).json()
    assert [index["code"] for index in body["indexes"]] == codes


@pytest.mark.parametrize(
    ("body", "field", "rule"),
    [
        ({**HELSINKI, "indexes": ["zq_index"]}, "indexes.0", "enum"),
        ({**HELSINKI, "indexes": []}, "indexes", "too_short"),
        ({**HELSINKI, "indexes": ["uk_daqi", "uk_daqi"]}, "indexes", "unique"),
        ({"lat": 60.17}, "lon", "required"),
        ({}, "lat", "required"),
        ({**HELSINKI, "client": "not a label!"}, "client", "pattern"),
        ({**HELSINKI, "group": "zq_index"}, "group", "enum"),
    ],
    ids=[
        "unknown-index",
        "no-index",
        "repeated-index",
        "lat-alone",
        "nowhere",
        "bad-client",
        "unknown-group",
    ],
)
def test_bad_requests_are_422_naming_the_field_and_free(
    core: CleanAir, client: Client, body: dict[str, Any], field: str, rule: str
) -> None:
    headers = bearer(pair(core, client))
    before = remaining(client, headers)
    answer = client.post(PATH, json=body, headers=headers)
    assert answer.status_code == 422
    assert answer.json()["detail"] == "Request validation failed"
    assert [(e["field"], e["rule"]) for e in answer.json()["errors"]] == [(field, rule)]
    assert "zq_index" not in answer.text
    assert "not a label" not in answer.text
    assert remaining(client, headers) == before


def test_the_contracts_auth_applies(core: CleanAir, client: Client) -> None:
    assert client.post(PATH, json=HELSINKI).status_code == 401
    headers = bearer(pair(core, client))
    core.set_premium("alice", False)
    answer = client.post(PATH, json=HELSINKI, headers=headers)
    assert answer.status_code == 403
    assert set(answer.json()) == {"detail"}


def test_stations_nearby_are_the_provenance(
    core: CleanAir, client: Client, clock: ManualClock
) -> None:
    headers = bearer(pair(core, client))
    core.store.put_stations([Station("test:1", "Kallio", Point(60.187, 24.951))])
    core.store.put_observations([Observation("test:1", Pollutant.NO2, HOUR, 90.0)])
    clock.advance(seconds=1)
    body = ask(client, headers, **HELSINKI).json()
    provenance = body["provenance"]
    assert provenance["source"] == "embedded-model+stations"
    [station] = provenance["stations"]
    assert (station["id"], station["name"]) == ("test:1", "Kallio")
    assert station["distance_m"] == pytest.approx(2_030, abs=50)
    assert datetime.fromisoformat(station["last_value_time"]) == HOUR
    assert body["pollutants"]["no2"]["concentration"] > 60.0  # corrected towards 90


def test_a_station_that_moves_the_value_is_named_wherever_it_is(
    core: CleanAir, client: Client, clock: ManualClock
) -> None:
    """80 km away, a station still weighs in (within its support): it is named with its
    weight, and the value is labelled corrected (it was named only within 50 km)."""
    headers = bearer(pair(core, client))
    core.store.put_stations([Station("test:2", "Tallinn", Point(59.44, 24.75))])
    core.store.put_observations(
        [Observation("test:2", Pollutant.NO2, HOUR - timedelta(hours=1), 30.0)]
    )
    clock.advance(seconds=1)
    body = ask(client, headers, **HELSINKI).json()
    [station] = body["provenance"]["stations"]
    assert station["id"] == "test:2"
    assert station["distance_m"] == pytest.approx(82_000, abs=1_000)
    assert station["weight"] >= 0.01
    assert body["provenance"]["source"] == "embedded-model+stations"
    assert body["pollutants"]["no2"]["corrected"] is True
    assert body["pollutants"]["pm25"]["corrected"] is False


def test_a_station_beyond_its_support_is_neither_named_nor_corrects(
    core: CleanAir, client: Client, clock: ManualClock
) -> None:
    headers = bearer(pair(core, client))
    core.store.put_stations([Station("test:3", "Dongsi", Point(39.929, 116.417))])
    core.store.put_observations([Observation("test:3", Pollutant.NO2, HOUR, 300.0)])
    clock.advance(seconds=1)
    body = ask(client, headers, **HELSINKI).json()
    assert body["provenance"]["stations"] == []
    assert body["provenance"]["source"] == "embedded-model"
    assert not any(value["corrected"] for value in body["pollutants"].values())


def test_every_concentration_has_a_standard_error_and_a_90_percent_interval(
    core: CleanAir, client: Client
) -> None:
    headers = bearer(pair(core, client))
    body = ask(client, headers, **HELSINKI).json()
    for value in body["pollutants"].values():
        low, high = value["interval90"]
        assert value["standard_error"] > 0.0
        assert 0.0 <= low <= value["concentration"] <= high
        assert high - value["concentration"] == pytest.approx(
            1.645 * value["standard_error"], abs=0.02
        )
    worst, best = body["clean_air_score_interval90"]
    assert worst <= body["clean_air_score"] <= best
    assert worst < best


ALL_INDEXES = ["us_epa_2024", "eu_eaqi_2024", "uk_daqi"]
EPA_GROUPS = [
    "heart_or_lung_disease",
    "older_adults",
    "children_and_teens",
    "outdoor_workers",
    "active_people",
]


def test_each_index_carries_general_advice_and_each_group_it_names(
    core: CleanAir, client: Client
) -> None:
    headers = bearer(pair(core, client))
    body = ask(client, headers, **HELSINKI, indexes=ALL_INDEXES).json()
    us, eu, uk = body["indexes"]
    groups = [[a["group"] for a in index["advice"]] for index in (us, eu, uk)]
    assert groups == [["general", *EPA_GROUPS], ["general", "sensitive"], ["general", "at_risk"]]
    for index in (us, eu, uk):
        general, *_ = index["advice"]
        assert general["advice"] == index["health"]["general"]  # the existing field, as it was
        for entry in index["advice"]:
            assert entry["advice"]
            assert entry["source"]["url"].startswith("https://")
    assert eu["advice"][1]["advice"] == eu["health"]["sensitive"]
    assert uk["advice"][1]["advice"] == uk["health"]["sensitive"]
    assert "European Environment Agency" in eu["advice"][1]["source"]["document"]
    assert "Defra" in uk["advice"][1]["source"]["document"]
    # The EPA's statements are those of the pollutant that set the AQI.
    pollutant = {
        "pm25": "PM2.5",
        "pm10": "PM10",
        "o3": "ozone",
        "no2": "nitrogen dioxide",
        "so2": "sulfur",
    }
    assert (
        pollutant[us["dominant_pollutant"]] in us["advice"][1]["source"]["section"]
        or (
            us["advice"][1]["source"]["summary"]  # a category whose statement names no group
        )
    )


@pytest.mark.parametrize(
    ("group", "answered"),
    [
        ("older_adults", ["older_adults", "general", "general"]),
        ("sensitive", ["general", "sensitive", "general"]),
        ("at_risk", ["general", "general", "at_risk"]),
        ("general", ["general", "general", "general"]),
    ],
)
def test_asking_for_one_group_gives_its_advice_or_the_general_where_an_index_names_none(
    core: CleanAir, client: Client, group: str, answered: list[str]
) -> None:
    headers = bearer(pair(core, client))
    everyone = ask(client, headers, **HELSINKI, indexes=ALL_INDEXES).json()["indexes"]
    body = ask(client, headers, **HELSINKI, indexes=ALL_INDEXES, group=group).json()
    assert [[a["group"] for a in index["advice"]] for index in body["indexes"]] == [
        [g] for g in answered
    ]
    for one, every in zip(body["indexes"], everyone, strict=True):
        assert one["advice"][0] in every["advice"]
        assert one["health"] == every["health"]


def test_the_schemas_group_ids_are_the_cores(client: Client) -> None:
    from cleanair_core.air.indexes.advice import Group

    document = client.get("/schema/openapi.json").json()
    schemas = document["components"]["schemas"]
    ids = enums_in(schemas["ConditionsRequest"]["properties"]["group"])
    assert sorted(ids) == sorted(g.value for g in Group)
    assert sorted(enums_in(schemas["GroupAdvice"]["properties"]["group"])) == sorted(ids)


def enums_in(schema: Any) -> list[str]:
    """The values of the first `enum` anywhere in a (nested) JSON schema."""
    if isinstance(schema, dict):
        if "enum" in schema:
            return [value for value in schema["enum"] if value is not None]  # null: optional
        schema = list(schema.values())
    if isinstance(schema, list):
        for part in schema:
            found = enums_in(part)
            if found:
                return found
    return []


def test_the_openapi_document_names_the_extension_apart(client: Client) -> None:
    document = client.get("/schema/openapi.json").json()
    assert document["info"]["version"] == "1.0.0"
    operation = document["paths"][PATH]["post"]
    assert operation["tags"] == ["extension v1.0.0"]
    assert set(operation["responses"]) >= {"200", "401", "403", "422", "429", "503"}
    assert "Retry-After" in operation["responses"]["429"]["headers"]
    schemas = document["components"]["schemas"]
    assert "µg/m³" in schemas["IndexConcentration"]["properties"]["concentration"]["description"]


def test_a_spent_daily_burst_is_429_with_retry_after(core: CleanAir, client: Client) -> None:
    headers = bearer(pair(core, client))
    statuses = [ask(client, headers, **HELSINKI).status_code for _ in range(100)]
    assert set(statuses) == {200}  # the test policy's daily burst: 100 credits
    refused = ask(client, headers, **HELSINKI)
    assert refused.status_code == 429
    assert int(refused.headers["Retry-After"]) > 0
    assert set(refused.json()) == {"detail"}

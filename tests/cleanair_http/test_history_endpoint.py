"""POST /ext/v1/airquality/history: a point's past hours, paged, with the contract's auth,
credits, rate limit and error envelope (every status it answers)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from cleanair_core import CleanAir, ManualClock, Policy, TokenKeys, generate_key
from cleanair_core.access.scopes import Scope
from cleanair_core.credits.ledger import CreditLimits
from cleanair_core.ports import Sources
from cleanair_http.offloading import here_or_in_thread, in_thread
from cleanair_storage.sqlite import SqliteStore
from support.fakes import FakeSource
from support.http import Client, bearer, pair, user_token

PATH = "/ext/v1/airquality/history"
NOW = datetime(2026, 1, 15, 12, 20, tzinfo=UTC)
HOUR = datetime(2026, 1, 15, 12, 0, tzinfo=UTC)
HELSINKI = {"lat": 60.17, "lon": 24.94}
#: The module's rate limit: low enough to reach in a test.
REQUESTS_PER_MINUTE = 40


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(NOW)


@pytest.fixture
def core(tmp_path: Path, clock: ManualClock, sources: Sources) -> Iterator[CleanAir]:
    store = SqliteStore(tmp_path / "cleanair.db")
    policy = Policy(
        credits=CreditLimits(monthly=1000, daily=100), requests_per_minute=REQUESTS_PER_MINUTE
    )
    yield CleanAir(
        store,
        TokenKeys(generate_key()),
        policy,
        clock,
        sources=sources,
        offload=in_thread,
        store_calls=here_or_in_thread,
    )
    store.close()


@pytest.fixture
def source(sources: Sources) -> FakeSource:
    air = sources.air_quality
    assert isinstance(air, FakeSource)
    return air


def used(client: Client, headers: dict[str, str]) -> int:
    value: int = client.get("/v1/quota", headers=headers).json()["used"]
    return value


def iso(at: datetime) -> str:
    return at.isoformat()


def ask(http: Client, headers: dict[str, str], **body: Any) -> Any:
    return http.post(PATH, json={**HELSINKI, **body}, headers=headers)


# -- 200 ----------------------------------------------------------------------------------------


def test_pages_cover_the_span_once_and_only_the_first_is_charged(
    core: CleanAir, client: Client
) -> None:
    headers = bearer(pair(core, client))
    start = NOW - timedelta(hours=50)  # 10:20 two days ago: its hour 10:00, to 12:00 today
    body = {"start": iso(start), "page_size": 24}
    first = ask(client, headers, **body)
    assert first.status_code == 200, first.text
    assert used(client, headers) == 6  # 51 hours: 3 started days, 2 credits each
    times: list[datetime] = []
    page = first.json()
    pages = 1
    while True:
        times.extend(datetime.fromisoformat(hour["time"]) for hour in page["hours"])
        if "next_page_token" not in page:
            break
        following = ask(client, headers, **body, page_token=page["next_page_token"])
        assert following.status_code == 200, following.text
        page = following.json()
        pages += 1
    assert pages == 3
    assert times == [HOUR - timedelta(hours=k) for k in range(50, -1, -1)]
    assert used(client, headers) == 6  # the later pages are free


def test_an_hours_shape_is_the_conditions_with_its_provenance(
    core: CleanAir, client: Client
) -> None:
    headers = bearer(pair(core, client))
    answer = ask(client, headers, start=iso(HOUR - timedelta(hours=1)), indexes=["us_epa_2024"])
    assert answer.status_code == 200, answer.text
    hours = answer.json()["hours"]
    assert [datetime.fromisoformat(h["time"]) for h in hours] == [HOUR - timedelta(hours=1), HOUR]
    hour = hours[-1]
    assert 0 <= hour["clean_air_score"] <= 100
    assert set(hour["pollutants"]) == {"pm25", "no2", "o3"}  # the fake has no PM10
    assert hour["pollutants"]["no2"]["concentration"] == 18.0
    assert hour["pollutants"]["no2"]["units"] == "ug/m3"
    [index] = hour["indexes"]
    assert index["code"] == "us_epa_2024"
    assert set(index) >= {"value", "category", "colour", "concentrations", "health"}
    assert hour["provenance"] == {"kind": "modelled", "source": "embedded-model", "stations": []}
    assert "next_page_token" not in answer.json()


def test_each_hours_indexes_carry_the_advice_per_group_and_a_group_narrows_it(
    core: CleanAir, client: Client
) -> None:
    """As the conditions' (one shape): the general population's and each group's the index
    names, or with `group` that group's only, which may change from page to page."""
    headers = bearer(pair(core, client))
    body = {"start": iso(HOUR - timedelta(hours=3)), "indexes": ["eu_eaqi_2024"], "page_size": 2}
    first = ask(client, headers, **body).json()
    [index] = first["hours"][0]["indexes"]
    assert [a["group"] for a in index["advice"]] == ["general", "sensitive"]
    assert all(a["advice"] and a["source"]["url"] for a in index["advice"])
    following = ask(client, headers, **body, group="sensitive", page_token=first["next_page_token"])
    assert following.status_code == 200, following.text
    for hour in following.json()["hours"]:
        [narrowed] = hour["indexes"]
        assert [a["group"] for a in narrowed["advice"]] == ["sensitive"]


def test_a_client_label_is_booked_and_the_day_price_follows_the_span(
    core: CleanAir, client: Client
) -> None:
    core.add_client_label("ios-app")
    headers = bearer(pair(core, client))
    assert (
        ask(client, headers, start=iso(NOW - timedelta(hours=23)), client="ios-app").status_code
        == 200
    )
    assert used(client, headers) == 2  # 24 hours: one day
    assert ask(client, headers, start=iso(NOW - timedelta(days=30))).status_code == 200
    assert used(client, headers) == 2 + 62  # 721 hours: 31 started days
    assert core.usage_by_label("alice") == {"client:ios-app": 2, "history": 62}


def test_an_hour_without_data_has_no_score_and_the_others_are_answered(
    core: CleanAir, client: Client, source: FakeSource
) -> None:
    gap = HOUR - timedelta(hours=2)
    source.by_sample = lambda _, sample: {} if sample.at == gap else dict(source.air)
    headers = bearer(pair(core, client))
    answer = ask(client, headers, start=iso(HOUR - timedelta(hours=4)), indexes=["uk_daqi"])
    assert answer.status_code == 200, answer.text
    by_time = {datetime.fromisoformat(h["time"]): h for h in answer.json()["hours"]}
    assert len(by_time) == 5
    missing = by_time[gap]
    assert (missing["clean_air_score"], missing["pollutants"], missing["indexes"]) == (None, {}, [])
    assert all(h["clean_air_score"] is not None for t, h in by_time.items() if t != gap)
    assert used(client, headers) == 2


# -- 400 ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        {"start": iso(NOW - timedelta(days=30, seconds=1))},
        {"start": iso(NOW - timedelta(hours=1)), "end": iso(NOW + timedelta(minutes=1))},
        {"start": "9999-12-31T23:00:00-05:00"},
        {"start": iso(NOW + timedelta(hours=1))},
    ],
    ids=["over-30-days-back", "into-the-future", "beyond-utc", "starting-later"],
)
def test_outside_the_past_window_is_400_and_free(
    core: CleanAir, client: Client, body: dict[str, Any]
) -> None:
    headers = bearer(pair(core, client))
    answer = ask(client, headers, **body)
    assert answer.status_code == 400
    assert answer.json() == {"detail": "History times must lie between 30 days ago and now"}
    assert used(client, headers) == 0


# -- 401, 403 -----------------------------------------------------------------------------------


def test_no_token_is_401(client: Client) -> None:
    answer = client.post(PATH, json={**HELSINKI, "start": iso(NOW - timedelta(hours=2))})
    assert answer.status_code == 401
    assert answer.headers["WWW-Authenticate"].startswith("Bearer")


def test_the_scope_and_a_premium_owner_are_needed(core: CleanAir, client: Client) -> None:
    body = {"start": iso(NOW - timedelta(hours=2))}
    limited = bearer(user_token(core, "bob", [Scope.ROUTES_PLAN]))
    answer = ask(client, limited, **body)
    assert answer.status_code == 403
    assert "aq:read" in answer.json()["detail"]
    headers = bearer(pair(core, client))
    core.set_premium("alice", False)
    assert ask(client, headers, **body).status_code == 403


# -- 422 ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "field", "rule"),
    [
        ({"start": iso(NOW - timedelta(hours=2)), "page_size": 0}, "page_size", "minimum"),
        ({"start": iso(NOW - timedelta(hours=2)), "page_size": 169}, "page_size", "maximum"),
        (
            {"start": iso(NOW - timedelta(hours=2)), "end": iso(NOW - timedelta(hours=3))},
            "end",
            "minimum",
        ),
        ({"start": iso(NOW - timedelta(hours=2)), "indexes": ["zq_index"]}, "indexes.0", "enum"),
        ({"start": iso(NOW - timedelta(hours=2)), "page_token": ""}, "page_token", "too_short"),
        (
            {"start": iso(NOW - timedelta(hours=2)), "page_token": "a" * 513},
            "page_token",
            "too_long",
        ),
        ({"start": iso(NOW - timedelta(hours=2)), "page_token": 918273645}, "page_token", "type"),
        ({"start": iso(NOW - timedelta(hours=2)), "client": "not a label!"}, "client", "pattern"),
        ({"start": iso(NOW - timedelta(hours=2)), "lat": 91}, "lat", "maximum"),
        ({"start": iso(NOW - timedelta(hours=2)), "group": "zq_index"}, "group", "enum"),
        ({}, "start", "required"),
        ({"start": "yesterday"}, "start", "format"),
    ],
    ids=[
        "page-0",
        "page-169",
        "end-before-start",
        "unknown-index",
        "empty-token",
        "long-token",
        "number-token",
        "bad-client",
        "lat-91",
        "unknown-group",
        "no-start",
        "bad-start",
    ],
)
def test_bad_requests_are_422_naming_the_field_and_free(
    core: CleanAir, client: Client, body: dict[str, Any], field: str, rule: str
) -> None:
    headers = bearer(pair(core, client))
    answer = ask(client, headers, **body)
    assert answer.status_code == 422, answer.text
    assert answer.json()["detail"] == "Request validation failed"
    assert [(e["field"], e["rule"]) for e in answer.json()["errors"]] == [(field, rule)]
    for sent in ("zq_index", "yesterday", "918273645", "not a label", "aaaa"):
        assert sent not in answer.text
    assert used(client, headers) == 0


def _first_token(client: Client, headers: dict[str, str], body: dict[str, Any]) -> str:
    answer = ask(client, headers, **body)
    assert answer.status_code == 200, answer.text
    token: str = answer.json()["next_page_token"]
    return token


def _refused_token(client: Client, headers: dict[str, str], **body: Any) -> None:
    answer = ask(client, headers, **body)
    assert answer.status_code == 422, answer.text
    assert answer.json()["errors"] == [
        {
            "field": "page_token",
            "rule": "invalid",
            "message": "is not a page token of this request",
        }
    ]


def test_a_tampered_foreign_or_misused_token_is_422_and_free(
    core: CleanAir, client: Client
) -> None:
    alice = bearer(pair(core, client))
    body = {"start": iso(NOW - timedelta(hours=48)), "page_size": 24}
    token = _first_token(client, alice, body)
    spent = used(client, alice)
    tampered = token[:5] + ("A" if token[5] != "A" else "B") + token[6:]
    _refused_token(client, alice, **body, page_token=tampered)
    # Another request's body: a longer span, another point, other indexes.
    _refused_token(
        client, alice, **{**body, "start": iso(NOW - timedelta(days=20))}, page_token=token
    )
    _refused_token(client, alice, **body, lat=51.5, page_token=token)
    _refused_token(client, alice, **body, indexes=["uk_daqi"], page_token=token)
    assert used(client, alice) == spent
    # Another user's connection.
    bob = bearer(pair(core, client, user="bob"))
    _refused_token(client, bob, **body, page_token=token)
    assert used(client, bob) == 0
    assert (
        token
        not in client.post(
            PATH, json={**HELSINKI, **body, "page_token": token + "x"}, headers=alice
        ).text
    )


def test_a_token_expires_an_hour_after_its_first_page(
    core: CleanAir, client: Client, clock: ManualClock
) -> None:
    headers = bearer(pair(core, client))
    body = {"start": iso(NOW - timedelta(hours=48)), "page_size": 24}
    token = _first_token(client, headers, body)
    clock.advance(seconds=3601)
    answer = ask(client, headers, **body, page_token=token)
    assert answer.status_code == 422
    assert answer.json()["errors"][0]["message"] == "has expired: ask again without it"


# -- 429 ----------------------------------------------------------------------------------------


def test_a_span_over_the_days_credits_left_is_429_and_free(core: CleanAir, client: Client) -> None:
    headers = bearer(pair(core, client))
    body = {"start": iso(NOW - timedelta(days=30))}
    assert ask(client, headers, **body).status_code == 200
    refused = ask(client, headers, **body)  # 62 more: over the daily burst of 100
    assert refused.status_code == 429
    assert int(refused.headers["Retry-After"]) > 0
    assert set(refused.json()) == {"detail"}
    assert used(client, headers) == 62


def test_the_rate_limit_counts_free_pages_too(core: CleanAir, client: Client) -> None:
    headers = bearer(pair(core, client))
    body = {"start": iso(NOW - timedelta(hours=48)), "page_size": 1}
    token = _first_token(client, headers, body)
    statuses = [
        ask(client, headers, **body, page_token=token).status_code
        for _ in range(REQUESTS_PER_MINUTE)
    ]
    assert statuses[-1] == 429
    assert set(statuses[:-2]) == {200}


# -- 503 ----------------------------------------------------------------------------------------


def test_an_unavailable_source_is_503_and_refunded(
    core: CleanAir, client: Client, source: FakeSource
) -> None:
    headers = bearer(pair(core, client))
    source.fail = True
    answer = ask(client, headers, start=iso(NOW - timedelta(hours=5)))
    assert answer.status_code == 503
    assert "Retry-After" in answer.headers
    assert used(client, headers) == 0


def test_no_data_for_any_hour_is_503_and_refunded(
    core: CleanAir, client: Client, source: FakeSource
) -> None:
    headers = bearer(pair(core, client))
    source.air = {}
    answer = ask(client, headers, start=iso(NOW - timedelta(hours=5)))
    assert answer.status_code == 503
    assert used(client, headers) == 0


# -- the document -------------------------------------------------------------------------------


def test_the_openapi_document_describes_every_status(client: Client) -> None:
    document = client.get("/schema/openapi.json").json()
    operation = document["paths"][PATH]["post"]
    assert operation["tags"] == ["extension v1.0.0"]
    assert set(operation["responses"]) >= {"200", "400", "401", "403", "422", "429", "503"}
    schemas = document["components"]["schemas"]
    assert "page_token" in schemas["HistoryRequest"]["properties"]

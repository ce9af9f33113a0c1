"""The extension's 422 (issue 31): under /ext/v1 it lists each failing field and rule
(`errors`), generated here from the request structs themselves so that every body field is
covered, and it never echoes a value; /v1 keeps the contract's fixed text, byte for byte."""

from __future__ import annotations

import copy
import enum
import types
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import msgspec
import pytest

from cleanair_core import CleanAir, ManualClock
from cleanair_http import extension_schemas as ext
from cleanair_http.violations import MAX_VIOLATIONS
from cleanair_runtime.composition.settings import Settings
from support.http import Client, MakeClient, bearer, pair

NOW = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
DETAIL = "Request validation failed"
#: Values that must never come back in an answer.
WORD = "zq-sentinel-7731"
NUMBER = 918273645

DEPARTURES = "/ext/v1/routes/departures"
CONDITIONS = "/ext/v1/airquality/conditions"
#: A valid body of each endpoint: every optional field present, so each can be broken.
VALID: dict[str, tuple[type[msgspec.Struct], dict[str, Any]]] = {
    DEPARTURES: (
        ext.DeparturesRequest,
        {
            "start": {"latitude": 60.17, "longitude": 24.94},
            "end": {"latitude": 60.18, "longitude": 24.95},
            "activity_type": "walking",
            "earliest": "2026-11-22T11:00:00Z",
            "latest": "2026-11-22T13:00:00Z",
            "step_minutes": 60,
        },
    ),
    CONDITIONS: (
        ext.ConditionsRequest,
        {
            "wifi": [{"mac": "02:1a:2b:3c:4d:5e", "rssi": -48}],
            "lat": 60.17,
            "lon": 24.94,
            "client": "kitchen-display",
            "indexes": ["uk_daqi"],
            "group": "at_risk",
        },
    ),
}


def unwrapped(kind: Any) -> tuple[Any, list[msgspec.Meta]]:
    """The type without Annotated and an optional's None, and its constraints."""
    metas: list[msgspec.Meta] = []
    while True:
        if get_origin(kind) is Annotated:
            kind, *extras = get_args(kind)
            metas += [extra for extra in extras if isinstance(extra, msgspec.Meta)]
        elif get_origin(kind) in (Union, types.UnionType):
            (kind,) = [m for m in get_args(kind) if m is not type(None)]
        else:
            return kind, metas


def fields(kind: type[msgspec.Struct], prefix: str = "") -> Iterator[tuple[str, Any, bool]]:
    """Every field of a body, nested ones and a list's first item included: its dotted path,
    its type and whether it is required."""
    for field in msgspec.structs.fields(kind):
        path = prefix + field.encode_name
        yield path, field.type, field.required
        bare, _ = unwrapped(field.type)
        if isinstance(bare, type) and issubclass(bare, msgspec.Struct):
            yield from fields(bare, f"{path}.")
        elif get_origin(bare) is list:
            (item,) = get_args(bare)
            yield f"{path}.0", item, True
            item_bare, _ = unwrapped(item)
            if isinstance(item_bare, type) and issubclass(item_bare, msgspec.Struct):
                yield from fields(item_bare, f"{path}.0.")


def with_value(body: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    changed = copy.deepcopy(body)
    *parents, last = path.split(".")
    node: Any = changed
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node[key]
    if value is DELETE:
        del node[last]
    elif isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return changed


DELETE = object()


def value_at(body: dict[str, Any], path: str) -> Any:
    node: Any = body
    for key in path.split("."):
        node = node[int(key)] if isinstance(node, list) else node[key]
    return node


def wrong_type(kind: Any) -> Any:
    """A distinctive value of the wrong JSON type for `kind`."""
    bare, _ = unwrapped(kind)
    textual = (str, datetime)
    if bare in textual or get_origin(bare) is Literal:
        return NUMBER
    if isinstance(bare, type) and issubclass(bare, enum.Enum):
        return NUMBER
    return WORD


def every_field() -> list[Any]:
    return [
        pytest.param(endpoint, path, kind, required, id=f"{endpoint}:{path}")
        for endpoint, (struct, _) in VALID.items()
        for path, kind, required in fields(struct)
    ]


def constraint_cases() -> list[Any]:
    """For each bound the schemas declare, a value just past it, the rule it breaks and the
    bound its message must state."""
    cases: list[tuple[str, str, Any, str, Any]] = []
    for endpoint, (struct, body) in VALID.items():
        for path, kind, _ in fields(struct):
            bare, metas = unwrapped(kind)
            valid = value_at(body, path)
            for meta in metas:
                if meta.ge is not None:
                    below = meta.ge - (1 if bare is int else 0.5)
                    cases.append((endpoint, path, below, "minimum", meta.ge))
                if meta.le is not None:
                    above = meta.le + (1 if bare is int else 0.5)
                    cases.append((endpoint, path, above, "maximum", meta.le))
                if meta.min_length is not None:
                    cases.append((endpoint, path, valid[:0], "too_short", meta.min_length))
                if meta.max_length is not None:
                    longer = (
                        "a" * (meta.max_length + 1)
                        if bare is str
                        else [valid[0]] * (meta.max_length + 1)
                    )
                    cases.append((endpoint, path, longer, "too_long", meta.max_length))
                if meta.pattern is not None:
                    cases.append((endpoint, path, "Zq Sentinel", "pattern", meta.pattern))
            if get_origin(bare) is Literal or (
                isinstance(bare, type) and issubclass(bare, enum.Enum)
            ):
                cases.append((endpoint, path, WORD, "enum", "one of"))
            if bare is datetime:
                cases.append((endpoint, path, WORD, "format", "RFC 3339"))
    return [pytest.param(*case, id=f"{case[0]}:{case[1]}:{case[3]}") for case in cases]


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(NOW)


@pytest.fixture
def client(make_client: MakeClient) -> Client:
    return make_client(Settings(plan_workers=0))


@pytest.fixture
def headers(core: CleanAir, client: Client) -> dict[str, str]:
    return bearer(pair(core, client))


def refused(client: Client, headers: dict[str, str], endpoint: str, payload: Any) -> Any:
    response = client.post(endpoint, json=payload, headers=headers)
    assert response.status_code == 422, response.text
    answer = response.json()
    assert answer["detail"] == DETAIL
    assert WORD not in response.text.lower()
    assert str(NUMBER) not in response.text
    for error in answer["errors"]:
        assert error["rule"] in get_args(ext.Rule), error  # the documented vocabulary
    return answer["errors"]


@pytest.mark.parametrize(("endpoint", "body"), [(e, b) for e, (_, b) in VALID.items()])
def test_the_valid_bodies_are_accepted(
    client: Client, headers: dict[str, str], endpoint: str, body: dict[str, Any]
) -> None:
    # Without this the tests below could pass on bodies refused for another reason.
    assert client.post(endpoint, json=body, headers=headers).status_code in {200, 202}


@pytest.mark.parametrize(("endpoint", "path", "kind", "required"), every_field())
def test_a_field_of_the_wrong_type_is_named_and_not_echoed(
    client: Client, headers: dict[str, str], endpoint: str, path: str, kind: Any, required: bool
) -> None:
    payload = with_value(VALID[endpoint][1], path, wrong_type(kind))
    errors = refused(client, headers, endpoint, payload)
    assert len(errors) == 1, errors
    assert (errors[0]["field"], errors[0]["rule"]) == (path, "type")
    assert errors[0]["message"].startswith("must be ")


def required_fields() -> list[Any]:
    """Every required field (a list's items are not fields: an item is never missing)."""
    return [
        pytest.param(endpoint, path, id=f"{endpoint}:{path}")
        for endpoint, (struct, _) in VALID.items()
        for path, _, required in fields(struct)
        if required and not path.split(".")[-1].isdigit()
    ]


@pytest.mark.parametrize(("endpoint", "path"), required_fields())
def test_a_missing_required_field_is_named(
    client: Client, headers: dict[str, str], endpoint: str, path: str
) -> None:
    payload = with_value(VALID[endpoint][1], path, DELETE)
    errors = refused(client, headers, endpoint, payload)
    assert errors == [{"field": path, "rule": "required", "message": "is required"}]


@pytest.mark.parametrize(("endpoint", "path", "value", "rule", "bound"), constraint_cases())
def test_a_value_past_a_bound_names_the_field_rule_and_bound(
    client: Client,
    headers: dict[str, str],
    endpoint: str,
    path: str,
    value: Any,
    rule: str,
    bound: Any,
) -> None:
    errors = refused(client, headers, endpoint, with_value(VALID[endpoint][1], path, value))
    assert [(e["field"], e["rule"]) for e in errors] == [(path, rule)]
    assert str(bound) in errors[0]["message"]
    assert "Zq Sentinel" not in errors[0]["message"]


def test_every_failing_field_is_listed_in_the_schemas_order(
    client: Client, headers: dict[str, str]
) -> None:
    payload = {
        "start": {"latitude": 91, "longitude": WORD},
        "activity_type": WORD,
        "earliest": WORD,
        "latest": NUMBER,
        "step_minutes": 0,
    }
    errors = refused(client, headers, DEPARTURES, payload)
    assert errors == [
        {"field": "start.latitude", "rule": "maximum", "message": "must be at most 90.0"},
        {"field": "start.longitude", "rule": "type", "message": "must be a number"},
        {"field": "end", "rule": "required", "message": "is required"},
        {
            "field": "activity_type",
            "rule": "enum",
            "message": 'must be one of "walking", "cycling", "running"',
        },
        {"field": "earliest", "rule": "format", "message": "must be an RFC 3339 date-time string"},
        {"field": "latest", "rule": "type", "message": "must be an RFC 3339 date-time string"},
        {"field": "step_minutes", "rule": "minimum", "message": "must be at least 5"},
    ]


def test_list_items_are_named_by_their_index(client: Client, headers: dict[str, str]) -> None:
    payload = {
        "wifi": [{"mac": "02:1a:2b:3c:4d:5e", "rssi": -48}, {"mac": "", "rssi": 5}],
        "indexes": ["uk_daqi", WORD],
    }
    errors = refused(client, headers, CONDITIONS, payload)
    assert [(e["field"], e["rule"]) for e in errors] == [
        ("wifi.1.mac", "too_short"),
        ("wifi.1.rssi", "maximum"),
        ("indexes.1", "enum"),
    ]


@pytest.mark.parametrize(
    "raw",
    [b"{", b"", b'{"lat": 60.17,}', b'{"client": "\xff\xfe"}', b"[" * 5000],
    ids=["truncated", "empty", "trailing-comma", "not-utf8", "too-deep"],
)
@pytest.mark.parametrize("endpoint", [DEPARTURES, CONDITIONS])
def test_a_body_that_is_not_json_is_one_json_violation_of_the_whole(
    client: Client, headers: dict[str, str], endpoint: str, raw: bytes
) -> None:
    response = client.post(
        endpoint, content=raw, headers={**headers, "Content-Type": "application/json"}
    )
    assert response.status_code == 422
    assert response.json() == {
        "detail": DETAIL,
        "errors": [{"field": "", "rule": "json", "message": "must be a JSON document in UTF-8"}],
    }


def test_a_body_that_is_no_object_is_named_as_the_whole(
    client: Client, headers: dict[str, str]
) -> None:
    errors = refused(client, headers, CONDITIONS, [WORD])
    assert errors == [{"field": "", "rule": "type", "message": "must be an object"}]


def test_a_number_beyond_a_float_is_a_type_violation_of_its_field(
    client: Client, headers: dict[str, str]
) -> None:
    response = client.post(
        CONDITIONS,
        content=b'{"lat": 1e999, "lon": 24.94}',
        headers={**headers, "Content-Type": "application/json"},
    )
    assert response.status_code == 422
    assert [(e["field"], e["rule"]) for e in response.json()["errors"]] == [("lat", "type")]


@pytest.mark.parametrize(
    ("path", "payload"),
    [
        ("/v1/airquality/score", {"lat": WORD, "lon": 24.94}),
        ("/v1/airquality/score", {"lat": 60.17}),
        ("/v1/routes", {"start": {"latitude": 91}}),
        ("/v1/airquality/routes", {"waypoints": []}),
        ("/v1/airquality/forecast", [WORD]),
    ],
)
def test_v1_keeps_the_contracts_fixed_text_byte_for_byte(
    client: Client, headers: dict[str, str], path: str, payload: Any
) -> None:
    response = client.post(path, json=payload, headers=headers)
    assert response.status_code == 422
    assert response.content == b'{"detail":"Request validation failed"}'


def test_an_over_long_list_is_named_once_without_its_items(
    client: Client, headers: dict[str, str]
) -> None:
    scan = [{"mac": "", "rssi": NUMBER}] * 5000
    errors = refused(client, headers, CONDITIONS, {"wifi": scan})
    assert errors == [
        {"field": "wifi", "rule": "too_long", "message": "must have at most 64 items"}
    ]


def test_the_list_stops_at_its_cap(client: Client, headers: dict[str, str]) -> None:
    scan = [{"mac": "", "rssi": NUMBER}] * 64  # two violations an item
    errors = refused(client, headers, CONDITIONS, {"wifi": scan})
    assert len(errors) == MAX_VIOLATIONS
    assert errors[:2] == [
        {"field": "wifi.0.mac", "rule": "too_short", "message": "must have at least 1 character"},
        {"field": "wifi.0.rssi", "rule": "maximum", "message": "must be at most 0"},
    ]


def test_a_scan_no_one_can_place_is_no_fields_fault(
    client: Client, headers: dict[str, str]
) -> None:
    scan = [{"mac": "02:1a:2b:3c:4d:5e", "rssi": -48}, {"mac": "02:1a:2b:3c:4d:5f", "rssi": -60}]
    response = client.post(CONDITIONS, json={"wifi": scan}, headers=headers)
    assert response.status_code == 422
    assert response.json() == {
        "detail": "No location could be resolved from the request",
        "errors": [],
    }

"""The served OpenAPI document says what the contract says, precisely enough to generate a
client from: enums, uuid formats, Retry-After on every 429, a description on every field and
an example for every request body."""

from __future__ import annotations

from typing import Any, get_args

import msgspec
import pytest

from cleanair_core import CleanAir
from cleanair_http import alert_schemas, extension_schemas, history_schemas, schemas
from cleanair_http.errors import VALIDATION_FAILED
from support.http import Client, bearer, pair

Document = dict[str, Any]


@pytest.fixture
def document(client: Client) -> Document:
    served: Document = client.get("/schema/openapi.json").json()
    return served


def _operations(document: Document) -> list[tuple[str, str, Document]]:
    return [
        (path, method, operation)
        for path, item in document["paths"].items()
        for method, operation in item.items()
    ]


def _component(document: Document, ref: str) -> Document:
    schema: Document = document["components"]["schemas"][ref.rsplit("/", 1)[-1]]
    return schema


def test_a_plan_polls_status_is_the_contracts_enum(document: Document) -> None:
    poll = _component(document, "PlanPollResponse")
    assert "status" in poll["required"]
    (status_ref,) = poll["properties"]["status"]["allOf"]
    status = _component(document, status_ref["$ref"])
    assert status["type"] == "string"
    assert status["enum"] == ["pending", "completed", "failed"]
    assert status["title"] == "PlanRouteStatus"


def test_ids_and_the_request_id_parameter_are_uuids(document: Document) -> None:
    connection = _component(document, "Connection")["properties"]["connection_id"]
    submitted = _component(document, "PlanSubmitted")["properties"]["request_id"]
    assert connection["type"] == submitted["type"] == "string"
    assert connection["format"] == submitted["format"] == "uuid"
    (parameter,) = document["paths"]["/v1/routes/{request_id}"]["get"]["parameters"]
    assert (parameter["name"], parameter["in"], parameter["required"]) == (
        "request_id",
        "path",
        True,
    )
    assert parameter["schema"] == {
        "type": "string",
        "format": "uuid",
        "description": parameter["description"],
    }


def test_every_429_declares_retry_after(document: Document) -> None:
    operations = _operations(document)
    # The contract's seven and the extension's (`/ext/v1`) twelve: six alerts', the history's
    # and two tiles' (a tile, the legend).
    assert len(operations) == 19
    for path, method, operation in operations:
        # The contract: any endpoint may be rate limited, and any 429 carries Retry-After.
        too_many = operation["responses"]["429"]
        header = too_many["headers"]["Retry-After"]
        assert header["required"] is True, (path, method)
        assert header["schema"]["type"] == "integer", (path, method)
        assert header["description"], (path, method)


def test_every_503_declares_retry_after(document: Document) -> None:
    for path, method, operation in _operations(document):
        unavailable = operation["responses"]["503"]  # every endpoint reaches the database
        header = unavailable["headers"]["Retry-After"]
        assert header["required"] is True, (path, method)
        assert header["schema"] == {"type": "integer", "minimum": 1}, (path, method)


def test_every_field_and_enum_has_a_description(document: Document) -> None:
    components = document["components"]["schemas"]
    assert len(components) >= 24
    for name, schema in components.items():
        if "enum" in schema:
            assert schema.get("description"), name
            # A field's default would otherwise leak onto the shared enumeration.
            assert "default" not in schema, name
            continue
        assert schema["properties"], name
        for field, definition in schema["properties"].items():
            assert definition.get("description"), f"{name}.{field}"
    assert "83" not in components["ActivityType"]["description"]  # no notes for our readers


def test_every_operation_parameter_and_response_is_described(document: Document) -> None:
    for path, method, operation in _operations(document):
        assert operation["summary"], (path, method)
        assert operation["description"], (path, method)
        for status, response in operation["responses"].items():
            assert response["description"], (path, method, status)
        for parameter in operation.get("parameters", []):
            assert parameter["description"], (path, method, parameter["name"])


def test_every_request_body_has_examples_the_api_accepts(
    core: CleanAir, client: Client, document: Document
) -> None:
    token = pair(core, client)
    bodies = 0
    for path, method, operation in _operations(document):
        if "requestBody" not in operation:
            continue
        bodies += 1
        media = operation["requestBody"]["content"]["application/json"]
        name = media["schema"]["$ref"].rsplit("/", 1)[-1]
        struct = (
            getattr(schemas, name, None)
            or getattr(extension_schemas, name, None)
            or getattr(history_schemas, name, None)
            or getattr(alert_schemas, name)
        )
        assert media["examples"], path
        for name, example in media["examples"].items():
            assert example["summary"], (path, name)
            # The example is a valid body: it decodes as the request, and the API does not
            # refuse it as invalid (it may refuse the code, a day outside the window or a
            # scan the test's geolocator cannot place).
            msgspec.json.decode(msgspec.json.encode(example["value"]), type=struct)
            response = client.request(
                method.upper(), path, json=example["value"], headers=bearer(token)
            )
            assert response.json().get("detail") != VALIDATION_FAILED, (path, name)
    assert bodies == 9


#: Every response field the contract marks required (sections 2.1-2.14): the others may be
#: left out by a client's model, though the service always sends them.
CONTRACT_REQUIRED = {
    "Connection": {"connection_id", "name", "scopes", "token"},
    "ScoreResponse": {"score", "ttl"},
    "ForecastResponse": {"location"},
    "EnrichedRoute": {"waypoints", "summary"},
    "RouteSummary": set(),
    "BandedScore": {"score", "band", "description", "colour"},
    "PlanSubmitted": {"request_id"},
    "PlanPollResponse": {"status"},
    "PlanResult": {"activity_type", "routes", "original_distance"},
    "PlannedRoute": {
        "waypoints",
        "summary",
        "distance",
        "distance_delta",
        "clean_air_score_delta_pct",
        "goal",
    },
    "RouteGoal": {"title", "description"},
    "Quota": {"used", "limit", "remaining", "daily_used", "daily_limit", "daily_remaining"},
    "ErrorResponse": {"detail"},
}


def test_response_fields_are_required_as_the_contract_says(document: Document) -> None:
    schemas = document["components"]["schemas"]
    assert {
        name: set(schemas[name].get("required", [])) for name in CONTRACT_REQUIRED
    } == CONTRACT_REQUIRED


def test_an_extension_422_is_described_with_its_list_of_failing_fields(
    document: Document,
) -> None:
    operations = _operations(document)
    extension = [(path, op) for path, _, op in operations if path.startswith("/ext/v1/")]
    assert len(extension) == 12
    # Every one but the list of alert subscriptions and the tiles' legend, which take neither
    # body nor parameter.
    validated = [(path, op) for path, op in extension if "422" in op["responses"]]
    assert len(validated) == 10
    for path, operation in validated:
        schema = operation["responses"]["422"]["content"]["application/json"]["schema"]
        assert schema["$ref"].endswith("/ValidationErrorResponse"), path
        assert "errors" in operation["responses"]["422"]["description"], path
    body = _component(document, "ValidationErrorResponse")
    assert set(body["required"]) == {"detail", "errors"}
    item = _component(document, body["properties"]["errors"]["items"]["$ref"])
    assert set(item["required"]) == {"field", "rule", "message"}
    assert item["properties"]["rule"]["enum"] == list(get_args(extension_schemas.Rule))
    # Every rule of the vocabulary is explained where it is listed.
    for rule in get_args(extension_schemas.Rule):
        assert f"`{rule}`" in item["properties"]["rule"]["description"], rule


def test_a_contract_422_stays_the_fixed_envelope(document: Document) -> None:
    for path, method, operation in _operations(document):
        if path.startswith("/v1/") and "422" in operation["responses"]:
            schema = operation["responses"]["422"]["content"]["application/json"]["schema"]
            assert schema["$ref"].endswith("/ErrorResponse"), (path, method)

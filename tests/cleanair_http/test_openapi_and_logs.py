"""The OpenAPI document tells the truth; logs never carry tokens, codes or bodies."""

from __future__ import annotations

import logging

import pytest

from cleanair_core import CleanAir
from cleanair_core.credits.attribution import CLIENT_LABEL
from support.http import MakeClient, bearer, pair


def test_openapi_documents_version_statuses_and_bearer(make_client: MakeClient) -> None:
    schema = make_client().get("/schema/openapi.json").json()

    assert schema["info"]["version"] == "1.0.0"
    assert schema["components"]["securitySchemes"]["BearerAuth"] == {
        "type": "http",
        "scheme": "bearer",
    }
    token = schema["paths"]["/v1/connections/token"]["post"]
    assert set(token["responses"]) == {"201", "401", "422", "429", "503"}
    assert "security" not in token
    quota = schema["paths"]["/v1/quota"]["get"]
    assert set(quota["responses"]) == {"200", "401", "429", "503"}
    assert quota["security"] == [{"BearerAuth": []}]
    pattern = schema["components"]["schemas"]["RedeemPairingCode"]["properties"]["code"]
    assert pattern["pattern"] == "^[0-9]{6}$"
    # The client label is documented, and refused with 422, by the core's one rule.
    label = schema["components"]["schemas"]["ScoreRequest"]["properties"]["client"]
    assert label["pattern"] == CLIENT_LABEL.pattern == "^[a-z0-9_-]{1,32}$"
    score = schema["paths"]["/v1/airquality/score"]["post"]
    assert set(score["responses"]) == {"200", "401", "403", "422", "429", "503"}
    forecast = schema["paths"]["/v1/airquality/forecast"]["post"]
    assert set(forecast["responses"]) == {"200", "400", "401", "403", "422", "429", "503"}
    assert forecast["security"] == [{"BearerAuth": []}]
    routes = schema["paths"]["/v1/airquality/routes"]["post"]
    assert set(routes["responses"]) == {"200", "400", "401", "403", "422", "429", "503"}
    assert routes["security"] == [{"BearerAuth": []}]
    waypoints = schema["components"]["schemas"]["EnrichRouteRequest"]["properties"]["waypoints"]
    assert (waypoints["minItems"], waypoints["maxItems"]) == (1, 100)
    # Every operation may meet an unavailable database (503, not charged).
    operations = [op for item in schema["paths"].values() for op in item.values()]
    assert len(operations) == 19  # the contract's seven, the extension's 12 (six alerts')
    assert all("503" in op["responses"] for op in operations)
    activity = schema["components"]["schemas"]["ActivityType"]
    assert len(activity["enum"]) == 82


def test_one_access_line_per_request_without_secrets(
    core: CleanAir, make_client: MakeClient, caplog: pytest.LogCaptureFixture
) -> None:
    client = make_client(access_log=True)
    core.add_user("alice")
    code = core.create_pairing_code("alice")
    caplog.set_level(logging.DEBUG)

    redeemed = client.post(
        "/v1/connections/token", json={"code": code, "name": "very-private-name"}
    )
    token = redeemed.json()["token"]
    client.get("/v1/quota?x=query-secret", headers=bearer(token))
    client.get("/v1/quota", headers=bearer("ca_tst_" + "B" * 43))
    client.get("/nowhere")

    access = [r for r in caplog.records if r.name == "cleanair.access"]
    assert [(r.method, r.path, r.status) for r in access] == [  # type: ignore[attr-defined]
        ("POST", "/v1/connections/token", 201),
        ("GET", "/v1/quota", 200),
        ("GET", "/v1/quota", 401),
        ("GET", "/nowhere", 404),
    ]
    assert access[1].connection == redeemed.json()["connection_id"]  # type: ignore[attr-defined]
    # Everything the server side logged (httpx here is the test's own client).
    server_side = [r for r in caplog.records if not r.name.startswith(("httpx", "httpcore"))]
    everything = "\n".join(f"{r.getMessage()} {r.__dict__}" for r in server_side)
    for secret in (token, code, "very-private-name", "B" * 43, "query-secret", "Bearer"):
        assert secret not in everything


def test_pair_returns_distinct_tokens(core: CleanAir, make_client: MakeClient) -> None:
    client = make_client()
    assert pair(core, client) != pair(core, client)

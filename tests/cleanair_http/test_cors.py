"""`CLEANAIR_CORS_ALLOW_ORIGINS`: browser apps on the listed origins may call the API; others,
and every origin when the setting is empty, get no allow header."""

from __future__ import annotations

import pytest

from cleanair_core import CleanAir
from cleanair_runtime.composition.settings import Settings, SettingsError
from support.http import Client, MakeClient, bearer, pair

APP = "https://app.example"
OTHER = "https://evil.example"


@pytest.fixture
def cors_client(make_client: MakeClient) -> Client:
    settings = Settings.from_env({"CLEANAIR_CORS_ALLOW_ORIGINS": f"{APP}, http://localhost:5173"})
    return make_client(Settings(plan_workers=0, cors_allow_origins=settings.cors_allow_origins))


def preflight(client: Client, origin: str) -> tuple[int, dict[str, str]]:
    response = client.options(
        "/v1/quota",
        headers={
            "Origin": origin,
            "Access-Control-Request-Method": "GET",
            "Access-Control-Request-Headers": "authorization",
        },
    )
    return response.status_code, dict(response.headers)


def test_a_preflight_from_a_listed_origin_allows_authorization(cors_client: Client) -> None:
    status, headers = preflight(cors_client, APP)

    assert status == 204
    assert headers["access-control-allow-origin"] == APP
    assert "authorization" in headers["access-control-allow-headers"].lower()
    assert "GET" in headers["access-control-allow-methods"]


def test_a_real_request_from_a_listed_origin_carries_the_allow_headers(
    core: CleanAir, cors_client: Client
) -> None:
    token = pair(core, cors_client)

    response = cors_client.get("/v1/quota", headers={**bearer(token), "Origin": APP})

    assert response.status_code == 200
    assert response.headers["access-control-allow-origin"] == APP
    assert "Origin" in response.headers["vary"]
    # An app must read Retry-After to honour a 429 or 503.
    assert "retry-after" in response.headers["access-control-expose-headers"].lower()


def test_an_unlisted_origin_gets_no_allow_header(core: CleanAir, cors_client: Client) -> None:
    status, headers = preflight(cors_client, OTHER)
    assert status == 400
    assert "access-control-allow-origin" not in headers

    token = pair(core, cors_client)
    response = cors_client.get("/v1/quota", headers={**bearer(token), "Origin": OTHER})
    assert "access-control-allow-origin" not in response.headers


def test_by_default_no_origin_is_allowed(core: CleanAir, client: Client) -> None:
    token = pair(core, client)
    response = client.get("/v1/quota", headers={**bearer(token), "Origin": APP})
    assert response.status_code == 200
    assert "access-control-allow-origin" not in response.headers
    _, headers = preflight(client, APP)
    assert "access-control-allow-origin" not in headers


@pytest.mark.parametrize(
    "raw", ["*", "app.example", "https://app.example/", "https://app.example/path", "ftp://x"]
)
def test_what_is_not_an_origin_is_refused(raw: str) -> None:
    with pytest.raises(SettingsError, match=r"CLEANAIR_CORS_ALLOW_ORIGINS: .* is not an origin"):
        Settings.from_env({"CLEANAIR_CORS_ALLOW_ORIGINS": raw})

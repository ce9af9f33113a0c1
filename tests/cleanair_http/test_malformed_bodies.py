"""Malformed JSON bodies are a 422 on every JSON endpoint: never a 500, never charged, and
never a traceback in the log (each one was 2 KB of log for a 1 KB request, from anyone)."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from litestar import Request, post
from litestar.params import JSONBody

from cleanair_core import CleanAir
from cleanair_http import schemas
from cleanair_http.settings import Settings
from support.http import Client, MakeClient, bearer, pair

VALIDATION_FAILED = {"detail": "Request validation failed"}

JSON_ENDPOINTS = [
    "/v1/connections/token",
    "/v1/airquality/score",
    "/v1/airquality/forecast",
    "/v1/airquality/routes",
    "/v1/routes",
]

MALFORMED = {
    # msgspec gives up with RecursionError at about 1,000 levels.
    "arrays nested 1,000 deep": b"[" * 1_000,
    "arrays nested 100,000 deep": b"[" * 100_000,
    "closed arrays nested 5,000 deep": b"[" * 5_000 + b"]" * 5_000,
    "objects nested 1,000 deep": b'{"a":' * 1_000 + b"1" + b"}" * 1_000,
    # UnicodeDecodeError from inside a string (of a field every decoder reads: a strict one
    # skips unknown fields unread)...
    "invalid UTF-8 in a string": b'{"client": "ab\xff", "code": "12345\xff"}',
    "a truncated UTF-8 sequence in a string": b'{"client": "ab\xe2\x82"}',
    # ... and a DecodeError outside one, or for a surrogate escape with no partner.
    "invalid UTF-8 outside strings": b'{"client": "ab", \xff"code": "123456"}',
    "a lone surrogate escape": b'{"client": "\\ud800"}',
    "a lone low surrogate escape": b'{"client": "\\udc00"}',
}


@pytest.fixture
def client(make_client: MakeClient) -> Client:
    return make_client(Settings(plan_workers=0))


def no_error_logged(caplog: pytest.LogCaptureFixture) -> None:
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
    assert [r.getMessage() for r in caplog.records if r.exc_info] == []


@pytest.mark.parametrize("body", MALFORMED.values(), ids=MALFORMED.keys())
def test_malformed_json_is_422_everywhere_and_free(
    core: CleanAir,
    client: Client,
    caplog: pytest.LogCaptureFixture,
    body: bytes,
) -> None:
    token = pair(core, client)
    caplog.set_level(logging.DEBUG)
    headers = {**bearer(token), "Content-Type": "application/json"}

    for path in JSON_ENDPOINTS:
        response = client.post(path, content=body, headers=headers)
        assert (path, response.status_code) == (path, 422)
        assert response.json() == VALIDATION_FAILED

    no_error_logged(caplog)
    quota = client.get("/v1/quota", headers=bearer(token)).json()
    assert (quota["used"], quota["daily_used"]) == (0, 0)


@post("/test/strict", exclude_from_auth=True, status_code=200)
async def strict_only(data: JSONBody[schemas.ScoreRequest]) -> str:
    return f"decoded {data.lat}"


@pytest.fixture
def decoded_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Litestar's own decoding (plain values, then a lenient conversion) must never run."""

    async def never(self: Request[Any, Any, Any]) -> Any:
        raise AssertionError("the body was decoded a second, lenient way")

    monkeypatch.setattr(Request, "json", never)


@pytest.mark.usefixtures("decoded_once")
@pytest.mark.parametrize("body", MALFORMED.values(), ids=MALFORMED.keys())
def test_a_body_is_decoded_once_strictly_and_malformed_is_422(
    make_client: MakeClient, caplog: pytest.LogCaptureFixture, body: bytes
) -> None:
    client = make_client(Settings(plan_workers=0), [strict_only])
    caplog.set_level(logging.DEBUG)

    response = client.post("/test/strict", content=body)

    assert response.status_code == 422
    assert response.json() == VALIDATION_FAILED
    no_error_logged(caplog)
    assert client.post("/test/strict", content=b'{"lat": 60.2, "lon": 24.9}').text == (
        "decoded 60.2"
    )
    # Strict: a number in a string is not a number.
    assert client.post("/test/strict", content=b'{"lat": "60.2", "lon": 24.9}').status_code == 422

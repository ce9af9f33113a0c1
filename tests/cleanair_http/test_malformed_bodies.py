"""Malformed JSON bodies are a 422 on every JSON endpoint: never a 500, never charged, and
never a traceback in the log (each one was 2 KB of log for a 1 KB request, from anyone)."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from litestar import Request, post
from litestar.params import JSONBody

from cleanair_core import CleanAir
from cleanair_http import schemas
from cleanair_runtime.composition.settings import Settings
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


def valid_bodies(core: CleanAir) -> dict[str, dict[str, Any]]:
    """A body each JSON endpoint accepts (and, but for the pairing, charges)."""
    now = core.clock.now()
    helsinki = [(60.1699, 24.9384), (60.1710, 24.9410)]
    return {
        "/v1/connections/token": {"code": core.create_pairing_code("alice"), "name": "x"},
        "/v1/airquality/score": {"lat": 60.17, "lon": 24.94},
        "/v1/airquality/forecast": {
            "latitude": 60.17,
            "longitude": 24.94,
            "date": now.date().isoformat(),
            "timezone": "UTC",
        },
        "/v1/airquality/routes": {
            "waypoints": [{"lat": lat, "lon": lon} for lat, lon in helsinki],
            "start_time": now.isoformat(),
        },
        "/v1/routes": {
            "start": {"latitude": 60.1699, "longitude": 24.9384},
            "end": {"latitude": 60.1710, "longitude": 24.9410},
            "activity_type": "walking",
        },
    }


#: Invalid UTF-8 put into an otherwise valid body, after its opening brace.
INVALID_UTF8_PREFIXES = {
    "in an unknown key": b'"extra\xff": 1, ',
    "a key that is one invalid byte": b'"\xff": 1, ',
    "a known key with an invalid byte, so unknown": b'"client\xc3": "a", ',
    "in an unknown field's value": b'"extra": "ab\xff", ',
    "in a value nested in an unknown field": b'"extra": {"k": ["\xe2\x82"]}, ',
}


@pytest.mark.parametrize("prefix", INVALID_UTF8_PREFIXES.values(), ids=INVALID_UTF8_PREFIXES.keys())
def test_invalid_utf8_anywhere_is_422_and_free_on_every_json_endpoint(
    core: CleanAir, client: Client, caplog: pytest.LogCaptureFixture, prefix: bytes
) -> None:
    """A strict decoder skips unknown fields unread: invalid UTF-8 there was a charged 200."""
    token = pair(core, client)
    caplog.set_level(logging.DEBUG)
    headers = {**bearer(token), "Content-Type": "application/json"}

    for path, valid in valid_bodies(core).items():
        body = json.dumps(valid).encode()
        broken = b"{" + prefix + body[1:]
        response = client.post(path, content=broken, headers=headers)
        assert (path, response.status_code, response.json()) == (path, 422, VALIDATION_FAILED)
        assert b"\xff" not in response.content
        # The same body in valid UTF-8 is accepted: only the bytes made the 422.
        fixed = b"{" + prefix.decode("utf-8", "replace").encode() + body[1:]
        assert client.post(path, content=fixed, headers=headers).status_code in (200, 201, 202)

    no_error_logged(caplog)
    charged = client.get("/v1/quota", headers=bearer(token)).json()["used"]
    assert charged == 1 + 2 + 2 + 25  # the accepted bodies alone: score, forecast, route, plan

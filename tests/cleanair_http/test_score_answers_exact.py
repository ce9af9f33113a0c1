"""Every answer of POST /v1/airquality/score, byte for byte: the status, every header in
order and the body, as the app served (access log and metrics on) hands them to the server.

`/v1` is frozen, and the request path's cuts (issue 34: a pure-ASGI bearer middleware, the
body decoded by a cached decoder, the answer encoded without Litestar's response objects)
must not move a byte of any answer, success or error. The expected messages were recorded
from the app before those cuts."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any, cast

import attrs
import pytest
from litestar.enums import ScopeType
from litestar.testing import TestClient
from litestar.types import ASGIApp, Message, Receive, Scope, Send

from cleanair_core import CleanAir, ManualClock
from cleanair_core.access.scopes import Scope as ApiScope
from cleanair_core.air.quality_source import Sample
from cleanair_core.errors import StoreUnavailable
from cleanair_core.ports import Sources
from cleanair_http.app import create_app, with_access_log
from support.fakes import HELSINKI, FakeGeolocator, FakeIp, FakeNamer, FakeSource
from support.http import bearer, pair

SCORE = "/v1/airquality/score"
NOW = datetime(2026, 11, 22, 10, 15, tzinfo=UTC)
SCAN = [{"mac": "00:11:22:33:44:55", "rssi": -50}, {"mac": "00:11:22:33:44:66", "rssi": -61}]
#: What a case sent: (status, headers in order, body, how many body messages).
Answer = tuple[int, list[tuple[bytes, bytes]], bytes, int]


class Recorder:
    """ASGI wrapper keeping the messages the app sent for the last request."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.sent: list[Message] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != ScopeType.HTTP:
            await self.app(scope, receive, send)
            return
        self.sent = []

        async def recorded(message: Message) -> None:
            self.sent.append(message)
            await send(message)

        await self.app(scope, receive, recorded)

    def answer(self) -> Answer:
        start, *bodies = cast(list[dict[str, Any]], self.sent)
        assert start["type"] == "http.response.start"
        assert all(body["type"] == "http.response.body" for body in bodies)
        assert not bodies[-1].get("more_body", False)
        headers = [(bytes(name), bytes(value)) for name, value in start["headers"]]
        return start["status"], headers, b"".join(body["body"] for body in bodies), len(bodies)


class Air:
    """The test's air source: the fake's air, or a failure of either kind when told."""

    update_interval = 3600

    def __init__(self) -> None:
        self.source = FakeSource()
        self.crash = False

    async def concentrations(self, samples: list[Sample]) -> Any:
        if self.crash:
            raise RuntimeError("a bug in the source")
        return await self.source.concentrations(samples)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(NOW)


@pytest.fixture
def air() -> Air:
    return Air()


@pytest.fixture
def geolocator() -> FakeGeolocator:
    return FakeGeolocator(HELSINKI)


@pytest.fixture
def sources(air: Air, geolocator: FakeGeolocator) -> Sources:
    return Sources(air, geolocator, FakeIp(), FakeNamer())  # type: ignore[arg-type]


@pytest.fixture
def recorder(core: CleanAir) -> Iterator[tuple[Recorder, TestClient[Any]]]:
    """The app as `cleanair serve` serves it (shipped settings: metrics on, access log on),
    behind the recorder."""
    recorder = Recorder(with_access_log(create_app(core)))
    with TestClient(recorder) as client:
        yield recorder, client


def as_json(value: Any) -> bytes:
    return json.dumps(value).encode()


JSON = {"content-type": "application/json"}
AT = as_json({"lat": 60.17, "lon": 24.94})
#: Each case: what to set up (given the core, the air, the geolocator and a paired token),
#: then the request (method, body, headers).
Setup = Callable[["World"], None]


@attrs.frozen
class World:
    """What a case's setup may change."""

    core: CleanAir
    air: Air
    geolocator: FakeGeolocator
    client: TestClient[Any]
    token: str
    monkeypatch: pytest.MonkeyPatch


def nothing(world: World) -> None:
    pass


def not_premium(world: World) -> None:
    world.core.set_premium("alice", False)


def source_down(world: World) -> None:
    world.air.source.fail = True


def source_crashes(world: World) -> None:
    world.air.crash = True


def nowhere(world: World) -> None:
    world.geolocator.answer = None


def store_down(world: World) -> None:
    async def unavailable(*args: object, **kwargs: object) -> None:
        raise StoreUnavailable()

    world.monkeypatch.setattr(world.core, "admit_awaited", unavailable)


def daily_cap_used(world: World) -> None:
    """The fixture's daily cap is 100 credits: 100 scores use it up."""
    for _ in range(100):
        response = world.client.post(SCORE, content=AT, headers=bearer(world.token))
        assert response.status_code == 200


#: name: (setup, method, body, headers); "{token}" in a header is the paired token, "{routes}"
#: a token without the aq:read scope.
CASES: dict[str, tuple[Setup, str, bytes, dict[str, str]]] = {
    "200 at coordinates": (nothing, "POST", AT, {**JSON, "authorization": "Bearer {token}"}),
    "200 accepting gzip": (
        nothing,
        "POST",
        AT,
        {**JSON, "authorization": "Bearer {token}", "accept-encoding": "gzip, br"},
    ),
    "200 a lower-case scheme": (nothing, "POST", AT, {"authorization": "bearer {token}"}),
    "200 from a scan": (
        nothing,
        "POST",
        as_json({"wifi": SCAN, "client": "watch"}),
        {**JSON, "authorization": "Bearer {token}"},
    ),
    "200 no content type": (nothing, "POST", AT, {"authorization": "Bearer {token}"}),
    "200 text content type": (
        nothing,
        "POST",
        AT,
        {"content-type": "text/plain", "authorization": "Bearer   {token}  "},
    ),
    "401 no token": (nothing, "POST", AT, JSON),
    "401 basic": (nothing, "POST", AT, {**JSON, "authorization": "Basic {token}"}),
    "401 empty bearer": (nothing, "POST", AT, {**JSON, "authorization": "Bearer "}),
    "401 unknown token": (
        nothing,
        "POST",
        AT,
        {**JSON, "authorization": "Bearer ca_tst_" + "x" * 43},
    ),
    "403 no aq:read": (nothing, "POST", AT, {**JSON, "authorization": "Bearer {routes}"}),
    "403 not premium": (not_premium, "POST", AT, {**JSON, "authorization": "Bearer {token}"}),
    "422 malformed": (nothing, "POST", b'{"lat": 1,', {"authorization": "Bearer {token}"}),
    "422 empty body": (nothing, "POST", b"", {**JSON, "authorization": "Bearer {token}"}),
    "422 strings for numbers": (
        nothing,
        "POST",
        as_json({"lat": "1", "lon": "2"}),
        {**JSON, "authorization": "Bearer {token}"},
    ),
    "422 a lone coordinate": (
        nothing,
        "POST",
        as_json({"lat": 10}),
        {**JSON, "authorization": "Bearer {token}"},
    ),
    "422 an array": (nothing, "POST", b"[]", {**JSON, "authorization": "Bearer {token}"}),
    "422 invalid UTF-8": (
        nothing,
        "POST",
        b'{"lat": 1, "lon": 2, "x": "\xff"}',
        {**JSON, "authorization": "Bearer {token}"},
    ),
    "422 nested too deep": (nothing, "POST", b"[" * 5_000, {"authorization": "Bearer {token}"}),
    "422 a bad client label": (
        nothing,
        "POST",
        as_json({"lat": 1, "lon": 2, "client": "Not Allowed"}),
        {**JSON, "authorization": "Bearer {token}"},
    ),
    "422 no location from the scan": (
        nowhere,
        "POST",
        as_json({"wifi": SCAN}),
        {**JSON, "authorization": "Bearer {token}"},
    ),
    "429 daily cap": (daily_cap_used, "POST", AT, {**JSON, "authorization": "Bearer {token}"}),
    "503 source": (source_down, "POST", AT, {**JSON, "authorization": "Bearer {token}"}),
    "503 store at admission": (
        store_down,
        "POST",
        AT,
        {**JSON, "authorization": "Bearer {token}"},
    ),
    "500 a bug": (source_crashes, "POST", AT, {**JSON, "authorization": "Bearer {token}"}),
    "405 GET": (nothing, "GET", b"", {"authorization": "Bearer {token}"}),
    "204 OPTIONS": (nothing, "OPTIONS", b"", {}),
}

JSON_TYPE = (b"content-type", b"application/json")
WWW_AUTHENTICATE = (b"www-authenticate", b'Bearer realm="cleanair"')


def answer(status: int, body: bytes, length: bytes, *head: tuple[bytes, bytes]) -> Answer:
    """A JSON answer in one body message: `head`, then its type and length."""
    return status, [*head, JSON_TYPE, (b"content-length", length)], body, 1


SCORED = answer(200, b'{"score":69,"ttl":2700}', b"23")
UNAUTHENTICATED = answer(
    401, b'{"detail":"Invalid or missing bearer token"}', b"44", WWW_AUTHENTICATE
)
INVALID = answer(422, b'{"detail":"Request validation failed"}', b"38")
#: Recorded from the app before the request path's cuts (main at 84847f4).
EXPECTED: dict[str, Answer] = {
    "200 at coordinates": SCORED,
    "200 accepting gzip": SCORED,
    "200 a lower-case scheme": SCORED,
    "200 from a scan": SCORED,
    "200 no content type": SCORED,
    "200 text content type": SCORED,
    "401 no token": UNAUTHENTICATED,
    "401 basic": UNAUTHENTICATED,
    "401 empty bearer": UNAUTHENTICATED,
    "401 unknown token": UNAUTHENTICATED,
    "403 no aq:read": answer(403, b'{"detail":"Token lacks the required scope aq:read"}', b"51"),
    "403 not premium": answer(
        403, b'{"detail":"The owner of this connection has no premium plan"}', b"61"
    ),
    "422 malformed": INVALID,
    "422 empty body": INVALID,
    "422 strings for numbers": INVALID,
    "422 a lone coordinate": INVALID,
    "422 an array": INVALID,
    "422 invalid UTF-8": INVALID,
    "422 nested too deep": INVALID,
    "422 a bad client label": INVALID,
    "422 no location from the scan": answer(
        422, b'{"detail":"No location could be resolved from the request"}', b"59"
    ),
    "429 daily cap": answer(
        429, b'{"detail":"Daily burst cap exhausted"}', b"38", (b"retry-after", b"49500")
    ),
    "503 source": answer(
        503, b'{"detail":"A dependent service is unavailable"}', b"47", (b"retry-after", b"5")
    ),
    "503 store at admission": answer(
        503,
        b'{"detail":"The service\'s database is unavailable; try again shortly"}',
        b"69",
        (b"retry-after", b"5"),
    ),
    "500 a bug": (
        500,
        [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", b"21")],
        b"Internal Server Error",
        1,
    ),
    "405 GET": answer(405, b'{"detail":"Method Not Allowed"}', b"31", (b"allow", b"POST, OPTIONS")),
    "204 OPTIONS": (204, [(b"allow", b"OPTIONS, POST")], b"", 1),
}


@pytest.mark.parametrize("case", CASES)
def test_every_score_answer_is_byte_for_byte_the_frozen_one(
    core: CleanAir,
    air: Air,
    geolocator: FakeGeolocator,
    recorder: tuple[Recorder, TestClient[Any]],
    monkeypatch: pytest.MonkeyPatch,
    case: str,
) -> None:
    served, client = recorder
    token = pair(core, client)
    core.add_partner("acme")
    routes = core.issue_partner_token("acme", "routes", [ApiScope.ROUTES_PLAN]).token
    setup, method, body, headers = CASES[case]
    setup(World(core, air, geolocator, client, token, monkeypatch))
    sent = {name: value.format(token=token, routes=routes) for name, value in headers.items()}
    client.request(method, SCORE, content=body, headers=sent)
    assert served.answer() == EXPECTED[case]

"""The score route's own path (`cleanair_http.score_route`): which requests it serves, which
it leaves to Litestar, and that every request answers as Litestar alone answers it.

`test_score_answers_exact.py` pins the answers byte for byte; `test_lean_request_path.py`
shows the pipeline a plain score skips. Here, a request goes once through the app as served
and once with the path turned off (Litestar alone), and both must send the same messages
and leave the same scope for the access log and the request counter."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from litestar import Litestar, Request, Response, get
from litestar.config.compression import CompressionConfig
from litestar.config.cors import CORSConfig
from litestar.datastructures import ResponseHeader, State
from litestar.routes import HTTPRoute
from litestar.testing import TestClient
from prometheus_client.parser import text_string_to_metric_families

from cleanair_core import CleanAir, ManualClock, Policy, TokenKeys, generate_key
from cleanair_core.access.connections import Caller
from cleanair_core.credits.ledger import CreditLimits
from cleanair_core.ports import Sources
from cleanair_http.app import create_app, with_access_log
from cleanair_http.auth import bearer_auth
from cleanair_http.bodies import JsonBodyRequest
from cleanair_http.controllers.airquality import score_point
from cleanair_http.errors import EXCEPTION_HANDLERS
from cleanair_http.offloading import here_or_in_thread, in_thread
from cleanair_http.score_route import SCORE_PATH, LeanScoreApp, score_route
from cleanair_runtime.composition.settings import Settings
from cleanair_storage.sqlite import SqliteStore
from support.fakes import HELSINKI, FakeGeolocator, FakeIp, FakeNamer, FakeSource
from support.http import pair

ORIGIN = "https://maps.example.org"
#: (status, headers, body) of each message sent, and the scope entries the access log and
#: the request counter read.
Sent = tuple[list[tuple[Any, ...]], dict[str, Any]]


@pytest.fixture
def roomy_core(tmp_path: Any) -> Iterator[CleanAir]:
    """A core whose limits no test here reaches: two requests a case, many cases."""
    store = SqliteStore(tmp_path / "cleanair.db")
    policy = Policy(requests_per_minute=10**9, credits=CreditLimits(monthly=10**9, daily=10**9))
    sources = Sources(FakeSource(), FakeGeolocator(HELSINKI), FakeIp(), FakeNamer())
    yield CleanAir(
        store,
        TokenKeys(generate_key()),
        policy,
        ManualClock(),
        sources=sources,
        offload=in_thread,
        store_calls=here_or_in_thread,
    )
    store.close()


@pytest.fixture
def app(roomy_core: CleanAir) -> LeanScoreApp:
    """The app, CORS on for one origin, so both sides of that rule are reachable."""
    made = create_app(roomy_core, Settings(plan_workers=0, cors_allow_origins=(ORIGIN,)))
    assert isinstance(made, LeanScoreApp)
    assert made.score_route is not None
    return made


@pytest.fixture
def served(roomy_core: CleanAir, app: LeanScoreApp) -> Iterator[tuple[TestClient[Any], str]]:
    """The app as served (behind the access log), and a paired token."""
    with TestClient(with_access_log(app)) as client:
        yield client, pair(roomy_core, client)


def counted(client: TestClient[Any]) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """The request counter's requests and latency counts by labels, but the scrape's own."""
    scraped = client.get("/metrics").text
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(scraped)
        for sample in family.samples
        if sample.name in ("cleanair_requests_total", "cleanair_request_duration_seconds_count")
        and sample.labels.get("path") != "/metrics"
    }


def logged(caplog: pytest.LogCaptureFixture) -> list[tuple[Any, ...]]:
    """The access log's lines since the last call, but their durations."""
    lines = [
        (r.method, r.path, r.status, r.connection)  # type: ignore[attr-defined]
        for r in caplog.records
        if r.name == "cleanair.access" and r.path != "/metrics"  # type: ignore[attr-defined]
    ]
    caplog.clear()
    return lines


class Paths:
    """Which of the app's paths served the requests since `clear`."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.router = 0
        self.route = 0
        routed = Litestar.__call__
        handled = HTTPRoute._get_response_for_request

        async def router(app: Litestar, *args: Any) -> None:
            self.router += 1
            await routed(app, *args)

        async def route(self_: HTTPRoute, **kwargs: Any) -> Any:
            self.route += 1
            return await handled(self_, **kwargs)

        monkeypatch.setattr(Litestar, "__call__", router)
        monkeypatch.setattr(HTTPRoute, "_get_response_for_request", route)

    def served_by(self) -> str:
        """The path: this module's own, Litestar's route code behind it, or Litestar's."""
        if self.router:
            return "litestar"
        return "litestar's route code" if self.route else "own"


def score_body(**fields: Any) -> bytes:
    return json.dumps(fields).encode()


AT = score_body(lat=60.17, lon=24.94)
#: name: (method, path, body, headers beyond the token's, the path that serves it)
KINDS: dict[str, tuple[str, str, bytes, dict[str, str], str]] = {
    "a score": ("POST", SCORE_PATH, AT, {}, "own"),
    "a score from a scan": (
        "POST",
        SCORE_PATH,
        score_body(wifi=[{"mac": "00:11:22:33:44:55", "rssi": -50}]),
        {},
        "own",
    ),
    "a malformed body": ("POST", SCORE_PATH, b'{"lat": 1,', {}, "own"),
    "a lone coordinate": ("POST", SCORE_PATH, score_body(lat=1), {}, "own"),
    "an empty body": ("POST", SCORE_PATH, b"", {}, "litestar's route code"),
    "a length over the limit": (
        "POST",
        SCORE_PATH,
        AT,
        {"content-length": "20000000"},
        "litestar's route code",
    ),
    "a length that is no number": (
        "POST",
        SCORE_PATH,
        AT,
        {"content-length": "twenty"},
        "litestar's route code",
    ),
    "a trailing slash": ("POST", SCORE_PATH + "/", AT, {}, "litestar"),
    "GET": ("GET", SCORE_PATH, b"", {}, "litestar"),
    "OPTIONS": ("OPTIONS", SCORE_PATH, b"", {}, "litestar"),
    "an invalid host": ("POST", SCORE_PATH, AT, {"host": "bad host!"}, "litestar"),
    "a cross-origin score": ("POST", SCORE_PATH, AT, {"origin": ORIGIN}, "litestar"),
}


@pytest.mark.parametrize("kind", KINDS)
def test_each_kind_of_request_is_served_by_the_path_meant_for_it(
    app: LeanScoreApp,
    served: tuple[TestClient[Any], str],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    kind: str,
) -> None:
    caplog.set_level(logging.INFO, logger="cleanair.access")
    client, token = served
    method, path, body, headers, expected = KINDS[kind]
    sent = {"authorization": f"Bearer {token}", **headers}
    before = counted(client)
    logged(caplog)
    paths = Paths(monkeypatch)
    own = client.request(method, path, content=body, headers=sent)
    assert paths.served_by() == expected
    own_counts, own_lines = counted(client), logged(caplog)
    # And the answer, its access-log line and its count are Litestar's own.
    app.score_route, route = None, app.score_route
    try:
        alone = client.request(method, path, content=body, headers=sent)
    finally:
        app.score_route = route
    alone_counts, alone_lines = counted(client), logged(caplog)
    assert (own.status_code, own.headers.multi_items(), own.content) == (
        alone.status_code,
        alone.headers.multi_items(),
        alone.content,
    )
    assert own_lines == alone_lines
    assert len(own_lines) == 1
    counts = {key: own_counts[key] - before.get(key, 0) for key in own_counts}
    assert {key: alone_counts[key] - own_counts.get(key, 0) for key in alone_counts} == counts
    if expected != "litestar":  # what Litestar's router refuses is never counted
        assert sum(counts.values()) == 2  # the request, and its latency


def call(app: Any, scope: dict[str, Any], chunks: list[bytes], client: TestClient[Any]) -> Sent:
    """`app` called with `scope` and a body sent in `chunks` (then a disconnect), in the
    client's event loop: what it sent, and the scope entries the access log and metrics
    read."""
    sent: list[tuple[Any, ...]] = []
    messages = [
        {"type": "http.request", "body": chunk, "more_body": i < len(chunks) - 1}
        for i, chunk in enumerate(chunks)
    ]

    async def receive() -> dict[str, Any]:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            sent.append((message["status"], [tuple(h) for h in message.get("headers", [])]))
        else:
            sent.append((message.get("body", b""), message.get("more_body", False)))

    async def run() -> None:
        await app(scope, receive, send)

    client.blocking_portal.call(run)
    caller = scope.get("user")
    return sent, {
        "path_template": scope.get("path_template"),
        "route_handler": scope.get("route_handler"),
        "path_params": scope.get("path_params"),
        "connection": caller.connection_id if isinstance(caller, Caller) else None,
    }


BODIES = st.one_of(
    st.sampled_from(
        [
            AT,
            b"",
            b"[]",
            b"{}",
            b'{"lat": 1,',
            b'{"lat": "1", "lon": "2"}',
            b'{"lat": 1, "lon": 2, "x": "\xff"}',
            b"[" * 3000,
            score_body(lat=91, lon=0),
            score_body(lat=1, lon=2, client="Not Allowed"),
            score_body(lat=1, lon=2, client="watch"),
            score_body(wifi=[{"mac": "00:11:22:33:44:55", "rssi": -50}]),
        ]
    ),
    st.builds(
        score_body,
        lat=st.floats(-90, 90, allow_nan=False),
        lon=st.floats(-180, 180, allow_nan=False),
    ),
    st.binary(max_size=40),
)


def mostly(plain: Any, *others: Any) -> st.SearchStrategy[Any]:
    """`plain` four times in five, else one of `others`: each way a request can leave the
    plain case is tried often, alone as well as with others."""
    return st.one_of(
        st.just(plain), st.just(plain), st.just(plain), st.just(plain), st.sampled_from(others)
    )


@st.composite
def requests(draw: st.DrawFn) -> tuple[dict[str, Any], list[bytes]]:
    """A request near the score route's plain case: a scope (its token as `{token}`) and a
    body in chunks."""
    body = draw(BODIES)
    cuts = draw(mostly([], *[[n] for n in range(len(body) + 1)], [0, len(body)]))
    chunks = [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True)]
    headers: list[tuple[bytes, bytes]] = []
    host = draw(mostly(b"testserver", b"bad host!", None))
    if host is not None:
        headers.append((b"host", host))
    auth = draw(mostly("Bearer {token}", "bearer {token}", "Basic {token}", None))
    if auth is not None:
        headers.append((b"authorization", auth.encode()))
    content_type = draw(
        st.sampled_from([None, b"application/json", b"text/plain", b"multipart/form-data"])
    )
    if content_type is not None:
        headers.append((b"content-type", content_type))
    length = draw(mostly("right", "none", "wrong", "huge", "junk"))
    declared = {
        "right": str(len(body)).encode(),
        "wrong": str(len(body) + 1).encode(),
        "huge": b"20000000",
        "junk": b"x",
    }.get(length)
    if declared is not None:
        headers.append((b"content-length", declared))
    origin = draw(mostly(None, ORIGIN, "https://else.example"))
    if origin is not None:
        headers.append((b"origin", origin.encode()))
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "server": ("testserver", 80),
        "client": ("127.0.0.1", 40000),
        "scheme": "http",
        "method": draw(mostly("POST", "GET", "PUT", "OPTIONS", "HEAD")),
        "root_path": draw(mostly("", "/v1", "/api", None)),
        "path": draw(mostly(SCORE_PATH, SCORE_PATH + "/", "/v1/airquality//score")),
        "query_string": b"",
        "headers": headers,
    }
    scope["raw_path"] = scope["path"].encode()
    if scope["root_path"] is None:  # optional in an ASGI scope
        del scope["root_path"]
    return scope, chunks


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(request=requests())
def test_every_request_answers_as_litestar_alone_answers_it(
    app: LeanScoreApp,
    served: tuple[TestClient[Any], str],
    request: tuple[dict[str, Any], list[bytes]],
) -> None:
    client, token = served
    scope, chunks = request
    scope["headers"] = [
        (name, value.replace(b"{token}", token.encode())) for name, value in scope["headers"]
    ]
    route = app.score_route
    own = call(app, {**scope, "headers": list(scope["headers"])}, chunks, client)
    app.score_route = None
    try:
        alone = call(app, {**scope, "headers": list(scope["headers"])}, chunks, client)
    finally:
        app.score_route = route
    assert own == alone


@get("/other")
async def other() -> dict[str, bool]:
    return {"ok": True}


def _guard(connection: Any, handler: Any) -> None:
    pass


async def _after_request(response: Response[Any]) -> Response[Any]:
    return response


async def _before_request(request: Request[Any, Any, Any]) -> None:
    return None


async def _before_send(message: Any, scope: Any) -> None:
    pass


#: An app option, and whether the score route keeps its own path with it.
OPTIONS: dict[str, tuple[dict[str, Any], bool]] = {
    "as create_app makes it": ({}, True),
    "CORS": ({"cors_config": CORSConfig()}, True),
    "another route": ({"route_handlers": [score_point, other]}, True),
    "a guard": ({"guards": [_guard]}, False),
    "an after-request hook": ({"after_request": _after_request}, False),
    "a before-request hook": ({"before_request": _before_request}, False),
    "a before-send hook": ({"before_send": [_before_send]}, False),
    "response headers": ({"response_headers": [ResponseHeader(name="x-a", value="b")]}, False),
    "compression for every route": ({"compression_config": CompressionConfig("gzip")}, False),
    "allowed hosts": ({"allowed_hosts": ["example.org"]}, False),
    "another request class": ({"request_class": Request}, False),
    "no score route": ({"route_handlers": [other]}, False),
}


@pytest.mark.parametrize("option", OPTIONS)
def test_the_path_is_given_up_when_the_app_asks_for_what_it_does_not_do(
    core: CleanAir, option: str
) -> None:
    changes, kept = OPTIONS[option]
    made: Callable[..., LeanScoreApp] = LeanScoreApp
    app = made(
        **{
            "route_handlers": [score_point],
            "middleware": [bearer_auth(core)],
            "exception_handlers": EXCEPTION_HANDLERS,
            "request_class": JsonBodyRequest,
            "state": State({"core": core}),
            "logging_config": None,
            "openapi_config": None,
            **changes,
        }
    )
    assert (score_route(app, core) is not None) == kept

"""What the error handlers log: a traceback per kind of unhandled failure at most once a
minute, and a client that disconnected mid-body as one INFO line without a traceback."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from litestar import Litestar, Request, get, post
from litestar.testing import TestClient
from litestar.types import Message

from cleanair_core import CleanAir
from cleanair_http.app import create_app
from cleanair_http.errors import UnhandledErrors, exception_handlers
from cleanair_runtime.composition.settings import Settings
from support.http import Client, MakeClient, bearer, pair


class FakeMonotonic:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@get("/boom")
async def boom() -> None:
    raise RuntimeError("secret detail that must not leak")


@get("/other")
async def other() -> None:
    raise KeyError("another failure")


@pytest.fixture
def monotonic() -> FakeMonotonic:
    return FakeMonotonic()


@pytest.fixture
def app_client(monotonic: FakeMonotonic) -> Iterator[Client]:
    handlers = exception_handlers(UnhandledErrors(interval=60.0, monotonic=monotonic))
    app = Litestar([boom, other], exception_handlers=handlers, logging_config=None)
    with TestClient(app) as client:
        yield client


def unhandled(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    records = [r for r in caplog.records if r.name == "cleanair.errors"]
    assert all(r.levelno == logging.ERROR for r in records)
    caplog.clear()
    return records


def test_one_traceback_per_failure_and_minute(
    app_client: Client,
    monotonic: FakeMonotonic,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)

    first = app_client.get("/boom")
    assert (first.status_code, first.text) == (500, "Internal Server Error")
    [record] = unhandled(caplog)
    assert record.exc_info is not None
    assert record.repeats_suppressed == 0  # type: ignore[attr-defined]
    assert record.error == "builtins.RuntimeError"  # type: ignore[attr-defined]
    assert record.at.startswith(__file__)  # type: ignore[attr-defined]

    # Repeats within the minute: still a plain 500 and an ERROR line each, but short.
    for _ in range(5):
        monotonic.now += 10
        repeat = app_client.get("/boom")
        assert (repeat.status_code, repeat.text) == (500, "Internal Server Error")
        [record] = unhandled(caplog)
        assert record.exc_info is None
        assert record.path == "/boom"  # type: ignore[attr-defined]
        assert "secret" not in record.getMessage()

    # Another failure is not held back by the first.
    assert app_client.get("/other").status_code == 500
    [record] = unhandled(caplog)
    assert record.exc_info is not None

    # A minute after the last traceback, the next one is written, with the count skipped.
    monotonic.now += 10
    app_client.get("/boom")
    [record] = unhandled(caplog)
    assert record.exc_info is not None
    assert record.repeats_suppressed == 5  # type: ignore[attr-defined]
    app_client.get("/boom")
    [record] = unhandled(caplog)
    assert record.exc_info is None


def test_the_memory_of_failures_is_bounded(monotonic: FakeMonotonic) -> None:
    errors = UnhandledErrors(monotonic=monotonic)
    kinds = [("builtins.RuntimeError", f"x.py:{line}") for line in range(errors.MAX_KINDS + 50)]
    for kind in kinds:
        assert errors.admit(kind) == 0
    # The most recent kinds are remembered; the oldest were forgotten, so write again.
    assert errors.admit(kinds[-1]) is None
    assert errors.admit(kinds[0]) == 0


@get("/test/boom", exclude_from_auth=True)
async def app_boom() -> None:
    raise RuntimeError("secret detail that must not leak")


def test_the_app_throttles_its_tracebacks(
    make_client: MakeClient, caplog: pytest.LogCaptureFixture
) -> None:
    client = make_client(Settings(plan_workers=0), [app_boom])
    caplog.set_level(logging.DEBUG)
    for _ in range(3):
        assert client.get("/test/boom").status_code == 500
    records = unhandled(caplog)
    assert len(records) == 3
    # The process may have written this failure's traceback in an earlier test already.
    assert sum(r.exc_info is not None for r in records) <= 1
    assert records[-1].exc_info is None


# -- clients that disconnect while their body is read ---------------------------------------


def call_with_disconnect(app: Any, path: str, headers: dict[str, str]) -> list[Message]:
    """Call the ASGI app directly: the client announces 100 bytes, sends 10, then is gone."""
    incoming: list[dict[str, Any]] = [
        {"type": "http.request", "body": b'{"code": "', "more_body": True},
        {"type": "http.disconnect"},
    ]
    sent: list[Message] = []
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": [
            (name.lower().encode(), value.encode())
            for name, value in {
                **headers,
                "Content-Type": "application/json",
                "Content-Length": "100",
            }.items()
        ],
        "client": ("203.0.113.9", 50000),
        "server": ("127.0.0.1", 8000),
        "state": {},
    }

    async def receive() -> dict[str, Any]:
        return incoming.pop(0) if incoming else {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        sent.append(message)

    anyio.run(app, scope, receive, send)
    return sent


@pytest.mark.parametrize("path", ["/v1/connections/token", "/v1/airquality/score"])
def test_a_client_gone_mid_body_is_one_info_line(
    core: CleanAir,
    client: Client,
    caplog: pytest.LogCaptureFixture,
    path: str,
) -> None:
    token = pair(core, client)
    app = create_app(core, Settings(plan_workers=0))
    caplog.set_level(logging.DEBUG)

    sent = call_with_disconnect(app, path, bearer(token))

    gone = [r for r in caplog.records if r.getMessage() == "client disconnected"]
    assert len(gone) == 1
    assert gone[0].levelno == logging.INFO
    assert (gone[0].method, gone[0].path) == ("POST", path)  # type: ignore[attr-defined]
    assert gone[0].exc_info is None
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert [r.getMessage() for r in caplog.records if r.exc_info] == []
    everything = "\n".join(f"{r.getMessage()} {r.__dict__}" for r in caplog.records)
    assert token not in everything
    assert '"code"' not in everything
    # The answer nobody receives is not a server error.
    assert sent[0]["type"] == "http.response.start"
    assert sent[0]["status"] == 499
    assert client.get("/v1/quota", headers=bearer(token)).json()["used"] == 0


@post("/test/fails-after-disconnect", exclude_from_auth=True)
async def fails_after_disconnect(request: Request[Any, Any, Any]) -> None:
    try:
        await request.body()
    finally:
        raise RuntimeError("a bug, whoever disconnected")


def test_a_bug_is_still_a_bug_when_the_client_has_gone(
    core: CleanAir, caplog: pytest.LogCaptureFixture
) -> None:
    app = create_app(core, Settings(plan_workers=0), [fails_after_disconnect])
    caplog.set_level(logging.DEBUG)

    sent = call_with_disconnect(app, "/test/fails-after-disconnect", {})

    assert sent[0]["status"] == 500  # type: ignore[typeddict-item]
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] != []

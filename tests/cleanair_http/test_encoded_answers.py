"""`EncodedJson` sends what Litestar's own `Response` sends, message for message: for any
struct the lean way, and for everything else (headers, cookies, other statuses and media
types, content that is not a struct or cannot be encoded) by Litestar's path."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Iterator
from pathlib import PurePosixPath
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from litestar import Litestar, Response, post
from litestar.datastructures import Cookie, ResponseHeader
from litestar.testing import TestClient
from litestar.types import ASGIApp, Message, Receive, Scope, Send

from cleanair_http.encoded import EncodedJson


class Inner(msgspec.Struct):
    name: str
    at: dt.datetime | None = None


class Answer(msgspec.Struct, omit_defaults=True):
    score: int
    ttl: int | None = None
    ratio: float = 0.0
    id: uuid.UUID | None = None
    tags: list[str] = []
    inner: Inner | None = None
    extra: dict[str, Any] = {}


class Unencodable:
    """Neither msgspec nor Litestar's serializer knows it."""


ANSWERS = st.builds(
    Answer,
    score=st.integers(-(2**63), 2**63 - 1),
    ttl=st.none() | st.integers(0, 10**9),
    ratio=st.floats(allow_nan=False, allow_infinity=False),
    id=st.none() | st.uuids(),
    tags=st.lists(st.text(max_size=8), max_size=3),
    inner=st.none()
    | st.builds(
        Inner, name=st.text(max_size=8), at=st.none() | st.datetimes(timezones=st.just(dt.UTC))
    ),
    extra=st.dictionaries(st.text(max_size=4), st.integers() | st.text(max_size=4), max_size=2),
)
#: What the handler returned, set by the test before each request.
RETURNED: list[Any] = [None]


def routes(response_class: type[Response[Any]] | None) -> list[Any]:
    """The same routes, with `response_class` or Litestar's default."""
    kinds: dict[str, Any] = {} if response_class is None else {"response_class": response_class}

    @post("/plain", status_code=200, **kinds)
    async def plain() -> Answer:
        return RETURNED[0]  # type: ignore[no-any-return]

    @post("/created", status_code=201, **kinds)
    async def created() -> Answer:
        return RETURNED[0]  # type: ignore[no-any-return]

    @post(
        "/decorated",
        status_code=200,
        response_headers=[ResponseHeader(name="x-kind", value="1")],
        response_cookies=[Cookie(key="k", value="v")],
        **kinds,
    )
    async def decorated() -> Answer:
        return RETURNED[0]  # type: ignore[no-any-return]

    @post("/any", status_code=200, **kinds)
    async def anything() -> Any:
        return RETURNED[0]

    @post("/text", status_code=200, media_type="text/plain", **kinds)
    async def text() -> Any:
        return RETURNED[0]

    return [plain, created, decorated, anything, text]


class Recorder:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.sent: list[Message] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.sent = []

        async def recorded(message: Message) -> None:
            self.sent.append(message)
            await send(message)

        await self.app(scope, receive, recorded)


@pytest.fixture(scope="module")
def clients() -> Iterator[tuple[Recorder, TestClient[Any], Recorder, TestClient[Any]]]:
    ours = Recorder(Litestar(routes(EncodedJson), logging_config=None))
    theirs = Recorder(Litestar(routes(None), logging_config=None))
    with TestClient(ours) as our_client, TestClient(theirs) as their_client:
        yield ours, our_client, theirs, their_client


def both(
    clients: tuple[Recorder, TestClient[Any], Recorder, TestClient[Any]], path: str, value: Any
) -> tuple[list[Message], list[Message]]:
    ours, our_client, theirs, their_client = clients
    RETURNED[0] = value
    our_client.post(path)
    their_client.post(path)
    return ours.sent, theirs.sent


@settings(max_examples=60, deadline=None)
@given(answer=ANSWERS, path=st.sampled_from(["/plain", "/created", "/decorated", "/any"]))
def test_any_struct_answer_is_litestars(
    clients: tuple[Recorder, TestClient[Any], Recorder, TestClient[Any]],
    answer: Answer,
    path: str,
) -> None:
    ours, theirs = both(clients, path, answer)
    assert ours == theirs


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("/any", {"plain": ["dict", 1]}),
        ("/any", [1, 2]),
        ("/any", "text"),
        ("/any", b"bytes"),
        ("/any", Answer(1, extra={"x": PurePosixPath("/a")})),  # Litestar's serializer's
        ("/any", Answer(1, extra={"x": Unencodable()})),  # a 500 either way
        ("/text", Answer(1)),  # Litestar refuses a struct as text: a 500 either way
        ("/text", "plain text"),
    ],
)
def test_everything_else_is_litestars(
    clients: tuple[Recorder, TestClient[Any], Recorder, TestClient[Any]], path: str, value: Any
) -> None:
    ours, theirs = both(clients, path, value)
    assert ours == theirs

"""A served score skips the work the request path's cuts removed (issue 34), the score
route's own path past Litestar's router and route code included: each cut leaves
every answer as it was (`test_score_answers_exact.py`), so what shows a cut is in place is the
code a score no longer runs. The test profiles one score request on the thread that serves it
and names what must not run there."""

from __future__ import annotations

import logging
import sys
from collections import defaultdict
from collections.abc import Iterator
from types import FrameType
from typing import Any

import msgspec
import pytest
from litestar.testing import TestClient

from cleanair_core import CleanAir
from cleanair_http.app import create_app, with_access_log
from support.http import bearer, pair

SCORE = "/v1/airquality/score"

#: (file, function) a served score must not call, and the cut that removed it.
AVOIDED_CODE = {
    ("litestar/middleware/authentication.py", "AbstractAuthenticationMiddleware.__call__"): (
        "the bearer middleware is plain ASGI"
    ),
    ("litestar/connection/base.py", "ASGIConnection.headers"): (
        "no header multidict: the token and the body's length are read from the raw headers"
    ),
    ("litestar/datastructures/headers.py", "Headers.__init__"): "no header multidict",
    ("litestar/middleware/compression/middleware.py", "CompressionMiddleware.__call__"): (
        "a score's answers are all below gzip's minimum size: no compression middleware"
    ),
    ("litestar/response/base.py", "Response.to_asgi_response"): (
        "the answer is encoded once and sent without Litestar's response objects"
    ),
    ("litestar/response/base.py", "ASGIResponse.__init__"): "no Litestar response objects",
    ("logging/__init__.py", "LogRecord.__init__"): (
        "the access log's record is copied from a template"
    ),
    # The score route's own path (`cleanair_http.score_route`).
    ("litestar/_asgi/asgi_router.py", "ASGIRouter.__call__"): "no routing for a plain score",
    ("litestar/routes/http.py", "HTTPRoute.handle"): "no Litestar route code",
    ("litestar/connection/request.py", "Request.__init__"): "no Request object",
    ("litestar/_kwargs/kwargs_model.py", "KwargsModel.to_kwargs"): "no kwargs model",
    (
        "litestar/_signature/model.py",
        "SignatureModel.parse_values_from_connection_kwargs",
    ): "no signature model",
    ("litestar/handlers/http_handlers/base.py", "HTTPRouteHandler.to_response"): (
        "no data handler"
    ),
}
#: C functions a served score must not call: each prepares a msgspec coder for one use.
AVOIDED_BUILTINS: dict[Any, str] = {
    msgspec.json.decode: "the body struct's decoder is made once",
    msgspec.json.encode: "the answer's encoder is made once",
}


class Calls:
    """The Python functions (with how often each was called) and C functions called on the
    thread it profiles."""

    def __init__(self) -> None:
        # The frames themselves: a coroutine's frame is "called" again at every resumption.
        self.code: defaultdict[tuple[str, str], set[FrameType]] = defaultdict(set)
        self.builtins: set[Any] = set()

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if event == "call":
            code = frame.f_code
            self.code[code.co_filename, code.co_qualname].add(frame)
        elif event == "c_call":
            self.builtins.add(arg)

    def times(self, file: str, function: str) -> int:
        return sum(len(f) for (n, q), f in self.code.items() if n.endswith(file) and q == function)

    def ran(self, file: str, function: str) -> bool:
        return self.times(file, function) > 0


@pytest.fixture
def served(core: CleanAir) -> Iterator[TestClient[Any]]:
    """The app as `cleanair serve` serves it (shipped settings: access log and metrics on)."""
    with TestClient(with_access_log(create_app(core))) as client:
        yield client


def profiled_score(client: TestClient[Any], token: str) -> Calls:
    """The calls of one score on the thread that serves the app (the client's portal)."""
    calls = Calls()
    client.blocking_portal.call(sys.setprofile, calls)
    try:
        response = client.post(SCORE, json={"lat": 60.17, "lon": 24.94}, headers=bearer(token))
    finally:
        client.blocking_portal.call(sys.setprofile, None)
    assert response.status_code == 200
    return calls


def test_a_served_score_skips_what_the_cuts_removed(
    core: CleanAir, served: TestClient[Any], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="cleanair.access")
    token = pair(core, served)
    profiled_score(served, token)  # the first one makes what is made once
    caplog.clear()
    calls = profiled_score(served, token)
    # Not vacuous: the score ran and was logged.
    assert calls.ran("cleanair_http/controllers/airquality.py", "score_answer")
    assert [(r.name, r.getMessage()) for r in caplog.records] == [("cleanair.access", "request")]
    ran = [why for (file, name), why in AVOIDED_CODE.items() if calls.ran(file, name)]
    ran += [why for builtin, why in AVOIDED_BUILTINS.items() if builtin in calls.builtins]
    assert ran == []
    # Litestar's exception handling around the route's middlewares only: the score route's
    # own path answers its errors itself, as the bearer middleware answers its refusals, so
    # neither the route nor the request counter needs another.
    handling = (
        "litestar/middleware/_internal/exceptions/middleware.py",
        "ExceptionHandlerMiddleware.__call__",
    )
    assert calls.times(*handling) == 1

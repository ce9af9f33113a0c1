"""POST /v1/airquality/score on a path of its own, past Litestar's per-request pipeline.

Why: the score is the API's hot call, and most of what Litestar does for a request is work a
score does not need. Its router, a connection and a `Request` object, the kwargs and
signature models parsing the handler's arguments, the data handler, `Response` objects and
two layers of exception handling were 59 of a score's Python calls (`bench.http_layer`).

Who serves what, so that the two paths cannot drift apart:
- Litestar keeps the route registered (`controllers/airquality.py`). It makes the OpenAPI
  document and serves every request that is not the plain case: another method (405, and
  OPTIONS), another path spelling, a root path, an invalid Host, a cross-origin request
  when CORS is on.
- Here, the plain case passes the very middlewares Litestar resolves for the route
  (disconnect watch, request counter, bearer middleware), composed as Litestar composes
  them, with the scope entries its router sets.
- A body that is not one whole message, within the route's limit and its Content-Length,
  goes to Litestar's own route code with the message replayed: the empty body, a chunked
  or oversized one, a disconnect.
- Otherwise the body is decoded by the strict decoder every JSON route uses
  (`bodies.decode_struct`), answered by the function the Litestar handler calls
  (`score_answer`) and encoded as `EncodedJson` encodes it.
- Any error is answered by Litestar's exception handling with the route's handlers
  (`auth.answer_exception`, as the bearer middleware answers its refusals).
- `score_route` gives no path of its own when the app or the route has anything it does
  not do (guards, hooks, response headers or cookies, caching, compression for the route,
  middleware outside the router but CORS): then Litestar serves every score.

`tests/cleanair_http/test_score_answers_exact.py` pins every answer, byte for byte, and
`test_score_route.py` shows which path served it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from litestar import Litestar
from litestar._asgi.utils import is_valid_host
from litestar.enums import HttpMethod, MediaType, ScopeType
from litestar.middleware._internal.exceptions import ExceptionHandlerMiddleware
from litestar.routes import HTTPRoute
from litestar.utils.scope.state import ScopeState

from cleanair_http.auth import answer_exception
from cleanair_http.bodies import JsonBodyRequest, decode_struct
from cleanair_http.controllers.airquality import score_answer, score_point
from cleanair_http.encoded import EncodedJson, json_encoder, send_json
from cleanair_http.schemas import ScoreRequest

if TYPE_CHECKING:
    from litestar.handlers import HTTPRouteHandler
    from litestar.types import (
        ASGIApp,
        HTTPScope,
        LifeSpanReceive,
        LifeSpanScope,
        LifeSpanSend,
        Receive,
        ReceiveMessage,
        Scope,
        Send,
    )

    from cleanair_core.service import CleanAir

SCORE_PATH = "/v1/airquality/score"


class LeanScoreApp(Litestar):
    """Litestar, whose plain score requests go the score route's own path (`score_route`,
    when set); every other request is Litestar's."""

    score_route: ScoreRoute | None = None

    async def __call__(
        self,
        scope: Scope | LifeSpanScope,
        receive: Receive | LifeSpanReceive,
        send: Send | LifeSpanSend,
    ) -> None:
        """The ASGI entry point: the score route's path or Litestar's."""
        route = self.score_route
        if route is not None and route.takes(scope):
            http = cast("Scope", scope)
            # What Litestar's own entry sets (it wraps `send` only for `before_send` hooks,
            # which `score_route` requires there to be none of).
            http["app"] = http["litestar_app"] = self
            http.setdefault("state", {})
            await route(http, cast("Receive", receive), cast("Send", send))
            return
        await super().__call__(scope, receive, send)


class ScoreRoute:
    """The score route's own path through an app (see the module)."""

    def __init__(
        self, app: Litestar, core: CleanAir, route: HTTPRoute, handler: HTTPRouteHandler
    ) -> None:
        self._core = core
        self._handler = handler
        self._template = route.path_format
        self._exception_handlers = handler.resolve_exception_handlers()
        self._cors = app.cors_config is not None
        self._max_body = handler.resolve_request_max_body_size()
        # As `EncodedJson(content, type_encoders=...)` merges them in Litestar's data handler.
        self._encoder = json_encoder(
            {**(EncodedJson.type_encoders or {}), **(handler.resolve_type_encoders() or {})}
        )
        self._status = handler.status_code
        # Litestar's route code, as it sits inside the route's middlewares.
        self._litestar_route = ExceptionHandlerMiddleware(app=route.handle, debug=None)  # type: ignore[arg-type]
        served: ASGIApp = self._answer
        # The route's middlewares as Litestar's `build_route_middleware_stack` applies them.
        for middleware in handler.resolve_middleware():
            if hasattr(middleware, "__iter__"):
                factory, kwargs = cast("tuple[Any, dict[str, Any]]", middleware)
                served = factory(app=served, **kwargs)
            else:
                served = middleware(app=served)  # type: ignore[call-arg]
        # And Litestar's exception handling around its router, for what the middlewares raise.
        self._served = ExceptionHandlerMiddleware(app=served, debug=None)

    def takes(self, scope: Scope | LifeSpanScope) -> bool:
        """Whether `scope` is a request this path serves as Litestar would."""
        if scope["type"] != ScopeType.HTTP:
            return False
        http = cast("HTTPScope", scope)
        if http["path"] != SCORE_PATH or http["method"] != HttpMethod.POST or http.get("root_path"):
            return False
        host_seen = False
        for name, value in http["headers"]:
            if name == b"host" and not host_seen:
                host_seen = True
                if not is_valid_host(value):  # Litestar's router answers it
                    return False
            elif self._cors and name.lower() == b"origin":  # the CORS middleware's
                return False
        return True

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve a request `takes` accepted, with the scope Litestar's router makes."""
        scope["path_params"] = {}
        scope["route_handler"] = self._handler
        scope["path_template"] = self._template
        ScopeState.from_scope(scope).exception_handlers = self._exception_handlers
        await self._served(scope, receive, send)

    async def _answer(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The route's handling inside its middlewares."""
        message = await receive()
        body = cast("bytes", message.get("body", b""))
        if not self._whole(scope, message, body):
            await self._litestar_route(scope, _replayed(message, receive), send)
            return
        try:
            data = decode_struct(body, ScoreRequest)
            answer = self._encoder.encode(await score_answer(self._core, scope, data))
        except Exception as exc:  # answered as Litestar answers any exception
            await answer_exception(scope, receive, send, exc)
            return
        await send_json(send, self._status, answer)

    def _whole(self, scope: Scope, message: ReceiveMessage, body: bytes) -> bool:
        """Whether the request's body is all in `message`, and Litestar would read it as it
        is: not empty (Litestar finds no data), within the route's limit, and with no
        Content-Length or one that says its length (else Litestar refuses or 413s)."""
        if message["type"] != "http.request" or message.get("more_body", False) or not body:
            return False
        if self._max_body is not None and len(body) > self._max_body:
            return False
        declared = next(
            (value for name, value in scope["headers"] if name.lower() == b"content-length"),
            None,
        )
        return declared is None or declared == b"%d" % len(body)


def _replayed(first: ReceiveMessage, receive: Receive) -> Receive:
    """`receive`, whose first message is `first` again."""
    replayed = False

    async def again() -> Any:
        nonlocal replayed
        if not replayed:
            replayed = True
            return first
        return await receive()

    return again


def score_route(app: Litestar, core: CleanAir) -> ScoreRoute | None:
    """The score route's own path through `app`, whose core is `core`; None when the app or
    the route asks for anything the path does not do."""
    handlers = [
        (route, handler)
        for route in app.routes
        if isinstance(route, HTTPRoute) and route.path == SCORE_PATH
        for handler in route.route_handlers
        if HttpMethod.POST in handler.http_methods
    ]
    if len(handlers) != 1:
        return None
    route, handler = handlers[0]
    if not (_plain_route(handler) and _plain_app(app, handler)):
        return None
    return ScoreRoute(app, core, route, handler)


def _plain_route(handler: HTTPRouteHandler) -> bool:
    """Whether the route is the score handler with nothing around it but middleware."""
    return (
        handler.fn is score_point.fn
        and handler.resolve_request_class() is JsonBodyRequest
        and handler.resolve_response_class() is EncodedJson
        and handler.media_type == MediaType.JSON
        and not handler.resolve_guards()
        and not handler.resolve_dependencies()
        and handler.resolve_before_request() is None
        and not any(layer.after_request for layer in handler.ownership_layers)
        and handler.resolve_after_response() is None
        and not handler.resolve_response_headers()
        and not handler.resolve_response_cookies()
        and handler.background is None
        and not handler.cache
        and handler.resolve_data_dto() is None
        and handler.resolve_return_dto() is None
    )


def _plain_app(app: Litestar, handler: HTTPRouteHandler) -> bool:
    """Whether the app does to a score only what this path does: CORS (left to Litestar for
    cross-origin requests), then exception handling around its router, and no compression,
    CSRF, host or `before_send` layer for the route."""
    outer: Any = app.asgi_handler
    if app.cors_config is not None:
        outer = getattr(outer, "app", None)
    compression = app.compression_config
    return (
        isinstance(outer, ExceptionHandlerMiddleware)
        and outer.app is app.asgi_router
        and not app.before_send
        and app.csrf_config is None
        and not app.allowed_hosts
        and (
            compression is None
            or (
                compression.exclude_opt_key is not None
                and bool(handler.opt.get(compression.exclude_opt_key))
            )
        )
    )

"""Bearer authentication, the rate limit and authorization: one middleware, one read.

A route declares what its callers need with `opt=requires(...)`; the bearer middleware, which
runs for every route not excluded from auth, admits the request (`CleanAir.admit_awaited`,
whose store calls PostgreSQL makes on the event loop, with no thread hand-over): it checks
the token, the rate limit and the caller's scope and plan on one read of the store. There are
no per-route guards: Litestar copies the route handler for every guard it runs, and each guard
was a trip of its own to the store, which together cost a score request about a tenth of its
time.

A charged route (`requires(..., charged=True)`) leaves the request's rate-limit hit pending:
its call counts it in the same write as its charge. When the call ends before its charge (a
body that fails validation, say), the middleware counts the hit once the response is done,
so every request counts against the limit.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import attrs
from litestar.connection import ASGIConnection
from litestar.enums import HttpMethod, ScopeType
from litestar.middleware._internal.exceptions import ExceptionHandlerMiddleware
from litestar.types import ASGIApp, Receive, Send
from litestar.types import Scope as AsgiScope

from cleanair_core.access.connections import Authorized, Caller
from cleanair_core.access.scopes import Scope
from cleanair_core.errors import NotAuthenticated, StoreUnavailable
from cleanair_core.service import CleanAir
from cleanair_core.use_cases.admission import Admitted
from cleanair_core.use_cases.credits import PendingHit

AnyConnection = ASGIConnection[Any, Any, Any, Any]
#: The key of a route's `opt` holding its `Access`.
ACCESS = "cleanair_access"


@attrs.frozen
class Access:
    """What a route asks of its caller beyond a valid token: the rate limit it counts against
    and, for the computing endpoints, a scope (with premium and a user-owned connection when
    asked). A route without one (an embedder's extra route, say) only authenticates."""

    scope: Scope | None = None
    premium: bool = True
    user_owned: bool = False
    #: Plan polling counts against its own limit (60 a minute) instead of the general one.
    polls: bool = False
    #: The route's call charges credits and counts the rate-limit hit with its charge.
    charged: bool = False


def requires(
    scope: Scope | None = None,
    *,
    premium: bool = True,
    user_owned: bool = False,
    polls: bool = False,
    charged: bool = False,
) -> dict[str, Access]:
    """A route's `opt`: the rate limit, then `scope` (when given) and premium, and a
    user-owned connection when asked; `charged` leaves the hit to the call's charge."""
    return {ACCESS: Access(scope, premium, user_owned, polls, charged)}


def core_of(connection: AnyConnection) -> CleanAir:
    core: CleanAir = connection.app.state.core
    return core


def caller_of(connection: AnyConnection) -> Caller:
    """The caller the middleware authenticated (NotAuthenticated, failing closed, otherwise)."""
    caller = connection.scope.get("user")
    if not isinstance(caller, Caller):
        raise NotAuthenticated()
    return caller


def authorization_of(connection: AnyConnection) -> Authorized:
    """The proof the middleware made for a route that `requires` a scope."""
    return authorization_in(connection.scope)


def authorization_in(scope: AsgiScope) -> Authorized:
    """`authorization_of` the request of an ASGI scope."""
    admitted = scope.get("auth")
    if not isinstance(admitted, Admitted) or admitted.proof is None:
        raise NotAuthenticated()
    return admitted.proof


def pending_hit_of(connection: AnyConnection) -> PendingHit | None:
    """The request's rate-limit hit a charged route's call is to count with its charge."""
    return pending_hit_in(connection.scope)


def pending_hit_in(scope: AsgiScope) -> PendingHit | None:
    """`pending_hit_of` the request of an ASGI scope."""
    admitted = scope.get("auth")
    return admitted.pending if isinstance(admitted, Admitted) else None


async def _checked(
    core: CleanAir, token: str, access: Access | None
) -> tuple[Caller, Admitted | None]:
    """Authenticate `token`, check the rate limit and authorize, in this order (401, 429, 403):
    one read, and one atomic write at most (the rate-limit hit, unless left to the charge),
    awaited on the request path's store calls (on the event loop for PostgreSQL, right here
    or in a thread for SQLite's)."""
    if access is None:
        caller = await core.store_calls(lambda: core.authenticate(token))
        return caller, None
    admitted = await core.admit_awaited(
        token,
        rule=core.policy.plan_polls if access.polls else None,
        scope=access.scope,
        premium=access.premium,
        user_owned=access.user_owned,
        defer_hit=access.charged,
    )
    return admitted.caller, admitted


#: The route option that opens a route to callers without a token (Litestar's own key).
EXCLUDE_FROM_AUTH = "exclude_from_auth"
#: Paths read without a token: the OpenAPI document and its viewers.
OPEN_PREFIX = "/schema"
#: The connections the middleware checks (every ASGI scope type Litestar routes but lifespan).
_CHECKED = frozenset((ScopeType.HTTP, ScopeType.WEBSOCKET))


def bearer_auth(core: CleanAir) -> Callable[[ASGIApp], ASGIApp]:
    """The bearer middleware of `core`'s app: rejects (401) any request without a valid
    `Authorization: Bearer <token>`, so no route, an embedder's extra one included, ever runs
    for an unchecked token; then applies the route's `Access` (429, 403).

    Open without a token: routes with `exclude_from_auth=True`, OPTIONS requests and the
    OpenAPI document under `/schema`, as Litestar's authentication middleware leaves them.

    Plain ASGI rather than Litestar's `AbstractAuthenticationMiddleware`, which built a
    connection object and parsed every header into a multidict for the one header read here:
    about 3 % of a served score's CPU. It answers its own refusals (`answer_exception`), so the
    request counter before it (`metrics.count_requests`) counts them without an exception
    handler of its own."""

    def middleware(app: ASGIApp) -> ASGIApp:
        async def authenticated(scope: AsgiScope, receive: Receive, send: Send) -> None:
            if _open(scope):
                await app(scope, receive, send)
                return
            access: Access | None = scope["route_handler"].opt.get(ACCESS)
            try:
                scope["user"], scope["auth"] = await _checked(core, _token(scope), access)
            except Exception as refused:  # answered as Litestar answers any exception
                await answer_exception(scope, receive, send, refused)
                return
            try:
                await app(scope, receive, send)
            finally:
                admitted = scope.get("auth")
                pending = admitted.pending if isinstance(admitted, Admitted) else None
                if pending is not None and not pending.counted:
                    # The answer has gone: a store that cannot count the hit now costs the
                    # limit one request, never the caller an error.
                    with contextlib.suppress(StoreUnavailable):
                        await core.count_pending_hit_awaited(pending)

        return authenticated

    return middleware


#: Litestar's exception handling, for the middleware's refusals (its app is never called).
_REFUSALS = ExceptionHandlerMiddleware(app=None, debug=None)  # type: ignore[arg-type]


async def answer_exception(
    scope: AsgiScope, receive: Receive, send: Send, refused: Exception
) -> None:
    """Answer a refused request (401, 403, 429, a 503 of the store, a 500 of a bug) as the
    exception handling around the middleware would: the same steps as Litestar's
    `ExceptionHandlerMiddleware` takes for an exception before the response started (the
    score route's own path answers its errors with it too)."""
    litestar_app = scope["litestar_app"]
    if litestar_app.logging_config and (logger := litestar_app.logger):
        _REFUSALS.handle_exception_logging(
            logger=logger, logging_config=litestar_app.logging_config, scope=scope
        )
    for hook in litestar_app.after_exception:
        await hook(refused, scope)
    if litestar_app.pdb_on_exception:
        litestar_app.debugger_module.post_mortem()
    if scope["type"] == ScopeType.HTTP:
        await _REFUSALS.handle_request_exception(
            litestar_app=litestar_app, scope=scope, receive=receive, send=send, exc=refused
        )
    else:
        await _REFUSALS.handle_websocket_exception(send=send, exc=refused)


def _open(scope: AsgiScope) -> bool:
    """Whether the request is one the middleware lets through unchecked."""
    if scope["type"] not in _CHECKED:
        return True
    handler = scope.get("route_handler")
    if handler is not None and handler.opt.get(EXCLUDE_FROM_AUTH):
        return True
    if scope.get("method") == HttpMethod.OPTIONS:
        return True
    # A mounted app sees its own paths; the prefix applies to the path as requested.
    path = scope["raw_path"].decode() if getattr(handler, "is_mount", False) else scope["path"]
    return path.startswith(OPEN_PREFIX)


def _token(scope: AsgiScope) -> str:
    """The bearer token of the request's first `Authorization` header; NotAuthenticated
    without one."""
    for name, value in scope["headers"]:
        if name.lower() == b"authorization":
            scheme, _, token = value.decode("latin-1").partition(" ")
            token = token.strip()
            if scheme.lower() != "bearer" or not token:
                break
            return token
    raise NotAuthenticated()

"""Bearer authentication middleware and the guards every endpoint composes."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from litestar.connection import ASGIConnection
from litestar.handlers.base import BaseRouteHandler
from litestar.middleware import AbstractAuthenticationMiddleware, AuthenticationResult

from cleanair_core.access.connections import Authorized, Caller
from cleanair_core.access.scopes import Scope
from cleanair_core.credits.rate_limits import RateLimit
from cleanair_core.errors import NotAuthenticated
from cleanair_core.service import CleanAir
from cleanair_http.offloading import here_or_in_thread

AnyConnection = ASGIConnection[Any, Any, Any, Any]
# Guards are coroutines: Litestar would run a plain function in a worker thread.
Guard = Callable[[AnyConnection, BaseRouteHandler], Awaitable[None]]


def core_of(connection: AnyConnection) -> CleanAir:
    core: CleanAir = connection.app.state.core
    return core


class BearerToken:
    """A bearer token as the request carried it, not yet checked against the store."""

    __slots__ = ("value",)

    def __init__(self, value: str) -> None:
        self.value = value

    def __repr__(self) -> str:  # never show a token in logs or tracebacks
        return "BearerToken(<hidden>)"


def caller_of(connection: AnyConnection) -> Caller:
    """The caller the guards authenticated (NotAuthenticated, failing closed, otherwise)."""
    caller = connection.scope["user"]
    if not isinstance(caller, Caller):
        raise NotAuthenticated()
    return caller


class BearerAuthMiddleware(AbstractAuthenticationMiddleware):
    """Rejects (401) any request without `Authorization: Bearer <token>`; the token itself
    is checked by the app-wide guard `authenticated`, right before the route's guards."""

    async def authenticate_request(self, connection: AnyConnection) -> AuthenticationResult:
        header = connection.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise NotAuthenticated()
        return AuthenticationResult(user=BearerToken(token.strip()), auth=None)


async def authenticated(connection: AnyConnection, _: BaseRouteHandler) -> None:
    """The app-wide guard: the bearer token of any route behind the middleware becomes a
    `Caller` (401 otherwise) before the route's own guards run, so a route that forgot its
    guard, or an embedder's extra route, still never runs for an unchecked token."""
    user = connection.scope.get("user")
    if isinstance(user, BearerToken):
        core = core_of(connection)
        connection.scope["user"] = await here_or_in_thread(lambda: core.authenticate(user.value))


def authorized_for(scope: Scope, *, user_owned: bool = False) -> Guard:
    """The rate limit, then scope and premium (and, when asked, a user-owned connection), in
    one guard and one store call (Litestar copies the handler for each guard it runs). The
    proof is kept for the handler: `authorization_of`."""

    async def guard(connection: AnyConnection, _: BaseRouteHandler) -> None:
        core, caller = core_of(connection), caller_of(connection)

        def check() -> Authorized:
            core.enforce_rate_limit(caller)
            return core.authorize(caller, scope, user_owned=user_owned)

        connection.state["authorized"] = await here_or_in_thread(check)

    return guard


async def polls_limited(connection: AnyConnection, _: BaseRouteHandler) -> None:
    """Plan polling: its own limit of 60 a minute per connection, then the scope; no premium
    check (a lapsed user may collect a plan already paid for)."""
    core, caller = core_of(connection), caller_of(connection)

    def check() -> Authorized:
        core.enforce_rate_limit(caller, core.policy.plan_polls)
        return core.authorize(caller, Scope.ROUTES_PLAN, premium=False)

    connection.state["authorized"] = await here_or_in_thread(check)


def authorization_of(connection: AnyConnection) -> Authorized:
    authorized: Authorized = connection.state["authorized"]
    return authorized


def rate_limited(rule: RateLimit | None = None) -> Guard:
    """Count the request against `rule` (default: the deployment's general limit)."""

    async def guard(connection: AnyConnection, _: BaseRouteHandler) -> None:
        core, caller = core_of(connection), caller_of(connection)
        await here_or_in_thread(lambda: core.enforce_rate_limit(caller, rule))

    return guard

"""Bearer authentication, the rate limit and authorization: one middleware, one store call.

A route declares what its callers need with `opt=requires(...)`; the bearer middleware, which
runs for every route not excluded from auth, checks the token, counts the rate limit and
authorizes the caller in one step. There are no per-route guards: Litestar copies the route
handler for every guard it runs, and each guard was a trip of its own to the store, which
together cost a score request about a tenth of its time.
"""

from __future__ import annotations

from typing import Any

import attrs
from litestar.connection import ASGIConnection
from litestar.middleware import AbstractAuthenticationMiddleware, AuthenticationResult

from cleanair_core.access.connections import Authorized, Caller
from cleanair_core.access.scopes import Scope
from cleanair_core.errors import NotAuthenticated
from cleanair_core.service import CleanAir

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


def requires(
    scope: Scope | None = None,
    *,
    premium: bool = True,
    user_owned: bool = False,
    polls: bool = False,
) -> dict[str, Access]:
    """A route's `opt`: the rate limit, then `scope` (when given) and premium, and a
    user-owned connection when asked."""
    return {ACCESS: Access(scope, premium, user_owned, polls)}


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
    authorized = connection.scope.get("auth")
    if not isinstance(authorized, Authorized):
        raise NotAuthenticated()
    return authorized


def _checked(core: CleanAir, token: str, access: Access | None) -> AuthenticationResult:
    """Authenticate `token`, count the rate limit and authorize, in this order (401, 429, 403):
    one atomic store write at most (the rate-limit hit), so it may run on the event loop."""
    caller = core.authenticate(token)
    if access is None:
        return AuthenticationResult(user=caller, auth=None)
    core.enforce_rate_limit(caller, core.policy.plan_polls if access.polls else None)
    if access.scope is None:
        return AuthenticationResult(user=caller, auth=None)
    proof = core.authorize(
        caller, access.scope, premium=access.premium, user_owned=access.user_owned
    )
    return AuthenticationResult(user=caller, auth=proof)


class BearerAuthMiddleware(AbstractAuthenticationMiddleware):
    """Rejects (401) any request without a valid `Authorization: Bearer <token>`, so no route,
    an embedder's extra one included, ever runs for an unchecked token; then applies the
    route's `Access` (429, 403)."""

    async def authenticate_request(self, connection: AnyConnection) -> AuthenticationResult:
        header = connection.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise NotAuthenticated()
        core = core_of(connection)
        access: Access | None = connection.route_handler.opt.get(ACCESS)
        return await core.store_calls(lambda: _checked(core, token, access))

"""Connections (credentials with fixed scopes) and turning a bearer token into a Caller."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Protocol

import attrs

from cleanair_core.access.accounts import AccountStore, Owner, OwnerKind
from cleanair_core.access.scopes import Scope
from cleanair_core.access.tokens import Environment, issue_token, same_hash, token_environment
from cleanair_core.errors import (
    MissingScope,
    NotAuthenticated,
    NotPremium,
    PartnerConnectionRefused,
)
from cleanair_core.keys import TokenKeys


@attrs.frozen
class Connection:
    id: uuid.UUID
    owner: Owner
    name: str
    scopes: frozenset[Scope]
    token_hash: str = attrs.field(repr=False)
    created_at: datetime
    revoked_at: datetime | None = None

    @property
    def revoked(self) -> bool:
        return self.revoked_at is not None


@attrs.frozen
class IssuedConnection:
    """A new connection together with its raw token, which exists only in this value."""

    connection: Connection
    token: str = attrs.field(repr=False)


@attrs.frozen
class Caller:
    """The authenticated party of one request."""

    connection_id: uuid.UUID
    owner: Owner
    scopes: frozenset[Scope]
    #: `str(connection_id)`, made once: a charged request keys its rate-limit hit and its
    #: debit by it, and `UUID.__str__` is Python (a microsecond each).
    connection_key: str = attrs.field(
        init=False,
        eq=False,
        repr=False,
        default=attrs.Factory(lambda self: str(self.connection_id), takes_self=True),
    )

    def require_scope(self, scope: Scope) -> None:
        if scope not in self.scopes:
            raise MissingScope(scope.value)

    def require_user_owned(self) -> None:
        if self.owner.kind is not OwnerKind.USER:
            raise PartnerConnectionRefused()


@attrs.frozen
class Authorized:
    """Proof, for one request, that `caller` passed the checks for `scope`.

    Made only by `authorize` (the HTTP middleware calls it before the body is decoded); use cases
    take this proof instead of a `Caller`, so no check runs twice and none can be forgotten.
    `premium` and `user_owned` say which of the optional checks were made.
    """

    caller: Caller
    scope: Scope
    premium: bool = True
    user_owned: bool = False

    def caller_for(self, scope: Scope, *, premium: bool = True, user_owned: bool = False) -> Caller:
        """The caller, once the proof is seen to cover what a use case needs.

        A proof made for other checks is a programming error, not a client's: TypeError.
        """
        if (
            self.scope is not scope
            or (premium and not self.premium)
            or (user_owned and not self.user_owned)
        ):
            options = ("" if premium else ", premium=False") + (
                ", user_owned=True" if user_owned else ""
            )
            raise TypeError(f"this use case needs authorize(caller, Scope.{scope.name}{options})")
        return self.caller


class ConnectionStore(Protocol):
    """Storage port for connections."""

    def add_connection(self, connection: Connection) -> None: ...

    def connection_by_token_hash(self, token_hash: str) -> Connection | None: ...

    def connections_of(self, owner: Owner) -> list[Connection]:
        """Every connection of `owner`, oldest first, revoked ones included."""

    def revoke_connection(self, connection_id: uuid.UUID, at: datetime) -> bool:
        """Mark revoked; False when unknown or already revoked."""


def authenticate(
    token: str,
    *,
    environment: Environment,
    keys: TokenKeys,
    connections: ConnectionStore,
    accounts: AccountStore,
) -> Caller:
    """Resolve a raw bearer token, or raise NotAuthenticated (one error for every cause)."""
    if token_environment(token) is not environment:
        raise NotAuthenticated()
    token_hash = keys.hash_token(token)
    connection = connections.connection_by_token_hash(token_hash)

    def partner_active() -> bool:
        assert connection is not None
        partner = accounts.get_partner(connection.owner.name)
        return partner is not None and partner.active

    return caller_of(connection, token_hash, partner_active)


def caller_of(
    connection: Connection | None, token_hash: str, partner_active: Callable[[], bool]
) -> Caller:
    """The caller of the connection found for `token_hash`, or NotAuthenticated: none was
    found, it is revoked, or its owner is a partner no longer active (`partner_active`, asked
    only then)."""
    # The lookup is keyed by an HMAC, so its timing says nothing about the token; the explicit
    # comparison keeps the check constant-time whatever index the adapter uses.
    if connection is None or not same_hash(connection.token_hash, token_hash):
        raise NotAuthenticated()
    if connection.revoked:
        raise NotAuthenticated()
    if connection.owner.kind is OwnerKind.PARTNER and not partner_active():
        raise NotAuthenticated()
    return Caller(connection.id, connection.owner, connection.scopes)


def require_premium(caller: Caller, accounts: AccountStore) -> None:
    """Premium is re-checked on every computing call; active partners count as entitled."""
    if caller.owner.kind is OwnerKind.USER:
        user = accounts.get_user(caller.owner.name)
        if user is None or not user.premium:
            raise NotPremium()


def authorize(
    caller: Caller,
    scope: Scope,
    accounts: AccountStore,
    *,
    premium: bool = True,
    user_owned: bool = False,
) -> Authorized:
    """Check `scope`, then (unless told not to) the owner's premium plan, then (when asked)
    that the connection belongs to a user; the proof a use case takes.

    Raises MissingScope, NotPremium or PartnerConnectionRefused, in that order.
    """
    return authorize_with(
        caller,
        scope,
        lambda: require_premium(caller, accounts),
        premium=premium,
        user_owned=user_owned,
    )


def authorize_with(
    caller: Caller,
    scope: Scope,
    check_premium: Callable[[], None],
    *,
    premium: bool = True,
    user_owned: bool = False,
) -> Authorized:
    """`authorize`, with the premium check (raising NotPremium) made by `check_premium`: for
    a caller whose owner's standing was read with its connection."""
    caller.require_scope(scope)
    if premium:
        check_premium()
    if user_owned:
        caller.require_user_owned()
    return Authorized(caller, scope, premium, user_owned)


#: Unicode's control characters (category Cc): C0, DEL and C1.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


def is_valid_connection_name(name: str) -> bool:
    """1 to 100 code points, none of them a control character (U+0000 to U+001F, U+007F to
    U+009F).

    A name is a label shown back to its owner; a control character has no place in one, and
    PostgreSQL's text cannot hold U+0000 at all. Refusing them here, before any store sees
    the name, makes the rule the same on every store rather than whatever each can hold.
    """
    return 1 <= len(name) <= 100 and _CONTROL.search(name) is None


def validate_connection_name(name: str) -> str:
    """`name` when `is_valid_connection_name`; ValueError otherwise (the input not echoed)."""
    if not is_valid_connection_name(name):
        raise ValueError("a connection name is 1 to 100 characters, none a control character")
    return name


def new_connection(
    owner: Owner,
    name: str,
    scopes: frozenset[Scope],
    *,
    environment: Environment,
    keys: TokenKeys,
    now: datetime,
) -> IssuedConnection:
    """A fresh connection and its raw token (shown once; only its keyed hash is stored)."""
    validate_connection_name(name)
    token = issue_token(environment)
    connection = Connection(
        id=uuid.uuid4(),
        owner=owner,
        name=name,
        scopes=scopes,
        token_hash=keys.hash_token(token),
        created_at=now,
    )
    return IssuedConnection(connection, token)

"""Connections (credentials with fixed scopes) and turning a bearer token into a Caller."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Protocol

import attrs

from cleanair_core.access.accounts import AccountStore, Owner, OwnerKind
from cleanair_core.access.scopes import Scope
from cleanair_core.access.tokens import Environment, same_hash, token_environment
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

    def require_scope(self, scope: Scope) -> None:
        if scope not in self.scopes:
            raise MissingScope(scope.value)

    def require_user_owned(self) -> None:
        if self.owner.kind is not OwnerKind.USER:
            raise PartnerConnectionRefused()


@attrs.frozen
class Authorized:
    """Proof, for one request, that `caller` passed the checks for `scope` (and premium).

    Made by `CleanAir.authorize`; a use case given one skips the checks it already passed, so
    the HTTP layer can check before decoding the body without paying twice.
    """

    caller: Caller
    scope: Scope


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
    # The lookup is keyed by an HMAC, so its timing says nothing about the token; the explicit
    # comparison keeps the check constant-time whatever index the adapter uses.
    if connection is None or not same_hash(connection.token_hash, token_hash):
        raise NotAuthenticated()
    if connection.revoked:
        raise NotAuthenticated()
    if connection.owner.kind is OwnerKind.PARTNER:
        partner = accounts.get_partner(connection.owner.name)
        if partner is None or not partner.active:
            raise NotAuthenticated()
    return Caller(connection.id, connection.owner, connection.scopes)


def require_premium(caller: Caller, accounts: AccountStore) -> None:
    """Premium is re-checked on every computing call; active partners count as entitled."""
    if caller.owner.kind is OwnerKind.USER:
        user = accounts.get_user(caller.owner.name)
        if user is None or not user.premium:
            raise NotPremium()

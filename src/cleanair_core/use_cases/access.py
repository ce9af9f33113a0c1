"""Access use cases: accounts, partner connections, pairing, authentication, authorization."""

from __future__ import annotations

import uuid
from collections.abc import Iterable

from cleanair_core.access import pairing
from cleanair_core.access.accounts import Owner, OwnerKind, Partner, User, validate_account_name
from cleanair_core.access.connections import (
    Authorized,
    Caller,
    Connection,
    IssuedConnection,
    authenticate,
    is_valid_connection_name,
    new_connection,
)
from cleanair_core.access.connections import authorize as authorize_caller
from cleanair_core.access.scopes import USER_SCOPES, Scope
from cleanair_core.credits import rate_limits
from cleanair_core.errors import InvalidPairingCode, OperatorError, Unprocessable
from cleanair_core.use_cases.context import Context

# -- operator use cases (the CLI stands in for the companion app and partner agreements) -----


def add_user(ctx: Context, name: str, *, premium: bool = True) -> User:
    user = User(validate_account_name(name), premium, ctx.now())
    if not ctx.store.add_user(user):
        raise OperatorError(f"user {name} already exists")
    return user


def set_premium(ctx: Context, name: str, premium: bool) -> None:
    if not ctx.store.set_premium(name, premium):
        raise OperatorError(f"no user {name}")


def create_pairing_code(ctx: Context, user_name: str) -> str:
    """A fresh code for a premium user, as the companion app would show it."""
    user = ctx.store.get_user(user_name)
    if user is None:
        raise OperatorError(f"no user {user_name}")
    if not user.premium:
        raise OperatorError(f"user {user_name} has no premium plan; pairing needs one")
    return pairing.issue_code(
        user, codes=ctx.store, keys=ctx.keys, now=ctx.now(), randbelow=ctx.randbelow
    )


def add_partner(ctx: Context, name: str) -> Partner:
    partner = Partner(validate_account_name(name), True, ctx.now())
    if not ctx.store.add_partner(partner):
        raise OperatorError(f"partner {name} already exists")
    return partner


def deactivate_partner(ctx: Context, name: str) -> None:
    if not ctx.store.set_partner_active(name, False):
        raise OperatorError(f"no partner {name}")


def issue_partner_token(
    ctx: Context, partner_name: str, connection_name: str, scopes: Iterable[Scope]
) -> IssuedConnection:
    partner = ctx.store.get_partner(partner_name)
    if partner is None:
        raise OperatorError(f"no partner {partner_name}")
    if not partner.active:
        raise OperatorError(f"partner {partner_name} is deactivated")
    owner = Owner(OwnerKind.PARTNER, partner.name)
    return _store_new_connection(ctx, owner, connection_name, frozenset(scopes))


def connections_of_user(ctx: Context, name: str) -> list[Connection]:
    if ctx.store.get_user(name) is None:
        raise OperatorError(f"no user {name}")
    return ctx.store.connections_of(Owner(OwnerKind.USER, name))


def revoke_connection(ctx: Context, connection_id: uuid.UUID) -> None:
    if not ctx.store.revoke_connection(connection_id, ctx.now()):
        raise OperatorError(f"no active connection {connection_id}")


def list_users(ctx: Context) -> list[User]:
    return ctx.store.list_users()


def list_partners(ctx: Context) -> list[Partner]:
    return ctx.store.list_partners()


def connections_of_partner(ctx: Context, name: str) -> list[Connection]:
    if ctx.store.get_partner(name) is None:
        raise OperatorError(f"no partner {name}")
    return ctx.store.connections_of(Owner(OwnerKind.PARTNER, name))


def revoke_partner_connection(ctx: Context, name: str, connection_id: uuid.UUID) -> None:
    """Revoke one of `name`'s connections; an id of another owner's is refused, so a slip
    of the operator's cannot end a user's connection."""
    owned = {c.id for c in connections_of_partner(ctx, name) if not c.revoked}
    if connection_id not in owned or not ctx.store.revoke_connection(connection_id, ctx.now()):
        raise OperatorError(f"partner {name} has no active connection {connection_id}")


# -- API use cases ----------------------------------------------------------------------------


def count_explore_request(ctx: Context, client_address: str) -> None:
    """Count a request for the explorer's public network index or tiles from
    `client_address`; raises RateLimited over the address's allowance. One store write, in
    the store every process shares: the limit holds across them all."""
    rate_limits.enforce(ctx.store, ctx.policy.explore_requests, client_address, ctx.now())


def redeem_pairing_code(
    ctx: Context, code: str, name: str, client_address: str
) -> IssuedConnection:
    """Exchange a pairing code for a user connection with the pairing scopes.

    Raises Unprocessable for a name `is_valid_connection_name` refuses (before the code is
    tried, so no guess is spent on it), RateLimited when the address's attempts or the global
    guess budget are spent, and InvalidPairingCode (one error for every cause) when the code
    cannot be redeemed.

    The code is spent and the connection stored in one transaction: a failure storing the
    connection (the database gone, say) leaves the code unused for a retry, rather than
    spent with nothing to show for it.
    """
    if not is_valid_connection_name(name):
        raise Unprocessable()
    rate_limits.enforce(ctx.store, ctx.policy.pairing_attempts, client_address, ctx.now())
    with ctx.store.transaction() as store:
        user = pairing.redeem(
            code,
            codes=store,
            accounts=store,
            keys=ctx.keys,
            clock=ctx.clock,
            budget=ctx.policy.pairing_guess_budget,
        )
        if user is None:
            issued = None  # the guess stays recorded: the transaction commits
        else:
            issued = new_connection(
                Owner(OwnerKind.USER, user.name),
                name,
                USER_SCOPES,
                environment=ctx.policy.environment,
                keys=ctx.keys,
                now=ctx.now(),
            )
            store.add_connection(issued.connection)
    if issued is None:
        raise InvalidPairingCode()
    return issued


def authenticate_token(ctx: Context, token: str) -> Caller:
    """The caller behind a raw bearer token; raises NotAuthenticated."""
    return authenticate(
        token,
        environment=ctx.policy.environment,
        keys=ctx.keys,
        connections=ctx.store,
        accounts=ctx.store,
    )


def authorize(
    ctx: Context, caller: Caller, scope: Scope, *, premium: bool = True, user_owned: bool = False
) -> Authorized:
    """The proof use cases take; raises MissingScope, NotPremium or PartnerConnectionRefused."""
    return authorize_caller(caller, scope, ctx.store, premium=premium, user_owned=user_owned)


def _store_new_connection(
    ctx: Context, owner: Owner, name: str, scopes: frozenset[Scope]
) -> IssuedConnection:
    issued = new_connection(
        owner, name, scopes, environment=ctx.policy.environment, keys=ctx.keys, now=ctx.now()
    )
    ctx.store.add_connection(issued.connection)
    return issued

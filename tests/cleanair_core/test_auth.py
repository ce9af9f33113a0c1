"""Turning a bearer token into a Caller, and the checks made on the Caller."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from cleanair_core.access.accounts import Owner, OwnerKind
from cleanair_core.access.connections import (
    Caller,
    Connection,
    IssuedConnection,
    authenticate,
    require_premium,
)
from cleanair_core.access.scopes import USER_SCOPES, Scope
from cleanair_core.access.tokens import Environment, issue_token
from cleanair_core.clock import ManualClock
from cleanair_core.errors import (
    Forbidden,
    MissingScope,
    NotAuthenticated,
    NotPremium,
    OperatorError,
    PartnerConnectionRefused,
)
from cleanair_core.keys import TokenKeys
from cleanair_core.policy import Policy
from cleanair_core.ports import Store
from cleanair_core.service import CleanAir
from cleanair_storage.memory import MemoryStore

KEYS = TokenKeys(b"auth-tests-server-key-of-32-bytes")
NOW = datetime(2026, 4, 1, 10, 0, tzinfo=UTC)


def make_core(store: Store, environment: Environment = Environment.TEST) -> CleanAir:
    return CleanAir(store, KEYS, Policy(environment=environment), ManualClock(NOW))


def pair(core: CleanAir, user: str = "alice") -> IssuedConnection:
    if core.store.get_user(user) is None:
        core.add_user(user, premium=True)
    return core.redeem_pairing_code(core.create_pairing_code(user), "phone", "10.0.0.1")


def partner_token(core: CleanAir, scopes: frozenset[Scope] = frozenset(Scope)) -> IssuedConnection:
    if core.store.get_partner("acme") is None:
        core.add_partner("acme")
    return core.issue_partner_token("acme", "fleet", scopes)


# -- authenticate -----------------------------------------------------------------------------


def test_a_paired_token_authenticates(store: Store) -> None:
    core = make_core(store)
    issued = pair(core)
    caller = core.authenticate(issued.token)
    assert caller == Caller(
        issued.connection.id, Owner(OwnerKind.USER, "alice"), issued.connection.scopes
    )


def test_a_partner_token_authenticates_with_its_scopes(store: Store) -> None:
    core = make_core(store)
    issued = partner_token(core, frozenset({Scope.AQ_READ}))
    caller = core.authenticate(issued.token)
    assert caller.owner == Owner(OwnerKind.PARTNER, "acme")
    assert caller.scopes == frozenset({Scope.AQ_READ})


def test_only_the_token_hash_is_stored(store: Store) -> None:
    core = make_core(store)
    issued = pair(core)
    stored = store.connections_of(Owner(OwnerKind.USER, "alice"))[0]
    assert stored.token_hash != issued.token
    assert issued.token not in stored.token_hash
    assert issued.token not in repr(issued)
    assert issued.token not in repr(stored)


def test_unknown_token(store: Store) -> None:
    core = make_core(store)
    pair(core)
    with pytest.raises(NotAuthenticated):
        core.authenticate(issue_token(Environment.TEST))


def test_revoked_token(store: Store) -> None:
    core = make_core(store)
    issued = pair(core)
    other = pair(core)
    core.revoke_connection(issued.connection.id)
    with pytest.raises(NotAuthenticated):
        core.authenticate(issued.token)
    core.authenticate(other.token)  # only the revoked connection is affected
    with pytest.raises(OperatorError):
        core.revoke_connection(issued.connection.id)


def test_token_of_another_environment(store: Store) -> None:
    production = make_core(store, Environment.PRODUCTION)
    test = make_core(store, Environment.TEST)
    from_production = partner_token(production)
    assert from_production.token.startswith("ca_pdn_")
    production.authenticate(from_production.token)
    with pytest.raises(NotAuthenticated):
        test.authenticate(from_production.token)
    # Relabelling the environment does not help either: the hash no longer matches.
    relabelled = from_production.token.replace("ca_pdn_", "ca_tst_", 1)
    with pytest.raises(NotAuthenticated):
        test.authenticate(relabelled)


@pytest.mark.parametrize(
    "mangle",
    [
        lambda t: "",
        lambda t: t[:-1],
        lambda t: t + "A",
        lambda t: t + "\n",
        lambda t: " " + t,
        lambda t: "Bearer " + t,
        lambda t: t.upper(),
        lambda t: t.replace("ca_", "cb_", 1),
        lambda t: t.split("_", 2)[2],
    ],
)
def test_malformed_tokens(store: Store, mangle: Callable[[str], str]) -> None:
    core = make_core(store)
    token = pair(core).token
    core.authenticate(token)
    with pytest.raises(NotAuthenticated):
        core.authenticate(mangle(token))


def test_deactivated_partner_tokens(store: Store) -> None:
    core = make_core(store)
    issued = partner_token(core)
    core.authenticate(issued.token)
    core.deactivate_partner("acme")
    with pytest.raises(NotAuthenticated):
        core.authenticate(issued.token)
    with pytest.raises(OperatorError):
        core.issue_partner_token("acme", "another", {Scope.AQ_READ})
    store.set_partner_active("acme", True)
    core.authenticate(issued.token)


def test_lapsed_user_still_authenticates_but_is_not_premium(store: Store) -> None:
    core = make_core(store)
    issued = pair(core)
    core.set_premium("alice", False)
    caller = core.authenticate(issued.token)  # the 403, not a 401, is the answer
    with pytest.raises(NotPremium):
        require_premium(caller, core.store)


class LooseIndex:
    """A connection store whose lookup ignores the hash it is asked for."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection

    def add_connection(self, connection: Connection) -> None:
        raise NotImplementedError

    def connection_by_token_hash(self, token_hash: str) -> Connection | None:
        return self.connection

    def connections_of(self, owner: Owner) -> list[Connection]:
        return [self.connection]

    def revoke_connection(self, connection_id: uuid.UUID, at: datetime) -> bool:
        return False


def test_a_lookup_returning_another_connection_does_not_authenticate() -> None:
    token, other_token = issue_token(Environment.TEST), issue_token(Environment.TEST)
    connection = Connection(
        uuid.uuid4(),
        Owner(OwnerKind.USER, "alice"),
        "phone",
        USER_SCOPES,
        KEYS.hash_token(token),
        NOW,
    )
    index = LooseIndex(connection)
    accounts = MemoryStore()
    found = authenticate(
        token, environment=Environment.TEST, keys=KEYS, connections=index, accounts=accounts
    )
    assert found.connection_id == connection.id
    with pytest.raises(NotAuthenticated):
        authenticate(
            other_token,
            environment=Environment.TEST,
            keys=KEYS,
            connections=index,
            accounts=accounts,
        )


# -- checks on the caller ---------------------------------------------------------------------


def test_require_premium(store: Store) -> None:
    core = make_core(store)
    user = core.authenticate(pair(core).token)
    partner = core.authenticate(partner_token(core).token)

    require_premium(user, core.store)
    require_premium(partner, core.store)  # an active partner is entitled

    core.set_premium("alice", False)
    with pytest.raises(NotPremium):
        require_premium(user, core.store)
    require_premium(partner, core.store)

    core.set_premium("alice", True)  # re-checked on every call
    require_premium(user, core.store)


def test_require_premium_of_a_vanished_user(store: Store) -> None:
    ghost = Caller(uuid.uuid4(), Owner(OwnerKind.USER, "ghost"), USER_SCOPES)
    with pytest.raises(NotPremium):
        require_premium(ghost, store)


def test_require_scope() -> None:
    caller = Caller(uuid.uuid4(), Owner(OwnerKind.PARTNER, "acme"), frozenset({Scope.AQ_READ}))
    caller.require_scope(Scope.AQ_READ)
    for missing in (Scope.AQ_ROUTES, Scope.ROUTES_PLAN):
        with pytest.raises(MissingScope) as raised:
            caller.require_scope(missing)
        assert raised.value.scope == missing.value
        assert missing.value in raised.value.detail


def test_no_scope_at_all() -> None:
    caller = Caller(uuid.uuid4(), Owner(OwnerKind.USER, "alice"), frozenset())
    for scope in Scope:
        with pytest.raises(MissingScope):
            caller.require_scope(scope)


def test_require_user_owned(store: Store) -> None:
    core = make_core(store)
    user = core.authenticate(pair(core).token)
    partner = core.authenticate(partner_token(core).token)
    user.require_user_owned()
    with pytest.raises(PartnerConnectionRefused):
        partner.require_user_owned()


def test_refusals_are_forbidden_not_unauthenticated() -> None:
    assert issubclass(MissingScope, Forbidden)
    assert issubclass(NotPremium, Forbidden)
    assert issubclass(PartnerConnectionRefused, Forbidden)
    assert not issubclass(NotAuthenticated, Forbidden)

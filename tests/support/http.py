"""Helpers for HTTP tests."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any, Protocol

from litestar.testing import TestClient
from litestar.types import ControllerRouterHandler

from cleanair_core import CleanAir
from cleanair_core.access.accounts import Owner, OwnerKind
from cleanair_core.access.connections import Connection
from cleanair_core.access.scopes import Scope
from cleanair_core.access.tokens import issue_token
from cleanair_runtime.composition.settings import Settings

#: A test client of any app: the tests call the app over HTTP and never look at its type,
#: which is a Litestar app or one behind the access log.
Client = TestClient[Any]


class MakeClient(Protocol):
    """The `make_client` fixture: a started client of the test core's app."""

    def __call__(
        self,
        settings: Settings | None = None,
        handlers: Sequence[ControllerRouterHandler] = (),
        *,
        access_log: bool = False,
    ) -> Client: ...


def pair(core: CleanAir, client: Client, user: str = "alice", name: str = "app") -> str:
    """Create `user` if needed, pair through the API and return the raw token."""
    if core.store.get_user(user) is None:
        core.add_user(user)
    code = core.create_pairing_code(user)
    response = client.post("/v1/connections/token", json={"code": code, "name": name})
    assert response.status_code == 201, response.text
    token: str = response.json()["token"]
    return token


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def user_token(core: CleanAir, user: str, scopes: Sequence[Scope]) -> str:
    """A user-owned connection with chosen scopes (pairing always grants all three)."""
    if core.store.get_user(user) is None:
        core.add_user(user)
    raw = issue_token(core.policy.environment)
    core.store.add_connection(
        Connection(
            id=uuid.uuid4(),
            owner=Owner(OwnerKind.USER, user),
            name="limited",
            scopes=frozenset(scopes),
            token_hash=core.keys.hash_token(raw),
            created_at=core.clock.now(),
        )
    )
    return raw


def partner_token(core: CleanAir, scopes: Sequence[Scope]) -> str:
    if core.store.get_partner("acme") is None:
        core.add_partner("acme")
    return core.issue_partner_token("acme", "integration", list(scopes)).token

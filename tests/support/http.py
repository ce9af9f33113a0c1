"""Helpers for HTTP tests."""

from __future__ import annotations

from collections.abc import Callable

from litestar.testing import TestClient

from cleanair_core import CleanAir

MakeClient = Callable[..., TestClient]  # type: ignore[type-arg]


def pair(core: CleanAir, client: TestClient, user: str = "alice", name: str = "app") -> str:  # type: ignore[type-arg]
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

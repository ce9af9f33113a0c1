"""The guards and error mapping that every later endpoint reuses, on test-only routes."""

from __future__ import annotations

from typing import Any

import pytest
from litestar import Request, get, post
from litestar.params import JSONBody

from cleanair_core import Billable, CleanAir, ManualClock, Scope
from cleanair_core.errors import SourceUnavailable
from cleanair_http.auth import caller_of, core_of, requires
from support.http import Client, MakeClient, bearer, pair


@post("/test/charge", opt=requires(Scope.AQ_READ))
async def charge_handler(
    request: Request[Any, Any, Any], data: JSONBody[dict[str, object]]
) -> dict[str, int]:
    core = core_of(request)
    async with core.charge(caller_of(request), Billable.FORECAST):
        if data.get("fail"):
            raise SourceUnavailable()
    return {"ok": 1}


@post("/test/plan", opt=requires(Scope.ROUTES_PLAN, user_owned=True))
async def plan_handler() -> dict[str, int]:
    return {"ok": 1}


@get("/test/unguarded")
async def unguarded(request: Request) -> dict[str, str]:  # type: ignore[type-arg]
    return {"caller": str(caller_of(request).connection_id)}


@get("/test/heedless")
async def heedless() -> dict[str, str]:
    """An extra route that never looks at its caller."""
    return {"ran": "yes"}


@get("/test/boom", exclude_from_auth=True)
async def boom() -> None:
    raise RuntimeError("secret detail that must not leak")


@pytest.fixture
def guarded(make_client: MakeClient) -> Client:
    return make_client(handlers=[charge_handler, plan_handler, boom, unguarded, heedless])


def test_a_route_without_a_guard_of_its_own_still_needs_a_valid_token(
    core: CleanAir, guarded: Client
) -> None:
    """The bearer middleware checks the token before any route runs (an embedder's extra
    route, say), so a well-formed but unknown token never gets through."""
    token = pair(core, guarded)
    unknown = "ca_tst_" + "x" * 43
    assert guarded.get("/test/unguarded", headers=bearer(unknown)).status_code == 401
    assert guarded.get("/test/heedless", headers=bearer(unknown)).status_code == 401
    response = guarded.get("/test/unguarded", headers=bearer(token))
    assert response.status_code == 200
    [connection] = core.connections_of_user("alice")
    assert response.json() == {"caller": str(connection.id)}


def test_missing_scope_is_403(core: CleanAir, guarded: Client) -> None:
    core.add_partner("acme")
    token = core.issue_partner_token("acme", "x", [Scope.AQ_ROUTES]).token
    response = guarded.post("/test/charge", json={}, headers=bearer(token))
    assert response.status_code == 403
    assert response.json() == {"detail": "Token lacks the required scope aq:read"}


def test_lapsed_premium_is_403_on_the_next_call(core: CleanAir, guarded: Client) -> None:
    token = pair(core, guarded)
    assert guarded.post("/test/charge", json={}, headers=bearer(token)).status_code == 201
    core.set_premium("alice", False)
    response = guarded.post("/test/charge", json={}, headers=bearer(token))
    assert response.status_code == 403
    assert "premium" in response.json()["detail"]


def test_partner_connections_are_refused_where_user_owned_is_required(
    core: CleanAir, guarded: Client
) -> None:
    core.add_partner("acme")
    token = core.issue_partner_token("acme", "x", [Scope.ROUTES_PLAN]).token
    response = guarded.post("/test/plan", headers=bearer(token))
    assert response.status_code == 403
    user_token = pair(core, guarded)
    assert guarded.post("/test/plan", headers=bearer(user_token)).status_code == 201


def test_a_503_is_refunded(core: CleanAir, guarded: Client) -> None:
    token = pair(core, guarded)
    response = guarded.post("/test/charge", json={"fail": True}, headers=bearer(token))
    assert response.status_code == 503
    assert response.json() == {"detail": "A dependent service is unavailable"}
    assert guarded.get("/v1/quota", headers=bearer(token)).json()["used"] == 0


def test_validation_failure_is_not_charged(core: CleanAir, guarded: Client) -> None:
    token = pair(core, guarded)
    response = guarded.post("/test/charge", content=b"{", headers=bearer(token))
    assert response.status_code == 422
    assert guarded.get("/v1/quota", headers=bearer(token)).json()["used"] == 0


def test_credit_exhaustion_is_429_with_retry_after_to_the_blocking_window(
    core: CleanAir, guarded: Client, clock: ManualClock
) -> None:
    clock.set(clock.now().replace(hour=23, minute=59, second=0, microsecond=0))
    token = pair(core, guarded)
    for _ in range(50):  # 50 forecasts of 2 credits fill the daily cap of 100
        assert guarded.post("/test/charge", json={}, headers=bearer(token)).status_code == 201
    response = guarded.post("/test/charge", json={}, headers=bearer(token))
    assert response.status_code == 429
    assert response.headers["retry-after"] == "60"
    assert response.json() == {"detail": "Daily burst cap exhausted"}


def test_unhandled_errors_are_plain_text_500(guarded: Client) -> None:
    response = guarded.get("/test/boom")
    assert response.status_code == 500
    assert response.text == "Internal Server Error"
    assert response.headers["content-type"].startswith("text/plain")


def test_unknown_routes_use_the_envelope(client: Client) -> None:
    response = client.get("/v1/nothing-here")
    assert response.status_code == 404
    assert set(response.json()) == {"detail"}

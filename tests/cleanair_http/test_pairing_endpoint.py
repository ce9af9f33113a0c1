"""POST /v1/connections/token: 201, 401, 422 and 429 (contract 4.1)."""

from __future__ import annotations

import re
import uuid

import pytest
from litestar.testing import TestClient

from cleanair_core import CleanAir, Environment, ManualClock, Policy, TokenKeys, generate_key
from cleanair_http.app import create_app
from cleanair_http.offloading import in_thread
from cleanair_runtime.composition.settings import Settings
from cleanair_storage.postgres import PostgresStore
from support.http import Client, MakeClient, bearer, pair

URL = "/v1/connections/token"


def test_redeeming_a_code_returns_the_connection_once(core: CleanAir, client: Client) -> None:
    core.add_user("alice")
    code = core.create_pairing_code("alice")

    response = client.post(URL, json={"code": code, "name": "Kitchen display"})

    assert response.status_code == 201
    body = response.json()
    assert set(body) == {"connection_id", "name", "scopes", "token"}
    assert uuid.UUID(body["connection_id"])
    assert body["name"] == "Kitchen display"
    assert sorted(body["scopes"]) == ["aq:read", "aq:routes", "routes:plan"]
    assert re.fullmatch(r"ca_tst_[A-Za-z0-9_-]{43}", body["token"])
    assert response.headers["cache-control"] == "no-store"
    # The token works, and only its keyed hash was stored.
    assert client.get("/v1/quota", headers=bearer(body["token"])).status_code == 200
    (connection,) = core.connections_of_user("alice")
    assert connection.token_hash == core.keys.hash_token(body["token"])
    assert body["token"] not in repr(connection)


def test_a_code_is_single_use(core: CleanAir, client: Client) -> None:
    core.add_user("alice")
    code = core.create_pairing_code("alice")
    assert client.post(URL, json={"code": code, "name": "a"}).status_code == 201
    second = client.post(URL, json={"code": code, "name": "b"})
    assert second.status_code == 401
    assert second.json() == {"detail": "Invalid or expired pairing code"}


def test_unknown_expired_and_lapsed_codes_are_one_indistinguishable_401(
    core: CleanAir, client: Client, clock: ManualClock
) -> None:
    core.add_user("alice")
    core.add_user("bob")
    expired = core.create_pairing_code("alice")
    clock.advance(60)
    lapsed = core.create_pairing_code("bob")
    core.set_premium("bob", False)
    unknown = next(f"{n:06d}" for n in range(10**6) if f"{n:06d}" not in {expired, lapsed})

    answers = [client.post(URL, json={"code": c, "name": "x"}) for c in (unknown, expired, lapsed)]

    assert {r.status_code for r in answers} == {401}
    assert len({r.text for r in answers}) == 1
    assert len({tuple(sorted(r.headers.keys())) for r in answers}) == 1


def test_a_code_still_redeems_just_before_sixty_seconds(
    core: CleanAir, client: Client, clock: ManualClock
) -> None:
    core.add_user("alice")
    code = core.create_pairing_code("alice")
    clock.advance(59.9)
    assert client.post(URL, json={"code": code, "name": "x"}).status_code == 201


@pytest.mark.parametrize(
    "body",
    [
        {"code": "12345", "name": "x"},
        {"code": "1234567", "name": "x"},
        {"code": "12a456", "name": "x"},
        {"code": "١٢٣٤٥٦", "name": "x"},  # Arabic-Indic digits are not ASCII digits
        {"code": "12345\n", "name": "x"},
        {"code": 123456, "name": "x"},
        {"code": "123456", "name": ""},
        {"code": "123456", "name": "n" * 101},
        {"code": "123456"},
        {"name": "x"},
        [],
    ],
)
def test_invalid_bodies_are_422_with_the_fixed_text(client: Client, body: object) -> None:
    response = client.post(URL, json=body)
    assert response.status_code == 422
    assert response.json() == {"detail": "Request validation failed"}


def test_malformed_json_is_422_and_never_echoed(client: Client) -> None:
    secret_input = '{"code": "SECRET-INPUT-42", "name": '
    response = client.post(URL, content=secret_input, headers={"content-type": "application/json"})
    assert response.status_code == 422
    assert response.json() == {"detail": "Request validation failed"}
    assert "SECRET" not in response.text


def test_a_100_character_name_is_accepted(core: CleanAir, client: Client) -> None:
    core.add_user("alice")
    code = core.create_pairing_code("alice")
    response = client.post(URL, json={"code": code, "name": "é" * 100})
    assert response.status_code == 201


def test_attempts_per_address_are_limited_with_retry_after(
    core: CleanAir, client: Client, clock: ManualClock
) -> None:
    limit = core.policy.pairing_attempts_per_minute
    clock.set(clock.now().replace(second=15, microsecond=0))
    for _ in range(limit):
        assert client.post(URL, json={"code": "000000", "name": "x"}).status_code == 401
    limited = client.post(URL, json={"code": "000000", "name": "x"})
    assert limited.status_code == 429
    assert limited.headers["retry-after"] == "45"
    assert limited.json()["detail"]

    # Even a valid code waits for the window: the limit counts attempts, not failures.
    core.add_user("alice")
    code = core.create_pairing_code("alice")
    assert client.post(URL, json={"code": code, "name": "x"}).status_code == 429
    clock.advance(45)
    assert client.post(URL, json={"code": code, "name": "x"}).status_code == 201


def test_the_global_guess_budget_blocks_every_address_for_a_minute(
    core: CleanAir, clock: ManualClock
) -> None:
    policy = Policy(pairing_guess_budget=3)
    codes = iter([424242, 535353])  # the user's codes, none of the guesses
    tight = CleanAir(core.store, core.keys, policy, clock, randbelow=lambda _: next(codes))
    with TestClient(create_app(tight)) as client:
        for guess in ["000000", "000001", "000002"]:
            assert client.post(URL, json={"code": guess, "name": "x"}).status_code == 401
        # A retry of a code already tried is answered, whatever the budget.
        assert client.post(URL, json={"code": "000001", "name": "x"}).status_code == 401
        tight.add_user("alice")
        code = tight.create_pairing_code("alice")
        blocked = client.post(URL, json={"code": code, "name": "x"})
        assert blocked.status_code == 429
        assert blocked.headers["retry-after"] == "60"
        clock.advance(60)
        fresh = tight.create_pairing_code("alice")
        assert client.post(URL, json={"code": fresh, "name": "x"}).status_code == 201


def test_forwarded_for_counts_only_behind_a_trusted_proxy(
    core: CleanAir, make_client: MakeClient, clock: ManualClock
) -> None:
    clock.set(clock.now().replace(second=0, microsecond=0))
    limit = core.policy.pairing_attempts_per_minute
    untrusted = make_client(Settings())
    # Without trust, a spoofed header does not give a fresh allowance.
    for i in range(limit):
        untrusted.post(
            URL, json={"code": "000000", "name": "x"}, headers={"x-forwarded-for": f"10.0.0.{i}"}
        )
    spoofed = untrusted.post(
        URL, json={"code": "000000", "name": "x"}, headers={"x-forwarded-for": "10.9.9.9"}
    )
    assert spoofed.status_code == 429


def test_tokens_from_another_environment_are_refused(core: CleanAir, client: Client) -> None:
    production = CleanAir(core.store, core.keys, Policy(environment=Environment.PRODUCTION))
    production.add_user("alice")
    issued = production.redeem_pairing_code(production.create_pairing_code("alice"), "x", "1.2.3.4")
    assert issued.token.startswith("ca_pdn_")
    assert client.get("/v1/quota", headers=bearer(issued.token)).status_code == 401


def test_pair_helper_gives_working_tokens(core: CleanAir, client: Client) -> None:
    token = pair(core, client)
    assert client.get("/v1/quota", headers=bearer(token)).status_code == 200


def test_on_postgres_a_nul_in_the_name_is_a_422_and_leaves_the_code(postgres_url: str) -> None:
    """PostgreSQL's text cannot hold U+0000: such a name was a 500 there, its code spent.
    Now it is the same 422 on every store, refused before the code is tried."""
    store = PostgresStore(postgres_url)
    core = CleanAir(store, TokenKeys(generate_key()), Policy(), offload=in_thread)
    try:
        core.add_user("alice")
        code = core.create_pairing_code("alice")
        with TestClient(create_app(core, Settings(plan_workers=0))) as client:
            refused = client.post(URL, json={"code": code, "name": "a\u0000b"})
            escape = client.post(URL, json={"code": code, "name": "\u001b[2J"})
            paired = client.post(URL, json={"code": code, "name": "phone"})
    finally:
        store.close()

    assert (refused.status_code, refused.json()) == (422, {"detail": "Request validation failed"})
    assert (escape.status_code, escape.json()) == (422, {"detail": "Request validation failed"})
    assert paired.status_code == 201
    assert paired.json()["name"] == "phone"

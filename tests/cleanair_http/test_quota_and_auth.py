"""GET /v1/quota (200, 401, 429) and bearer parsing (contract 4.7 and 5)."""

from __future__ import annotations

import pytest
from litestar.testing import TestClient

from cleanair_core import Billable, CleanAir, ManualClock, Policy, Scope
from cleanair_core.credits.ledger import CreditLimits
from cleanair_http.app import create_app
from support.http import Client, MakeClient, bearer, pair

QUOTA = "/v1/quota"


def test_quota_reports_the_shared_pool(core: CleanAir, client: Client) -> None:
    first = pair(core, client, name="phone")
    second = pair(core, client, name="watch")
    for token, billable in ((first, Billable.SCORE), (second, Billable.FORECAST)):
        with core.charge(core.authenticate(token), billable):
            pass

    response = client.get(QUOTA, headers=bearer(second))

    assert response.status_code == 200
    assert response.json() == {
        "used": 3,
        "limit": 1000,
        "remaining": 997,
        "daily_used": 3,
        "daily_limit": 100,
        "daily_remaining": 97,
    }


def test_daily_usage_resets_at_midnight_utc_but_monthly_does_not(
    core: CleanAir, client: Client, clock: ManualClock
) -> None:
    token = pair(core, client)
    with core.charge(core.authenticate(token), Billable.ROUTE_PLAN):
        pass
    clock.advance(days=1)
    body = client.get(QUOTA, headers=bearer(token)).json()
    assert (body["used"], body["daily_used"]) == (25, 0)


def test_quota_is_not_premium_gated(core: CleanAir, client: Client) -> None:
    token = pair(core, client)
    core.set_premium("alice", False)
    assert client.get(QUOTA, headers=bearer(token)).status_code == 200


def test_partner_tokens_read_their_own_pool(core: CleanAir, client: Client) -> None:
    core.add_partner("acme")
    token = core.issue_partner_token("acme", "integration", [Scope.AQ_READ]).token
    response = client.get(QUOTA, headers=bearer(token))
    assert response.status_code == 200
    assert response.json()["used"] == 0


@pytest.mark.parametrize(
    "header",
    [
        None,
        "",
        "Bearer",
        "Bearer ",
        "Basic dXNlcjpwYXNz",
        "Bearer not-a-token",
        "Bearer ca_tst_short",
        "Bearer ca_tst_" + "A" * 43,  # well formed, unknown
        "Bearer xx_tst_" + "A" * 43,
    ],
)
def test_missing_malformed_and_unknown_tokens_are_401(client: Client, header: str | None) -> None:
    headers = {} if header is None else {"Authorization": header}
    response = client.get(QUOTA, headers=headers)
    assert response.status_code == 401
    assert response.json() == {"detail": "Invalid or missing bearer token"}
    assert response.headers["www-authenticate"].startswith("Bearer")


def test_revocation_takes_effect_on_the_next_request(core: CleanAir, client: Client) -> None:
    token = pair(core, client)
    assert client.get(QUOTA, headers=bearer(token)).status_code == 200
    (connection,) = core.connections_of_user("alice")
    core.revoke_connection(connection.id)
    assert client.get(QUOTA, headers=bearer(token)).status_code == 401


def test_partner_deactivation_takes_effect_at_once(core: CleanAir, client: Client) -> None:
    core.add_partner("acme")
    token = core.issue_partner_token("acme", "integration", [Scope.AQ_READ]).token
    assert client.get(QUOTA, headers=bearer(token)).status_code == 200
    core.deactivate_partner("acme")
    assert client.get(QUOTA, headers=bearer(token)).status_code == 401


def test_the_bearer_scheme_is_case_insensitive(core: CleanAir, client: Client) -> None:
    token = pair(core, client)
    assert client.get(QUOTA, headers={"Authorization": f"bearer {token}"}).status_code == 200


def test_requests_per_connection_are_rate_limited_with_retry_after(
    core: CleanAir, clock: ManualClock
) -> None:
    limited = CleanAir(core.store, core.keys, Policy(requests_per_minute=5), clock)
    clock.set(clock.now().replace(second=20, microsecond=0))
    with TestClient(create_app(limited)) as client:
        token = pair(limited, client)
        other = pair(limited, client, name="other")
        for _ in range(5):
            assert client.get(QUOTA, headers=bearer(token)).status_code == 200
        response = client.get(QUOTA, headers=bearer(token))
        assert response.status_code == 429
        assert response.headers["retry-after"] == "40"
        assert response.json() == {"detail": "Rate limit exceeded"}
        # The limit is per connection, and a new window starts on the minute.
        assert client.get(QUOTA, headers=bearer(other)).status_code == 200
        clock.advance(40)
        assert client.get(QUOTA, headers=bearer(token)).status_code == 200


def test_quota_is_never_a_credit_matter(core: CleanAir, make_client: MakeClient) -> None:
    exhausted = CleanAir(core.store, core.keys, Policy(credits=CreditLimits(5, 5)), core.clock)
    with TestClient(create_app(exhausted)) as client:
        token = pair(exhausted, client)
        with exhausted.charge(exhausted.authenticate(token), Billable.SCORE, units=1):
            pass
        for _ in range(2):
            with exhausted.charge(exhausted.authenticate(token), Billable.FORECAST):
                pass
        body = client.get(QUOTA, headers=bearer(token)).json()
        assert (body["remaining"], body["daily_remaining"]) == (0, 0)
        assert client.get(QUOTA, headers=bearer(token)).status_code == 200

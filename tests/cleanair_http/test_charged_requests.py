"""Charged routes whose air is local: admitted on one read, the rate-limit hit counted with
the charge, or (when the call ends without one) once the response is done."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from cleanair_core import CleanAir, ManualClock, Policy, Scope, TokenKeys, generate_key
from cleanair_core.credits.ledger import CreditLimits
from cleanair_core.ports import Sources
from cleanair_http.offloading import here_or_in_thread, in_thread
from cleanair_storage.sqlite import SqliteStore
from support.fakes import HELSINKI, FakeGeolocator, FakeIp, FakeNamer, FakeSource
from support.http import Client, bearer, pair

SCORE = "/v1/airquality/score"
BODY = {"lat": HELSINKI.lat, "lon": HELSINKI.lon}
PER_MINUTE = 2


@pytest.fixture
def sources() -> Sources:
    return Sources(
        FakeSource(), FakeGeolocator(None), FakeIp(), FakeNamer(), local_air=True, local_wifi=True
    )


@pytest.fixture
def core(tmp_path: Path, clock: ManualClock, sources: Sources) -> Iterator[CleanAir]:
    store = SqliteStore(tmp_path / "cleanair.db")
    policy = Policy(requests_per_minute=PER_MINUTE, credits=CreditLimits(monthly=1000, daily=3))
    yield CleanAir(
        store,
        TokenKeys(generate_key()),
        policy,
        clock,
        sources=sources,
        offload=in_thread,
        store_calls=here_or_in_thread,
    )
    store.close()


def test_a_score_is_charged_once_answered_with_no_hold(core: CleanAir, client: Client) -> None:
    token = pair(core, client)
    response = client.post(SCORE, json=BODY, headers=bearer(token))
    assert response.status_code == 200
    entries = core.store.entries("user:alice")
    assert [e.amount for e in entries] == [1]
    assert core.sweep_charge_holds() == 0
    assert core.store.sweep_holds(core.clock.now().replace(year=2100), "lost") == 0


def test_a_body_failing_validation_counts_against_the_rate_limit(
    core: CleanAir, client: Client
) -> None:
    token = pair(core, client)
    for _ in range(PER_MINUTE):
        assert client.post(SCORE, json={"lat": 91}, headers=bearer(token)).status_code == 422
    refused = client.post(SCORE, json=BODY, headers=bearer(token))
    assert refused.status_code == 429
    assert "Retry-After" in refused.headers
    assert core.store.entries("user:alice") == []  # nothing charged for any of them


def test_a_refused_scope_counts_against_the_rate_limit(core: CleanAir, client: Client) -> None:
    core.add_partner("acme")
    token = core.issue_partner_token("acme", "backend", [Scope.AQ_ROUTES]).token
    for _ in range(PER_MINUTE):
        assert client.post(SCORE, json=BODY, headers=bearer(token)).status_code == 403
    assert client.post(SCORE, json=BODY, headers=bearer(token)).status_code == 429


def test_a_spent_pool_answers_429_and_charges_nothing(
    core: CleanAir, client: Client, clock: ManualClock
) -> None:
    token = pair(core, client)
    for _ in range(3):  # the daily cap, a minute apart to stay inside the rate limit
        assert client.post(SCORE, json=BODY, headers=bearer(token)).status_code == 200
        clock.advance(minutes=1)
    refused = client.post(SCORE, json=BODY, headers=bearer(token))
    assert refused.status_code == 429
    assert refused.json() == {"detail": "Daily burst cap exhausted"}
    assert len(core.store.entries("user:alice")) == 3

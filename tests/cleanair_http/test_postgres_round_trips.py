"""What a charged score costs PostgreSQL, counted at the protocol (libpq's trace), so the
count cannot grow unnoticed: two statements in two round trips, its admission read and its
final charge (the rate-limit hit and the debit in one), each answered on the event loop."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from litestar.testing import TestClient

from cleanair_core import CleanAir, ManualClock, Policy, TokenKeys, generate_key
from cleanair_core.ports import Sources
from cleanair_http.app import create_app
from cleanair_http.offloading import in_thread
from cleanair_runtime.composition.settings import Settings
from cleanair_storage.postgres import PostgresStore
from cleanair_storage.postgres.requests import PostgresRequests
from support.fakes import FakeGeolocator, FakeIp, FakeNamer, FakeSource
from support.http import bearer, pair
from support.pg_trace import traced

T = TypeVar("T")
SCORE = {"lat": 60.17, "lon": 24.94}
#: Scores before counting: psycopg prepares a statement on its fifth run on a connection,
#: one round trip of its own; counted scores run prepared statements.
WARM_UP = 6


class Handed:
    """The deployment's offload for one-step store calls, counting them: a store call off the
    request path's own would be a third statement, sent from a thread."""

    def __init__(self) -> None:
        self.calls = 0

    async def __call__(self, work: Callable[[], T], /) -> T:
        self.calls += 1
        return await in_thread(work)


def test_a_charged_score_is_two_statements_in_two_round_trips(postgres_url: str) -> None:
    store = PostgresStore(postgres_url)
    requests = PostgresRequests(store, in_thread)
    sources = Sources(FakeSource(), FakeGeolocator(None), FakeIp(), FakeNamer(), local_air=True)
    handed = Handed()

    core = CleanAir(
        store,
        TokenKeys(generate_key()),
        Policy(charge_hold_seconds=3600),
        ManualClock(),
        sources=sources,
        offload=in_thread,
        store_calls=handed,
        requests=requests,
    )
    try:
        with TestClient(create_app(core, Settings(plan_workers=0))) as client:
            token = pair(core, client)

            def score() -> None:
                answer = client.post("/v1/airquality/score", json=SCORE, headers=bearer(token))
                assert answer.status_code == 200, answer.text

            for _ in range(WARM_UP):
                score()
            handed.calls = 0
            with traced(requests) as sent:
                for _ in range(5):
                    score()
        assert handed.calls == 0
        assert (sent.statements, sent.round_trips) == (10, 10), sent.messages
        assert len(store.entries("user:alice")) == WARM_UP + 5
    finally:
        requests.close()
        store.close()

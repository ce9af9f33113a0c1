"""End to end on PostgreSQL: two `cleanair serve` processes and `cleanair worker`s, one database.

The servers plan nothing (`CLEANAIR_PLAN_WORKERS=0`): a separate worker process does. 160
concurrent score calls of one user spread over both servers get exactly the daily cap of
100; plans submitted to either server are completed by the worker; a worker killed with
SIGKILL mid-plan leaves the plan to a second worker, and a worker stopped with SIGTERM
mid-plan hands its plan back at once.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from support.fake_open_meteo import FakeOpenMeteo
from support.postgres import PostgresServer
from support.servers import pair, running_server, server_env, worker_process

pytestmark = pytest.mark.e2e

DAILY_CAP = 100
CALLS = 160
LEASE_SECONDS = 3
WALK = {
    "start": {"latitude": 60.1699, "longitude": 24.9384},
    "end": {"latitude": 60.1645, "longitude": 24.9525},
    "activity_type": "walking",
}


def shared_env(tmp_path: Path, database: str, **settings: str) -> dict[str, str]:
    key = tmp_path / "shared.key"
    key.write_text("c0ffee" * 11 + "\n")
    return server_env(
        tmp_path,
        CLEANAIR_DATABASE=database,
        CLEANAIR_SECRET_KEY_FILE=str(key),
        CLEANAIR_DAILY_CREDITS=str(DAILY_CAP),
        CLEANAIR_RATE_LIMIT_PER_MINUTE="10000",
        CLEANAIR_PLAN_WORKERS="0",
        CLEANAIR_DEFAULT_NETWORK="true",
        CLEANAIR_PLAN_LEASE_SECONDS=str(LEASE_SECONDS),
        CLEANAIR_PLAN_WORKER_IDLE_SECONDS="0.2",
        **settings,
    )


#: Seconds between plan polls: the contract allows a connection 60 polls a minute, so a test
#: polling faster fails with 429 whenever a loaded machine makes a plan take over 6 s.
POLL_EVERY = 1.0


def wait_for(check: Any, what: str, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (found := check()):
        assert time.monotonic() < deadline, f"{what}: not within {timeout} s"
        time.sleep(POLL_EVERY)
    return found


def poll(base: str, headers: Mapping[str, str], request_id: str) -> dict[str, Any]:
    polled = httpx.get(f"{base}/v1/routes/{request_id}", headers=dict(headers), timeout=10)
    assert polled.status_code == 200, polled.text
    body: dict[str, Any] = polled.json()
    return body


def submit(base: str, headers: Mapping[str, str]) -> str:
    submitted = httpx.post(f"{base}/v1/routes", json=WALK, headers=dict(headers), timeout=10)
    assert submitted.status_code == 202, submitted.text
    request_id: str = submitted.json()["request_id"]
    return request_id


async def score_calls(bases: list[str], headers: Mapping[str, str]) -> list[int]:
    async with httpx.AsyncClient(timeout=60) as client:

        async def one(index: int) -> int:
            answer = await client.post(
                f"{bases[index % len(bases)]}/v1/airquality/score",
                json={"lat": 60.17, "lon": 24.94},
                headers=dict(headers),
            )
            return answer.status_code

        return list(await asyncio.gather(*(one(i) for i in range(CALLS))))


def test_two_servers_and_workers_share_one_postgresql_database(
    tmp_path: Path, postgres: PostgresServer
) -> None:
    env = shared_env(tmp_path, postgres.database())
    with (
        running_server(env, tmp_path / "first.log") as first,
        running_server(env, tmp_path / "second.log") as second,
    ):
        headers = pair(env, first.base)
        statuses = asyncio.run(score_calls([first.base, second.base], headers))
        assert statuses.count(200) == DAILY_CAP
        assert set(statuses) == {200, 429}

        # Plans (of another user: alice's day is spent) go to either server; only the
        # worker plans them.
        headers = pair(env, second.base, user="bob")
        plans = [submit(first.base, headers), submit(second.base, headers)]
        assert {poll(first.base, headers, p)["status"] for p in plans} == {"pending"}
        with worker_process(env, tmp_path / "worker.log"):
            for request_id in plans:
                done = wait_for(
                    lambda r=request_id: poll(second.base, headers, r)["status"] != "pending",
                    "a plan completed by the worker",
                )
                assert done
                assert poll(first.base, headers, request_id)["status"] == "completed"


def test_a_killed_workers_plan_is_finished_by_another_and_a_stopped_one_hands_back(
    tmp_path: Path, postgres: PostgresServer
) -> None:
    with FakeOpenMeteo().running() as upstream:
        env = shared_env(
            tmp_path,
            postgres.database(),
            CLEANAIR_AIR_QUALITY_SOURCE="open-meteo",
            CLEANAIR_OPEN_METEO_URL=upstream.url,
            CLEANAIR_OPEN_METEO_TIMEOUT="60",
        )
        with running_server(env, tmp_path / "server.log") as server:
            headers = pair(env, server.base)
            upstream.hold()  # planning waits on the air: the worker is caught mid-plan
            killed_plan = submit(server.base, headers)
            with worker_process(env, tmp_path / "killed.log") as doomed:
                assert upstream.waiting.acquire(timeout=60)
                doomed.send_signal(signal.SIGKILL)
                doomed.wait(timeout=30)
            upstream.release()
            with worker_process(env, tmp_path / "second.log"):
                wait_for(
                    lambda: poll(server.base, headers, killed_plan)["status"] == "completed",
                    "the killed worker's plan, finished by the next after its lease",
                )

            upstream.hold()
            stopped_plan = submit(server.base, headers)
            with worker_process(env, tmp_path / "stopped.log") as stopping:
                assert upstream.waiting.acquire(timeout=60)
                stopping.send_signal(signal.SIGTERM)
                assert stopping.wait(timeout=30) == 0
            upstream.release()
            assert "handed a plan back" in (tmp_path / "stopped.log").read_text()
            with psycopg.connect(env["CLEANAIR_DATABASE"]) as conn:
                row = conn.execute(
                    "SELECT status, lease_until, attempts FROM plans WHERE id = %s",
                    (stopped_plan,),
                ).fetchone()
            # Free for the next worker at once, the interrupted attempt not counted.
            assert row == ("pending", None, 0)
            with worker_process(env, tmp_path / "after.log"):
                wait_for(
                    lambda: poll(server.base, headers, stopped_plan)["status"] == "completed",
                    "the stopped worker's plan, finished by the next",
                )

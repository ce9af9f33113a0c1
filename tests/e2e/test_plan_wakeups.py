"""A plan submitted in one process wakes an idle `cleanair worker` in another at once, through
PostgreSQL LISTEN/NOTIFY, not through the worker's idle wait.

The worker's idle wait is 60 s, so only a wake-up gets the plan claimed within seconds. Issue
13 asks for a claim within 100 ms; that figure depends on the machine's load, so this test
asserts "far sooner than the idle wait" and `bench/workers.py` measures the latency itself.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import psycopg
import pytest

from cleanair_core.geo import Point
from support.plan_workers import (
    PlanSubmitter,
    wait_until_listening,
    watch_claim,
    worker_processes,
)
from support.postgres import PostgresServer
from support.servers import server_env

pytestmark = pytest.mark.e2e

KEY = "c0ffee" * 11
IDLE_SECONDS = 60
LEASE = timedelta(seconds=60)
#: Far below the idle wait, far above any wake-up on a loaded machine.
WELL_BEFORE_THE_IDLE_WAIT_S = 5.0
START, END = Point(60.1699, 24.9384), Point(60.1645, 24.9525)


def test_an_idle_worker_in_another_process_is_woken_by_a_submission(
    tmp_path: Path, postgres: PostgresServer
) -> None:
    url = postgres.database()
    env = server_env(
        tmp_path,
        CLEANAIR_DATABASE=url,
        CLEANAIR_SECRET_KEY=KEY,
        CLEANAIR_DEFAULT_NETWORK="true",
        CLEANAIR_PLAN_WORKER_IDLE_SECONDS=str(IDLE_SECONDS),
        CLEANAIR_PLAN_LEASE_SECONDS=str(int(LEASE.total_seconds())),
    )
    submitter = PlanSubmitter(url, bytes.fromhex(KEY))
    try:
        with worker_processes(env, 1, tmp_path) as workers:
            # Listening, so started: its first look for plans found none, and it now rests
            # for 60 s unless woken.
            wait_until_listening(url, 1, workers)
            plan = submitter.submit(START, END)
            with psycopg.connect(url, autocommit=True) as conn:
                claim = watch_claim(conn, plan, LEASE, timeout=2 * WELL_BEFORE_THE_IDLE_WAIT_S)
        assert claim is not None, "the plan was not claimed: the worker was not woken"
        assert claim.latency < timedelta(seconds=WELL_BEFORE_THE_IDLE_WAIT_S)
        assert "claimed a plan" in (tmp_path / "worker-0.log").read_text()
    finally:
        submitter.close()

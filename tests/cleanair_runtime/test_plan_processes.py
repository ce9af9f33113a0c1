"""What lets `cleanair serve` plan in processes of its own and stop at once: the offload that
abandons a cancelled search, the pipe that wakes the plan processes, and the app that, planning
nothing itself, wakes them for each plan submitted. (The processes themselves: tests/e2e.)"""

from __future__ import annotations

import logging
import subprocess
import threading
from datetime import timedelta
from pathlib import Path

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st
from litestar.testing import TestClient

from cleanair_core import CleanAir
from cleanair_http.app import create_app
from cleanair_http.offloading import in_abandoned_thread
from cleanair_runtime.composition.settings import Settings
from cleanair_runtime.processes.plan_processes import (
    RESTART_DELAYS_S,
    PlanProcesses,
    WakePipe,
    plans_in_processes,
    restart_delay,
)
from support.http import bearer, pair

#: Bounded waits for other threads: generous on a busy machine, never reached when it works.
WAIT_S = 30.0


def test_the_abandoning_offload_returns_the_work_result_and_raises_its_error() -> None:
    async def main() -> None:
        assert await in_abandoned_thread(lambda: threading.current_thread().daemon) is True

        def fail() -> None:
            raise ValueError("no path")

        with pytest.raises(ValueError, match="no path"):
            await in_abandoned_thread(fail)

    anyio.run(main)


def test_a_cancelled_search_is_abandoned_at_once_and_left_to_end_on_its_own() -> None:
    started, release, ended = threading.Event(), threading.Event(), threading.Event()

    def search() -> int:
        started.set()
        assert release.wait(WAIT_S)
        ended.set()
        return 1

    async def main() -> None:
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as group:

                async def cancel_once_running() -> None:
                    await anyio.to_thread.run_sync(started.wait, WAIT_S)
                    scope.cancel()

                group.start_soon(cancel_once_running)
                await in_abandoned_thread(search)
        assert scope.cancelled_caught  # back before the search ended

    anyio.run(main)  # and the loop closed under it
    assert not ended.is_set()
    release.set()
    assert ended.wait(WAIT_S)


def test_the_wake_pipe_wakes_a_subscriber_for_each_plan_until_closed() -> None:
    pipe = WakePipe()
    woken = threading.Semaphore(0)
    subscription = pipe.subscribe(woken.release)
    try:
        pipe.wake()
        assert woken.acquire(timeout=WAIT_S)
        pipe.wake()
        assert woken.acquire(timeout=WAIT_S)
    finally:
        subscription.close()  # returns: its thread has ended
    pipe.close()


def test_a_full_wake_pipe_drops_wake_ups_rather_than_wait() -> None:
    pipe = WakePipe()
    try:
        for _ in range(100_000):  # far more than a pipe's buffer holds
            pipe.wake()
    finally:
        pipe.close()


def test_an_app_that_plans_nothing_wakes_the_plan_processes_for_each_submitted_plan(
    core: CleanAir,
) -> None:
    woken: list[None] = []
    app = create_app(core, Settings(plan_workers=0), wake_planners=lambda: woken.append(None))
    with TestClient(app) as client:
        token = pair(core, client)
        body = {
            "start": {"latitude": 60.17, "longitude": 24.94},
            "end": {"latitude": 60.171, "longitude": 24.945},
            "activity_type": "walking",
        }
        assert woken == []
        submitted = client.post("/v1/routes", json=body, headers=bearer(token))
        assert submitted.status_code == 202, submitted.text
        assert woken == [None]
        refused = client.post("/v1/routes", json={"start": 1}, headers=bearer(token))
        assert refused.status_code == 422
        assert woken == [None]  # nothing to plan: nobody woken
        # A departures plan is a plan the same processes run.
        now = core.clock.now()
        window = {"earliest": now.isoformat(), "latest": (now + timedelta(hours=1)).isoformat()}
        departures = client.post(
            "/ext/v1/routes/departures", json={**body, **window}, headers=bearer(token)
        )
        assert departures.status_code == 202, departures.text
        assert woken == [None, None]
        bad = client.post(
            "/ext/v1/routes/departures", json={**body, "earliest": "x"}, headers=bearer(token)
        )
        assert bad.status_code == 422
        assert woken == [None, None]


def test_serve_plans_in_processes_unless_it_plans_nothing_or_the_database_is_in_memory(
    tmp_path: Path,
) -> None:
    on_file = Settings(database=tmp_path / "cleanair.db")
    assert plans_in_processes(on_file)
    assert not plans_in_processes(Settings(database=tmp_path / "cleanair.db", plan_workers=0))
    assert not plans_in_processes(Settings(database=Path(":memory:")))
    assert plans_in_processes(Settings(database="postgresql://db.example/cleanair"))


@given(st.integers(min_value=-5, max_value=10_000))
def test_a_plan_process_ending_again_and_again_waits_longer_up_to_a_bound(restarts: int) -> None:
    delay = restart_delay(restarts)
    assert min(RESTART_DELAYS_S) <= delay <= max(RESTART_DELAYS_S)
    assert restart_delay(restarts + 1) >= delay
    assert restart_delay(1) == min(RESTART_DELAYS_S)  # the first restart is the quickest
    if restarts >= len(RESTART_DELAYS_S):
        assert delay == max(RESTART_DELAYS_S)


def failing_spawn(_: PlanProcesses) -> subprocess.Popen[bytes]:
    raise OSError("Resource temporarily unavailable")


def test_a_plan_process_that_cannot_be_started_is_logged_and_serving_goes_on(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(PlanProcesses, "_spawn", failing_spawn)
    with caplog.at_level(logging.ERROR, logger="cleanair"):
        planners = PlanProcesses.start(1, None)  # returns: the API serves all the same
    planners.stop()
    assert planners.wait() == 1
    assert "could not start a plan process" in caplog.messages


def test_a_stop_in_a_signal_handler_during_a_stop_does_not_wait_on_itself() -> None:
    # A second Ctrl-C or SIGTERM landing while the command's main thread is inside `stop`.
    planners = PlanProcesses.start(0, None)
    done = threading.Event()

    def stop_twice() -> None:
        with planners._lock:  # where a signal handler could interrupt the first stop
            planners.stop()
        done.set()

    threading.Thread(target=stop_twice, daemon=True).start()
    assert done.wait(WAIT_S)
    assert planners.wait() == 0

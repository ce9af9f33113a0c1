"""End to end: `cleanair serve` plans in processes of its own. Each API process has a plan
process beside it, which a submitted plan wakes at once through the command's pipe (not after
its idle wait), which runs at a lower CPU priority, whose metrics a scrape of the API shows,
and which ends with the command."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import attrs
import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from cleanair_runtime.processes.plan_processes import PLAN_NICENESS
from cleanair_runtime.processes.server import listening_socket
from support.servers import (
    STARTUP_S,
    children_of,
    free_port,
    pair,
    plan_row,
    server_env,
    spawn,
    stop,
    wait_until_serving,
)

pytestmark = pytest.mark.e2e

#: The plan processes' idle wait: the longest allowed, so that a plan claimed within
#: CLAIMED_S was claimed on a wake-up.
IDLE_S = 120.0
CLAIMED_S = 30.0
WALK = {
    "start": {"latitude": 60.1699, "longitude": 24.9384},
    "end": {"latitude": 60.1645, "longitude": 24.9525},
    "activity_type": "walking",
}


def finished_plans(base: str, status: str) -> float:
    text = httpx.get(f"{base}/metrics", timeout=10).text
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "cleanair_plans_finished_total" and sample.labels["status"] == status
    )


def wait_for_lines(log: Path, text: str, count: int) -> None:
    deadline = time.monotonic() + STARTUP_S
    while log.read_text().count(text) < count:
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.05)


def submit_until_claimed(env: dict[str, str], base: str, log: Path) -> None:
    """Submit a walk and wait, bounded, until a plan process has claimed it: with no street
    network the plan fails (refunded) as soon as it is claimed."""
    submitted = httpx.post(f"{base}/v1/routes", json=WALK, headers=pair(env, base), timeout=10)
    assert submitted.status_code == 202, submitted.text
    request_id = submitted.json()["request_id"]
    deadline = time.monotonic() + CLAIMED_S
    while plan_row(env["CLEANAIR_DATABASE"], request_id)[0] != "failed":
        assert time.monotonic() < deadline, f"not claimed in {CLAIMED_S} s: {log.read_text()}"
        time.sleep(0.05)


def plan_processes_of(command: int, children: set[int]) -> set[int]:
    """Which of `children` are plan processes: those at a lower CPU priority."""
    api = os.getpriority(os.PRIO_PROCESS, command)
    return {c for c in children if os.getpriority(os.PRIO_PROCESS, c) > api}


@attrs.frozen
class Serving:
    """A `cleanair serve` started by a test, with one plan runner per plan process."""

    env: dict[str, str]
    log: Path
    port: int
    command: subprocess.Popen[str]

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def serve(tmp_path: Path, workers: int, cwd: Path | None = None, **settings: str) -> Serving:
    env = server_env(tmp_path, CLEANAIR_PLAN_WORKERS="1", **settings)
    log, port = tmp_path / "serve.log", free_port()
    args = ("serve", "--port", str(port), "--workers", str(workers))
    return Serving(env, log, port, spawn(env, log, *args, cwd=cwd))


@pytest.mark.parametrize("workers", [1, 2])
def test_plans_run_in_plan_processes_woken_at_once_and_counted_by_the_api(
    tmp_path: Path, workers: int
) -> None:
    serving = serve(
        tmp_path,
        workers,
        CLEANAIR_PLAN_WORKER_IDLE_SECONDS=str(IDLE_S),
        CLEANAIR_METRICS="on",
    )
    env, log, base, command = serving.env, serving.log, serving.base, serving.command
    try:
        # An API process and a plan process each (the single API process is the command).
        processes = 2 * workers if workers > 1 else 1
        children = wait_until_serving(command, log, processes, f"{base}/livez")
        # Each plan process has looked for plans once, and waits; each API process says it
        # plans nothing itself.
        wait_for_lines(log, "plan worker started", workers)
        wait_for_lines(log, '"plan_runners": 0', workers)
        submit_until_claimed(env, base, log)
        assert finished_plans(base, "failed") == 1  # counted by a plan process
        assert log.read_text().count("plan worker started") == workers
        # The plan processes give way to the API processes on a busy CPU.
        api = os.getpriority(os.PRIO_PROCESS, command.pid)
        niceness = sorted(os.getpriority(os.PRIO_PROCESS, child) for child in children)
        if workers == 1:
            assert niceness == [api + PLAN_NICENESS]
        else:
            assert niceness == [api] * workers + [api + PLAN_NICENESS] * workers
    finally:
        stop(command, signal.SIGTERM, timeout=30)
    assert command.returncode == 0, log.read_text()
    assert not any(Path(f"/proc/{child}").exists() for child in children)
    assert children_of(command.pid) == set()


@pytest.mark.parametrize("workers", [1, 2])
def test_a_plan_process_killed_is_started_again_and_its_end_logged(
    tmp_path: Path, workers: int
) -> None:
    serving = serve(tmp_path, workers, CLEANAIR_PLAN_WORKER_IDLE_SECONDS=str(IDLE_S))
    env, log, base, command = serving.env, serving.log, serving.base, serving.command
    processes = 2 * workers if workers > 1 else 1
    try:
        children = wait_until_serving(command, log, processes, f"{base}/livez")
        wait_for_lines(log, "plan worker started", workers)
        planners = plan_processes_of(command.pid, children)
        assert len(planners) == workers
        killed = min(planners)
        os.kill(killed, signal.SIGKILL)  # as the kernel's OOM killer ends one
        wait_for_lines(log, "a plan process ended with an error", 1)
        # Another is started in its place (after a second) and looks for plans.
        wait_for_lines(log, "plan worker started", workers + 1)
        now = wait_until_serving(command, log, processes, f"{base}/livez")
        assert killed not in now
        assert len(now - children) == 1
        ended = [
            json.loads(line)
            for line in log.read_text().splitlines()
            if "a plan process ended with an error" in line
        ]
        assert [(entry["pid"], entry["status"]) for entry in ended] == [(killed, -signal.SIGKILL)]
        submit_until_claimed(env, base, log)  # it plans
    finally:
        stop(command, signal.SIGTERM, timeout=30)
    # Stopped cleanly, but a plan process had failed: the service manager hears of it.
    assert command.returncode == 1, log.read_text()
    assert children_of(command.pid) == set()


@pytest.mark.parametrize("workers", [1, 2])
def test_every_process_of_serve_ends_with_the_command_killed_outright(
    tmp_path: Path, workers: int
) -> None:
    # A plan process is started by a thread that watches it: the kernel's parent-death
    # signal follows the thread that started a process, which lives as long as the process.
    # An API process left running would hold the port: a restarted command could not bind it.
    serving = serve(tmp_path, workers)
    log, port, command = serving.log, serving.port, serving.command
    try:
        processes = 2 * workers if workers > 1 else 1
        children = wait_until_serving(command, log, processes, f"http://127.0.0.1:{port}/livez")
        wait_for_lines(log, "plan worker started", workers)
        planners = plan_processes_of(command.pid, children)
        assert len(planners) == workers
        command.kill()
        command.wait()
        deadline = time.monotonic() + STARTUP_S
        while alive := {c for c in children if not ended(c)}:
            assert time.monotonic() < deadline, f"{alive} outlived the command: {log.read_text()}"
            time.sleep(0.05)
        # The port is free for the next command.
        listening_socket("127.0.0.1", port).close()
    finally:
        stop(command, signal.SIGKILL, timeout=30)
        for child in children:  # a leftover must not serve on beside later tests
            if not ended(child):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(child, signal.SIGKILL)


def ended(pid: int) -> bool:
    """Whether `pid` has ended (gone, or waiting for its parent to collect it)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def test_a_service_managers_stop_reaching_the_plan_process_first_is_a_clean_stop(
    tmp_path: Path,
) -> None:
    # systemd signals every process of the service at once: the plan process may hear of the
    # stop before the command does. Started from a folder holding a module named as one the
    # plan process imports: the working directory is not on its import path.
    folder = tmp_path / "cwd"
    folder.mkdir()
    (folder / "attrs.py").write_text("raise SystemExit(7)\n")
    serving = serve(tmp_path, 1, cwd=folder)
    log, port, command = serving.log, serving.port, serving.command
    try:
        children = wait_until_serving(command, log, 1, f"http://127.0.0.1:{port}/livez")
        wait_for_lines(log, "plan worker started", 1)
        [planner] = children
        # A session of its own: a terminal's Ctrl-C is the command's to pass on.
        assert os.getsid(planner) == os.getpgid(planner) == planner != os.getpgid(command.pid)
        os.kill(planner, signal.SIGTERM)
        os.kill(command.pid, signal.SIGTERM)
        command.wait(timeout=30)
    finally:
        stop(command, signal.SIGKILL, timeout=30)
    assert command.returncode == 0, log.read_text()
    assert "a plan process" not in log.read_text()

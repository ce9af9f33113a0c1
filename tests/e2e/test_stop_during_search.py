"""End to end: SIGTERM in the middle of a long path search. The process hands its plan back
and exits, status 0, within seconds rather than when the search ends; a process started
afterwards completes the plan.

The search is long by construction: the first plan a process makes on a million-node grid
(17 s on an idle 2-core machine, longer on a loaded one) first works out the air of the whole
network. The plan stays pending until it ends, so a plan found handed back (pending, no
attempt spent) after the exit proves the exit did not wait for it.
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import httpx
import pytest

from cleanair_runtime.composition.bootstrap import load_or_create_key
from cleanair_storage.sqlite import SqliteStore
from support.networks import city_grid
from support.servers import STARTUP_S, pair, plan_row, running_server, server_env, worker_process

pytestmark = pytest.mark.e2e

#: 8.5 km across the grid's south-west corner: the search covers a good part of the network.
WALK = {
    "start": {"latitude": 60.1705, "longitude": 24.9410},
    "end": {"latitude": 60.2255, "longitude": 25.0500},
    "activity_type": "walking",
}
#: How soon after SIGTERM the process must have exited: a hand-back and closing the database
#: take well under a second; the search it must not wait for takes 17 s or more.
EXIT_S = 8.0
#: How long the process started afterwards may take to complete the plan: its own first plan
#: on this network, on a loaded machine.
COMPLETED_S = 180.0


def database_with_a_large_network(tmp_path: Path) -> dict[str, str]:
    """A server environment whose database holds only a million-node grid (no default network)."""
    env = server_env(tmp_path, CLEANAIR_PLAN_LEASE_SECONDS="600")
    database = Path(env["CLEANAIR_DATABASE"])
    database.parent.mkdir(parents=True)
    load_or_create_key(database.parent / "secret.key")
    store = SqliteStore(database)
    try:
        store.save_network(city_grid(1000))
    finally:
        store.close()
    return env


def submit(base: str, headers: dict[str, str]) -> str:
    submitted = httpx.post(f"{base}/v1/routes", json=WALK, headers=headers, timeout=10)
    assert submitted.status_code == 202, submitted.text
    request_id = submitted.json()["request_id"]
    assert isinstance(request_id, str)
    return request_id


def wait_for_row(database: str, request_id: str, status: str, attempts: int, within: float) -> None:
    deadline = time.monotonic() + within
    while (row := plan_row(database, request_id))[:2] != (status, attempts):
        assert time.monotonic() < deadline, f"plan {row}, not {status} after {within} s"
        time.sleep(0.05)


def stopped_within(process: subprocess.Popen[str], seconds: float) -> tuple[int, float]:
    """SIGTERM `process`; its exit status and how long it took (failing past `seconds`)."""
    started = time.monotonic()
    process.send_signal(signal.SIGTERM)
    try:
        status = process.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        raise AssertionError(f"still running {seconds} s after SIGTERM") from None
    return status, time.monotonic() - started


@contextmanager
def planner(env: dict[str, str], log: Path, command: str) -> Iterator[subprocess.Popen[str]]:
    """The process that plans: `cleanair serve` (its plan process) or `cleanair worker`."""
    if command == "serve":
        with running_server(env, log) as server:
            yield server.process
    else:
        with worker_process(env, log) as worker:
            yield worker


@pytest.mark.parametrize("command", ["serve", "worker"])
def test_sigterm_during_a_long_search_exits_at_once_and_the_plan_is_completed_later(
    tmp_path: Path, command: str
) -> None:
    env = database_with_a_large_network(tmp_path)
    database = env["CLEANAIR_DATABASE"]
    planning = {**env, "CLEANAIR_PLAN_WORKERS": "1"}
    # The plans are submitted to an API process that plans nothing itself.
    with running_server(env, tmp_path / "api.log") as api:
        headers = pair(env, api.base)
        request_id = submit(api.base, headers)
        with ExitStack() as stack:
            process = stack.enter_context(planner(planning, tmp_path / "first.log", command))
            wait_for_row(database, request_id, "pending", 1, STARTUP_S)  # claimed
            status, took = stopped_within(process, EXIT_S)
        print(f"{command}: exited {took:.2f} s after SIGTERM")
        assert status == 0
        # Handed back, its attempt given back: the search had not ended.
        assert plan_row(database, request_id) == ("pending", 0, None)
        with planner(planning, tmp_path / "second.log", command):
            wait_for_row(database, request_id, "completed", 1, COMPLETED_S)
    logs = (tmp_path / "first.log").read_text()
    assert "handed a plan back" in logs
    assert "Traceback" not in logs

"""End to end: `cleanair serve --workers 2` runs two API processes on one port and database.

Both answer (the kernel spreads connections over them), limits hold across them (60
concurrent score calls with a daily cap of 40 give exactly 40 successes), and SIGINT to the
command stops them all cleanly. Each API process, forked or a replacement, serves the shared
socket as shared (`shared_listening.served_listening`: one accept a wake-up).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from support.servers import (
    CLI,
    STARTUP_S,
    children_of,
    free_port,
    pair,
    server_env,
    spawn,
    wait_until_serving,
)

pytestmark = pytest.mark.e2e

CAP = 40
CALLS = 60


async def score_calls(base: str, headers: dict[str, str]) -> list[int]:
    async def one() -> int:
        # A new connection per call, so the kernel may hand each to either process.
        async with httpx.AsyncClient(timeout=60) as client:
            answer = await client.post(
                f"{base}/v1/airquality/score", json={"lat": 60.17, "lon": 24.94}, headers=headers
            )
        return answer.status_code

    return list(await asyncio.gather(*(one() for _ in range(CALLS))))


def test_two_api_processes_share_the_port_and_the_limits(tmp_path: Path) -> None:
    env = server_env(
        tmp_path, CLEANAIR_DAILY_CREDITS=str(CAP), CLEANAIR_RATE_LIMIT_PER_MINUTE="10000"
    )
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = tmp_path / "serve.log"
    command = spawn(env, log, "serve", "--port", str(port), "--workers", "2", session=True)
    try:
        processes = wait_until_serving(command, log, 2, f"{base}/schema/openapi.json")
        headers = pair(env, base)
        statuses = asyncio.run(score_calls(base, headers))
        assert statuses.count(200) == CAP
        assert set(statuses) == {200, 429}
    finally:
        # Ctrl-C in a terminal: SIGINT to every process of the group at once.
        os.killpg(command.pid, signal.SIGINT)
        status = command.wait(timeout=60)
    assert status == 0, log.read_text()
    # Each process shut down gracefully, not forced by a second SIGINT from the command.
    assert log.read_text().count("Application shutdown complete") == 2, log.read_text()
    assert not children_of(command.pid)
    assert "2 processes" in log.read_text()
    assert len(processes) == 2
    assert not any(Path(f"/proc/{pid}").exists() for pid in processes)  # ended and reaped


def test_a_bad_deployment_is_one_clear_error_before_any_process_starts(tmp_path: Path) -> None:
    env = server_env(
        tmp_path,
        CLEANAIR_DATABASE="postgresql://cleanair@127.0.0.1:9/cleanair",
        CLEANAIR_SECRET_KEY_FILE=str(tmp_path / "missing.key"),
    )
    done = subprocess.run(
        [CLI, "serve", "--port", str(free_port()), "--workers", "3"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.count("does not exist: with a PostgreSQL database") == 1
    assert "Traceback" not in done.stderr
    assert "API on http" not in done.stderr  # no banner: nothing was served


def test_api_processes_killed_outright_are_replaced(tmp_path: Path) -> None:
    # Both at once, as the OOM killer might: the port answers again from new processes, and
    # a stop still ends everything cleanly.
    env = server_env(tmp_path)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = tmp_path / "serve.log"
    command = spawn(env, log, "serve", "--port", str(port), "--workers", "2", session=True)
    try:
        first = wait_until_serving(command, log, 2, f"{base}/livez")
        for pid in first:
            os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + STARTUP_S
        while True:  # bounded: until two new processes serve
            replaced = children_of(command.pid) - first
            logged = log.read_text()
            if len(replaced) == 2 and all(
                f"Started server process [{pid}]" in logged for pid in replaced
            ):
                with contextlib.suppress(httpx.TransportError):
                    if httpx.get(f"{base}/livez", timeout=1).status_code == 200:
                        break
            assert command.poll() is None, logged
            assert time.monotonic() < deadline, logged
            time.sleep(0.05)
        assert httpx.get(f"{base}/readyz", timeout=10).status_code == 200
        # A replacement serves the shared socket as the forked ones do (see below).
        inode = listening_inode(port)
        assert held_until_both_serve(replaced, inode) == [2, 2]
    finally:
        command.send_signal(signal.SIGTERM)
        status = command.wait(timeout=60)
    logged = log.read_text()
    assert status == 0, logged
    assert logged.count("an API process ended; starting another") == 2, logged
    assert logged.count('"status": -9') == 2, logged
    assert logged.count("started an API process") == 2, logged
    for pid in replaced:  # each shut down gracefully
        assert f"Finished server process [{pid}]" in logged, logged
    assert not children_of(command.pid)
    assert not any(Path(f"/proc/{pid}").exists() for pid in replaced)  # ended and reaped


def listening_inode(port: int) -> str:
    """The inode of the socket listening on `port` (from /proc/net/tcp)."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for row in Path(table).read_text().splitlines()[1:]:
            fields = row.split()
            if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == "0A":
                return fields[9]
    raise AssertionError(f"nothing listens on {port}")


def descriptors_of(pid: int, inode: str) -> int:
    """How many of `pid`'s open descriptors are the socket `inode`."""
    held = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):  # closed meanwhile
            held += os.readlink(f"/proc/{pid}/fd/{fd}") == f"socket:[{inode}]"
    return held


def held_until_both_serve(processes: set[int], inode: str) -> list[int]:
    """How many descriptors of the socket `inode` each of `processes` holds, polled (bounded)
    until each holds two: one process answering does not mean the other serves yet."""
    deadline = time.monotonic() + STARTUP_S
    while (held := [descriptors_of(pid, inode) for pid in sorted(processes)]) != [2, 2]:
        if time.monotonic() > deadline:
            break
        time.sleep(0.05)
    return held


def test_each_api_process_serves_the_shared_socket_as_shared(tmp_path: Path) -> None:
    # Served through `served_listening` (one accept a wake-up, the queue left alone), each API
    # process holds the socket twice: the descriptor it inherited, and the duplicate it serves.
    env = server_env(tmp_path)
    port = free_port()
    log = tmp_path / "serve.log"
    command = spawn(env, log, "serve", "--port", str(port), "--workers", "2", session=True)
    try:
        processes = wait_until_serving(
            command, log, 2, f"http://127.0.0.1:{port}/schema/openapi.json"
        )
        inode = listening_inode(port)
        assert held_until_both_serve(processes, inode) == [2, 2]
    finally:
        os.killpg(command.pid, signal.SIGINT)
        command.wait(timeout=60)

"""End to end: `cleanair serve` raises its open-files soft limit, caps its connections, and
logs running out of descriptors once, not thousands of times with tracebacks."""

from __future__ import annotations

import contextlib
import re
import resource
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from support.servers import CLI, STARTUP_S, free_port, running_server, server_env, stop

pytestmark = pytest.mark.e2e


def limited_to(soft: int, hard: int | None = None) -> Callable[[], None]:
    """A `preexec_fn` giving the child these open-files limits (hard: unchanged if None)."""

    def limit() -> None:
        _, current_hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, current_hard if hard is None else hard))

    return limit


@contextlib.contextmanager
def serving(
    tmp_path: Path, preexec: Callable[[], None], **settings: str
) -> Iterator[tuple[subprocess.Popen[str], str, Path]]:
    """A `cleanair serve` started with `preexec`, until it answers; stopped at the end."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = tmp_path / "serve.log"
    with log.open("w") as stderr:
        process = subprocess.Popen(
            [CLI, "serve", "--port", str(port)],
            env=server_env(tmp_path, **settings),
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            text=True,
            preexec_fn=preexec,  # nothing but setrlimit: safe in a child of this process
        )
    try:
        deadline = time.monotonic() + STARTUP_S
        while True:  # bounded: until it answers
            with contextlib.suppress(httpx.TransportError):
                httpx.get(f"{base}/livez", timeout=1)
                break
            assert process.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
        yield process, base, log
    finally:
        stop(process, signal.SIGINT, timeout=30)


def open_files_limits(pid: int) -> tuple[str, str]:
    text = Path(f"/proc/{pid}/limits").read_text()
    found = re.search(r"^Max open files\s+(\S+)\s+(\S+)", text, re.MULTILINE)
    assert found, text
    return found.group(1), found.group(2)


def test_the_soft_open_files_limit_is_raised_to_the_hard_limit(tmp_path: Path) -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    low = min(256, hard)
    if low == hard:
        low = hard // 2
    with serving(tmp_path, limited_to(low)) as (process, _, log):
        soft_now, hard_now = open_files_limits(process.pid)
        logged = log.read_text()
    assert soft_now == hard_now
    assert '"message": "open files limit"' in logged
    assert f'"soft_at_start": {low}' in logged


def idle_connections(port: int, count: int) -> list[socket.socket]:
    """`count` connections that never send a byte."""
    return [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(count)]


def test_connections_beyond_the_cap_are_answered_503(tmp_path: Path) -> None:
    env = server_env(tmp_path, CLEANAIR_MAX_CONNECTIONS="4")
    with running_server(env, tmp_path / "serve.log") as server:
        idle = idle_connections(server.port, 4)
        try:
            beyond = httpx.get(f"{server.base}/livez", timeout=10)
        finally:
            for connection in idle:
                connection.close()
        assert beyond.status_code == 503
        assert beyond.headers["content-type"] == "application/json"
        assert beyond.json() == {
            "detail": "The server is at its connection limit: try again shortly"
        }
        assert beyond.headers["retry-after"] == "1"
        # Once the idle ones have left, a fresh client is answered (bounded wait: the server
        # hears of the closes in its own time).
        deadline = time.monotonic() + 30
        while (fresh := httpx.get(f"{server.base}/livez", timeout=10)).status_code != 200:
            assert time.monotonic() < deadline, fresh.status_code
            time.sleep(0.05)


def test_running_out_of_descriptors_is_logged_once_without_a_traceback(tmp_path: Path) -> None:
    # Soft and hard limits both low, as on a machine where they cannot be raised: idle
    # connections (which the cap does not turn away: they send no request) take every
    # descriptor left.
    with serving(tmp_path, limited_to(128, 128)) as (_, base, log):
        port = int(base.rsplit(":", 1)[1])
        idle = idle_connections(port, 200)
        try:
            deadline = time.monotonic() + 30
            while "cannot accept connections" not in log.read_text():  # bounded
                assert time.monotonic() < deadline, log.read_text()[-3000:]
                time.sleep(0.05)
            # More connections knock while the process is out: still one line.
            idle += idle_connections(port, 20)
        finally:
            for connection in idle:
                connection.close()
        deadline = time.monotonic() + 30
        while True:  # bounded: the process is answering again
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"{base}/livez", timeout=5).status_code == 200:
                    break
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.05)
        logged = log.read_text()
    assert logged.count("cannot accept connections") == 1, logged[-3000:]
    assert "Traceback" not in logged
    assert "socket.accept() out of system resource" not in logged

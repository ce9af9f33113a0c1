"""Real `cleanair serve` processes for end-to-end tests, and the operator CLI beside them."""

from __future__ import annotations

import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

CLI = str(Path(sys.executable).parent / "cleanair")

#: Ports a developer's own servers listen on while they run the tests: `make run` (`cleanair
#: serve`'s default, 8000) and the usual alternative (8080). No test may use them: the
#: session holds them busy (tests/conftest.py); take `free_port()` or `--port 0`.
DEVELOPER_PORTS = (8000, 8080)

#: Seconds a started process (`serve`, `worker`) has to be up and answering, for every test:
#: start-up took over 30 s on a busy 2-core machine running the suite. Bounded, so a process
#: that never comes up still fails the test, with its log.
STARTUP_S = 120.0


def plan_row(database: str, request_id: str) -> tuple[str, int, float | None]:
    """A stored plan's status, attempts and lease end in a SQLite database: what no API
    shows."""
    conn = sqlite3.connect(database, timeout=5)
    try:
        row = conn.execute(
            "SELECT status, attempts, lease_until FROM plans WHERE id = ?", (request_id,)
        ).fetchone()
    finally:
        conn.close()
    assert row is not None, f"no stored plan {request_id}"
    return str(row[0]), int(row[1]), row[2]


def wait_until_serving(
    command: subprocess.Popen[str], log: Path, processes: int, *urls: str, within: float = STARTUP_S
) -> set[int]:
    """Poll, bounded, until `command` (`serve --workers N`) has its `processes` children and
    every one of `urls` answers; its children."""
    deadline = time.monotonic() + within
    while True:
        try:
            if len(children := children_of(command.pid)) == processes:
                for url in urls:
                    httpx.get(url, timeout=1)
                return children
        except httpx.TransportError:
            pass
        assert command.poll() is None, log.read_text()
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.05)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def children_of(pid: int) -> set[int]:
    """The processes whose parent is `pid` (from /proc)."""
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # ended while we looked
        if int(fields[1]) == pid:
            found.add(int(stat.parent.name))
    return found


def cli(env: Mapping[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """Run the operator CLI on the server's database."""
    return subprocess.run(
        [CLI, *args], env=dict(env), capture_output=True, text=True, timeout=60, check=False
    )


def server_env(tmp_path: Path, **settings: str) -> dict[str, str]:
    """The environment of a quick server on a fresh database under `tmp_path` (no route
    planning, no street network import), with `settings` (CLEANAIR_* names) on top."""
    # Nothing from the developer's own shell: an exported CLEANAIR_TRUSTED_PROXIES (or
    # uvicorn's FORWARDED_ALLOW_IPS) would change what these tests observe.
    inherited = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith("CLEANAIR_") and name != "FORWARDED_ALLOW_IPS"
    }
    return {
        **inherited,
        "CLEANAIR_DATABASE": str(tmp_path / "var" / "cleanair.db"),
        "CLEANAIR_ENVIRONMENT": "tst",
        "CLEANAIR_PLAN_WORKERS": "0",
        "CLEANAIR_DEFAULT_NETWORK": "false",
        **settings,
    }


@dataclass(frozen=True)
class Server:
    process: subprocess.Popen[str]
    port: int
    log: Path

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def wait_for_log(self, text: str, count: int = 1, timeout: float = 10.0) -> None:
        """Poll the server's log until `text` occurs in it `count` times; bounded."""
        deadline = time.monotonic() + timeout
        while (logged := self.log.read_text()).count(text) < count:
            assert time.monotonic() < deadline, f"{text!r} not logged {count} times:\n{logged}"
            time.sleep(0.02)


def spawn(
    env: Mapping[str, str],
    log: Path,
    *args: str,
    session: bool = False,
    cwd: Path | None = None,
) -> subprocess.Popen[str]:
    """`cleanair ARGS` started in the background, its stderr to `log` (never a pipe nobody
    reads); with `session`, in a process group of its own, as a terminal's job is; in `cwd`
    when given."""
    with log.open("w") as stderr:
        return subprocess.Popen(
            [CLI, *args],
            env=dict(env),
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            text=True,
            start_new_session=session,
            cwd=cwd,
        )


@contextmanager
def worker_process(env: Mapping[str, str], log: Path) -> Iterator[subprocess.Popen[str]]:
    """A `cleanair worker` with one runner, stopped with SIGTERM at the end."""
    process = spawn(env, log, "worker", "--concurrency", "1")
    try:
        yield process
    finally:
        stop(process, signal.SIGTERM, timeout=10)


@contextmanager
def running_server(env: Mapping[str, str], log: Path, *args: str) -> Iterator[Server]:
    """A `cleanair serve` process (with `args`, `--workers 2` say) listening on a free port;
    stopped with SIGINT at the end.
    Its stderr goes to `log` (never a pipe nobody reads); read it after the block for all of
    it. What it logged must never contain a token."""
    port = free_port()
    process = spawn(env, log, "serve", "--port", str(port), *args)
    server = Server(process, port, log)
    try:
        deadline = time.monotonic() + STARTUP_S
        while True:  # wait for the process to listen; bounded
            try:
                httpx.get(f"{server.base}/schema/openapi.json", timeout=1)
                break
            except httpx.TransportError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(log.read_text()) from None
                time.sleep(0.05)
        yield server
    finally:
        stop(process, signal.SIGINT, timeout=10)
    assert "ca_tst_" not in log.read_text()


def stop(process: subprocess.Popen[str], signum: int, timeout: float) -> None:
    """Ask `process` to stop with `signum`; kill it if it has not within `timeout` s."""
    if process.poll() is None:
        process.send_signal(signum)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def pairing_code(env: Mapping[str, str], user: str = "alice") -> str:
    """Add `user` (premium) through the CLI and return a fresh pairing code for them."""
    added = cli(env, "users", "add", user)
    assert added.returncode == 0, added.stderr
    code = cli(env, "pairing-code", user).stdout.strip()
    assert re.fullmatch(r"[0-9]{6}", code), code
    return code


def pair(env: Mapping[str, str], base: str, user: str = "alice") -> dict[str, str]:
    """Pair `user` through the CLI and the API (one redemption attempt from this host);
    the bearer header of the new connection."""
    redeemed = httpx.post(
        f"{base}/v1/connections/token",
        json={"code": pairing_code(env, user), "name": "e2e"},
        timeout=10,
    )
    assert redeemed.status_code == 201, redeemed.text
    return {"Authorization": f"Bearer {redeemed.json()['token']}"}


#: Seconds between plan polls: the contract allows a connection 60 polls a minute.
POLL_EVERY = 1.1


def poll_until_finished(
    base: str, headers: Mapping[str, str], request_id: str, within: float = 60.0
) -> dict[str, Any]:
    """Poll (within the 60-a-minute limit) until the plan is no longer pending, for at most
    `within` seconds; the plan's last answer."""
    deadline = time.monotonic() + within
    while True:
        polled = httpx.get(f"{base}/v1/routes/{request_id}", headers=dict(headers), timeout=10)
        assert polled.status_code == 200, polled.text
        body: dict[str, Any] = polled.json()
        if body["status"] != "pending":
            return body
        assert time.monotonic() < deadline, f"plan {request_id} still pending after {within} s"
        time.sleep(POLL_EVERY)

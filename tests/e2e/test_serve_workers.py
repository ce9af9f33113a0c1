"""End to end: `cleanair serve --workers 2` runs two API processes on one port and database.

Both answer (the kernel spreads connections over them), limits hold across them (60
concurrent score calls with a daily cap of 40 give exactly 40 successes), and SIGINT to the
command stops them all cleanly. Each API process, forked or a replacement, serves a
listening socket of its own bound with SO_REUSEPORT (`shared_listening.slot_sockets`): the
kernel spreads connections over them whichever process runs, and a dead process's slot
keeps its queue for the replacement.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
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
#: Connections opened at once to see the kernel spread them over two slots.
CONNECTIONS = 16


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
        # Each replacement serves a slot's socket of its own, as the forked ones do (below).
        assert set(served_slots(replaced, port).values()) == listening_inodes(port)
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


def tcp_rows(port: int) -> list[list[str]]:
    """The rows of /proc/net/tcp (and tcp6) whose local port is `port`."""
    rows = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for row in Path(table).read_text().splitlines()[1:]:
            fields = row.split()
            if int(fields[1].rsplit(":", 1)[1], 16) == port:
                rows.append(fields)
    return rows


def listening_inodes(port: int) -> set[str]:
    """The inodes of the sockets listening on `port`."""
    return {fields[9] for fields in tcp_rows(port) if fields[3] == "0A"}


def accept_queue(port: int, inode: str) -> int:
    """How many connections wait to be accepted on the listening socket `inode` (its
    rx_queue in /proc/net/tcp)."""
    for fields in tcp_rows(port):
        if fields[9] == inode:
            return int(fields[4].split(":")[1], 16)
    raise AssertionError(f"socket {inode} no longer listens on {port}")


def sockets_of(pid: int) -> set[str]:
    """The inodes of the sockets `pid` holds open."""
    held = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):  # closed meanwhile
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
            if target.startswith("socket:["):
                held.add(target[len("socket:[") : -1])
    return held


def served_slots(processes: set[int], port: int) -> dict[int, str]:
    """The listening socket each of `processes` holds, polled (bounded) until each holds
    exactly one of `port`'s and no two the same: one answering does not mean the other
    has closed the sockets it inherited yet."""
    deadline = time.monotonic() + STARTUP_S
    while True:
        listening = listening_inodes(port)
        held = {pid: sockets_of(pid) & listening for pid in sorted(processes)}
        if all(len(inodes) == 1 for inodes in held.values()):
            slots = {pid: next(iter(inodes)) for pid, inodes in held.items()}
            if len(set(slots.values())) == len(processes):
                return slots
        assert time.monotonic() < deadline, (listening, held)
        time.sleep(0.05)


def ask(port: int) -> socket.socket:
    """A new connection to `port` (a source port of its own) with a request sent on it."""
    client = socket.create_connection(("127.0.0.1", port), timeout=STARTUP_S)
    client.sendall(b"GET /livez HTTP/1.1\r\nhost: test\r\n\r\n")
    return client


def status_of(client: socket.socket) -> bytes:
    """The status line of the answer on `client` (keeping the connection open)."""
    head = b""
    while b"\r\n" not in head:
        chunk = client.recv(4096)
        assert chunk, head
        head += chunk
    return head.split(b"\r\n", 1)[0]


def test_each_api_process_serves_a_socket_of_its_own(tmp_path: Path) -> None:
    # One listening socket per slot on the port (SO_REUSEPORT), all held by the command for
    # its whole life; each API process holds its slot's and none of the others.
    env = server_env(tmp_path)
    port = free_port()
    log = tmp_path / "serve.log"
    command = spawn(env, log, "serve", "--port", str(port), "--workers", "2", session=True)
    try:
        processes = wait_until_serving(
            command, log, 2, f"http://127.0.0.1:{port}/schema/openapi.json"
        )
        slots = served_slots(processes, port)
        assert len(listening_inodes(port)) == 2
        assert set(slots.values()) == listening_inodes(port)
        assert sockets_of(command.pid) >= listening_inodes(port)
    finally:
        os.killpg(command.pid, signal.SIGINT)
        command.wait(timeout=60)
    # None failed and was replaced on the way (a slot's socket closed by mistake, say).
    assert "an API process ended" not in log.read_text(), log.read_text()


def test_the_kernel_spreads_connections_whichever_process_runs(tmp_path: Path) -> None:
    # One API process stopped while 16 connections open: on one shared socket the running
    # one would accept them all; with a socket per slot the kernel puts some in the stopped
    # one's queue, and it answers them once it runs (all 16 on one slot: odds of 2**-15).
    env = server_env(tmp_path)
    port = free_port()
    log = tmp_path / "serve.log"
    command = spawn(env, log, "serve", "--port", str(port), "--workers", "2", session=True)
    clients: list[socket.socket] = []
    try:
        running, stopped = sorted(
            wait_until_serving(command, log, 2, f"http://127.0.0.1:{port}/livez")
        )
        served_slots({running, stopped}, port)
        os.kill(stopped, signal.SIGSTOP)
        try:
            clients = [ask(port) for _ in range(CONNECTIONS)]
        finally:
            os.kill(stopped, signal.SIGCONT)
        assert [status_of(client) for client in clients] == [b"HTTP/1.1 200 OK"] * CONNECTIONS
        established = {
            fields[9] for fields in tcp_rows(port) if fields[3] == "01"
        }  # the server's ends: their local port is the port served
        held = [len(sockets_of(pid) & established) for pid in (running, stopped)]
        assert sum(held) == CONNECTIONS, held
        assert all(held), held
    finally:
        for client in clients:
            client.close()
        os.killpg(command.pid, signal.SIGINT)
        command.wait(timeout=60)


def test_a_dead_slots_queue_is_answered_by_its_replacement(tmp_path: Path) -> None:
    # The command held still (SIGSTOP) so that it starts no replacement yet: one API process
    # killed, connections opened while its slot has no process wait in that slot's queue
    # (the command holds the socket), and the replacement serves that same socket.
    env = server_env(tmp_path)
    port = free_port()
    log = tmp_path / "serve.log"
    command = spawn(env, log, "serve", "--port", str(port), "--workers", "2", session=True)
    clients: list[socket.socket] = []
    try:
        processes = wait_until_serving(command, log, 2, f"http://127.0.0.1:{port}/livez")
        slots = served_slots(processes, port)
        victim, survivor = sorted(processes)
        os.kill(command.pid, signal.SIGSTOP)
        try:
            os.kill(victim, signal.SIGKILL)
            deadline = time.monotonic() + STARTUP_S
            while Path(f"/proc/{victim}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                assert time.monotonic() < deadline  # bounded: until it is dead, not reaped
                time.sleep(0.05)
            clients = [ask(port) for _ in range(CONNECTIONS)]
            # Some wait for nobody but the command's descriptor (all 16 elsewhere: 2**-16).
            assert accept_queue(port, slots[victim]) > 0
        finally:
            os.kill(command.pid, signal.SIGCONT)
        assert [status_of(client) for client in clients] == [b"HTTP/1.1 200 OK"] * CONNECTIONS
        (replacement,) = children_of(command.pid) - {survivor}
        assert served_slots({replacement, survivor}, port) == {
            replacement: slots[victim],
            survivor: slots[survivor],
        }
    finally:
        for client in clients:
            client.close()
        command.send_signal(signal.SIGTERM)
        status = command.wait(timeout=60)
    assert status == 0, log.read_text()

"""End to end: what reaches the real `cleanair serve` process over TCP.

- The client's address comes from X-Forwarded-For only when the peer is a trusted proxy
  (CLEANAIR_TRUSTED_PROXIES); uvicorn's own proxy-header handling, which would trust
  loopback, is off and stays off whatever FORWARDED_ALLOW_IPS says.
- A client that disconnects while its body is read is one INFO line, not an ERROR traceback.
- Connections that send their headers or body too slowly, or nothing at all, are closed.
- A request's head is bounded (16 KiB, as h11 bounded it): httptools, which parses requests,
  buffers a header without a bound of its own.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from support.servers import Server, cli, pair, running_server, server_env

pytestmark = pytest.mark.e2e

#: Keeps these tests clear of the global pairing guess budget: they count per address.
GUESS_BUDGET = {"CLEANAIR_PAIRING_GUESS_BUDGET": "1000"}
#: Short read deadlines, so that waiting for them takes half a second.
SHORT_DEADLINES = {"CLEANAIR_HEADER_TIMEOUT": "0.5", "CLEANAIR_BODY_TIMEOUT": "0.5"}
#: A socket read waits this long for the server; a deadline of 0.5 s answers well before.
READ_TIMEOUT = 10.0
CLOSED_WITHIN = 5.0


def forecast_without_coordinates(base: str, token: str, forwarded_for: str) -> httpx.Response:
    # Tomorrow, not today: in the window (today .. today + 3) on either side of midnight.
    day = (datetime.now(UTC) + timedelta(days=1)).date().isoformat()
    return httpx.post(
        f"{base}/v1/airquality/forecast",
        json={"date": day, "timezone": "UTC"},
        headers={"Authorization": token, "X-Forwarded-For": forwarded_for},
        timeout=10,
    )


def forged_redemptions(base: str, count: int) -> list[int]:
    """`count` wrong codes from this host, each claiming another address; their statuses."""
    statuses = []
    for i in range(count):
        response = httpx.post(
            f"{base}/v1/connections/token",
            json={"code": f"{i:06d}", "name": "guess"},
            headers={"X-Forwarded-For": f"203.0.113.{i + 1}"},
            timeout=10,
        )
        statuses.append(response.status_code)
    return statuses


def test_forwarded_for_is_not_believed_without_trusted_proxies(tmp_path: Path) -> None:
    # FORWARDED_ALLOW_IPS is uvicorn's own trust list: it must not turn its handling back on.
    env = server_env(tmp_path, **GUESS_BUDGET, FORWARDED_ALLOW_IPS="*")
    with running_server(env, tmp_path / "server.log") as server:
        # Every attempt counts against the peer, 127.0.0.1, whatever address it claims. The
        # limit is 10 a clock minute: 21 quick attempts fall in at most two minutes, so one
        # of them holds 11 and its 11th is refused, wherever the minute turns.
        statuses = forged_redemptions(server.base, 21)
        assert 429 in statuses
        assert set(statuses) == {401, 429}

        # A partner token: pairing would be one more attempt from this (now blocked) peer.
        assert cli(env, "partners", "add", "acme").returncode == 0
        issued = cli(env, "partners", "issue-token", "acme", "--name", "e2e", "--scope", "aq:read")
        assert issued.returncode == 0, issued.stderr
        token = f"Bearer {issued.stdout.strip()}"
        # The forecast's country comes from the peer, loopback, which has none: 422, not the
        # United States of the forged 8.8.8.8.
        forecast = forecast_without_coordinates(server.base, token, "8.8.8.8")
        assert forecast.status_code == 422, forecast.text
        assert forecast.json() == {"detail": "No location could be resolved from the request"}


def test_forwarded_for_is_believed_from_a_trusted_proxy(tmp_path: Path) -> None:
    env = server_env(tmp_path, **GUESS_BUDGET, CLEANAIR_TRUSTED_PROXIES="127.0.0.1")
    with running_server(env, tmp_path / "server.log") as server:
        headers = pair(env, server.base)  # one attempt from 127.0.0.1 itself
        # Eleven more from the same peer, but on behalf of eleven clients: none is limited.
        assert forged_redemptions(server.base, 11) == [401] * 11

        forecast = forecast_without_coordinates(server.base, headers["Authorization"], "8.8.8.8")
        assert forecast.status_code == 200, forecast.text
        assert forecast.json()["location"] == "United States"


def test_a_client_gone_mid_body_is_one_info_line(tmp_path: Path) -> None:
    env = server_env(tmp_path, **GUESS_BUDGET)
    with running_server(env, tmp_path / "server.log") as server:
        with socket.create_connection(("127.0.0.1", server.port), timeout=READ_TIMEOUT) as sock:
            sock.sendall(
                b"POST /v1/connections/token HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n"
                b'{"code": "'
            )
        server.wait_for_log('"message": "client disconnected"')
    logged = [json.loads(line) for line in server.log.read_text().splitlines() if line[:1] == "{"]
    gone = [entry for entry in logged if entry["message"] == "client disconnected"]
    assert len(gone) == 1
    assert gone[0]["level"] == "INFO"
    assert (gone[0]["method"], gone[0]["path"]) == ("POST", "/v1/connections/token")
    assert "exception" not in gone[0]
    assert [entry for entry in logged if entry["level"] == "ERROR"] == []
    assert "Traceback" not in server.log.read_text()


@pytest.fixture(scope="module")
def slow_clients_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp_path = tmp_path_factory.mktemp("slow-clients")
    env = server_env(tmp_path, **SHORT_DEADLINES)
    with running_server(env, tmp_path / "server.log") as server:
        yield server
    # Closing slow connections, and the disconnects the application then sees, are routine.
    logged = server.log.read_text()
    assert '"level": "ERROR"' not in logged
    assert "Traceback" not in logged


def read_until_closed(sock: socket.socket) -> tuple[bytes, float]:
    """Everything the server sends until it closes the connection, and the seconds that took.
    A server that never closes it fails the test after READ_TIMEOUT."""
    started = time.monotonic()
    received = b""
    while chunk := sock.recv(4096):
        received += chunk
    return received, time.monotonic() - started


def connect(server: Server) -> socket.socket:
    return socket.create_connection(("127.0.0.1", server.port), timeout=READ_TIMEOUT)


def test_a_connection_that_sends_nothing_is_closed(slow_clients_server: Server) -> None:
    with connect(slow_clients_server) as sock:
        received, took = read_until_closed(sock)
    assert received == b""
    assert 0.4 < took < CLOSED_WITHIN


def test_headers_sent_too_slowly_are_cut_off(slow_clients_server: Server) -> None:
    with connect(slow_clients_server) as sock:
        sock.sendall(b"POST /v1/connections/token HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Ty")
        received, took = read_until_closed(sock)
    assert received == b""
    assert took < CLOSED_WITHIN


def test_a_body_sent_too_slowly_is_cut_off(slow_clients_server: Server) -> None:
    with connect(slow_clients_server) as sock:
        sock.sendall(
            b"POST /v1/connections/token HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/json\r\nContent-Length: 50\r\n\r\n"
            b'{"cod'
        )
        received, took = read_until_closed(sock)
    assert received == b""
    assert took < CLOSED_WITHIN
    slow_clients_server.wait_for_log('"phase": "body"')


def test_kept_alive_connections_keep_working_between_requests(
    slow_clients_server: Server,
) -> None:
    kept = http.client.HTTPConnection("127.0.0.1", slow_clients_server.port, timeout=10)
    try:
        kept.request(
            "POST",
            "/v1/connections/token",
            body=b"{}",
            headers={"Content-Type": "application/json"},
        )
        first = kept.getresponse()
        assert first.status == 422
        first.read()
        assert kept.sock is not None
        local = kept.sock.getsockname()
        # Let both deadlines pass (an idle connection opened now is closed by its header
        # deadline) while staying well within uvicorn's 5 s keep-alive.
        with connect(slow_clients_server) as idle:
            read_until_closed(idle)
        kept.request("GET", "/schema/openapi.json")
        second = kept.getresponse()
        assert second.status == 200
        second.read()
        assert kept.sock is not None
        assert kept.sock.getsockname() == local, "the connection was not kept alive"
    finally:
        kept.close()


def test_fifty_idle_connections_are_all_closed(slow_clients_server: Server) -> None:
    before = slow_clients_server.log.read_text().count('"message": "read timeout"')
    sockets = [connect(slow_clients_server) for _ in range(50)]
    started = time.monotonic()
    try:
        for sock in sockets:
            received, _ = read_until_closed(sock)
            assert received == b""
    finally:
        for sock in sockets:
            sock.close()
    assert time.monotonic() - started < CLOSED_WITHIN
    # One INFO line each, without the client's address.
    slow_clients_server.wait_for_log('"message": "read timeout"', count=before + 50)
    timeouts = [
        json.loads(line)
        for line in slow_clients_server.log.read_text().splitlines()
        if '"message": "read timeout"' in line
    ]
    assert {entry["level"] for entry in timeouts} == {"INFO"}
    assert not any("127.0.0.1" in json.dumps(entry) for entry in timeouts)


def test_a_client_that_stops_reading_its_answers_is_cut_off(tmp_path: Path) -> None:
    env = server_env(tmp_path, **SHORT_DEADLINES, CLEANAIR_SEND_TIMEOUT="0.5")
    with running_server(env, tmp_path / "server.log") as server:
        sock = socket.socket()
        # A tiny receive window, and four hundred pipelined requests for a 19 KB document whose
        # answers are never read: the server's send buffers fill and stay full.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
        sock.settimeout(READ_TIMEOUT)
        with sock:
            sock.connect(("127.0.0.1", server.port))
            sock.sendall(b"GET /schema/openapi.json HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" * 400)
            server.wait_for_log('"message": "send timeout"')
            # Aborted: what was in flight arrives, then the end (or a reset), not a hang.
            with contextlib.suppress(ConnectionResetError):
                read_until_closed(sock)
    logged = server.log.read_text()
    assert '"level": "ERROR"' not in logged
    assert "Traceback" not in logged


def test_a_head_larger_than_the_bound_is_refused_and_closed(slow_clients_server: Server) -> None:
    # Larger than one read of the server (256 KiB), so part of it is read wholly inside the
    # head however the kernel splits it.
    head = b"GET /livez HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Padding: " + b"a" * 300_000
    before = slow_clients_server.log.read_text().count('"message": "request head too large"')
    # The server closes with the rest of the head unread: its 431 may come, or a reset.
    with (
        connect(slow_clients_server) as sock,
        contextlib.suppress(ConnectionResetError, BrokenPipeError),
    ):
        sock.sendall(head)
        received, _ = read_until_closed(sock)
        assert received == b"" or received.startswith(b"HTTP/1.1 431 ")
    slow_clients_server.wait_for_log('"message": "request head too large"', count=before + 1)


def test_a_head_within_the_bound_is_answered(slow_clients_server: Server) -> None:
    response = httpx.get(
        f"{slow_clients_server.base}/livez", headers={"X-Padding": "a" * 12_000}, timeout=10
    )
    assert response.status_code == 200


def test_a_burst_of_pipelined_requests_larger_than_the_bound_is_all_answered(
    slow_clients_server: Server,
) -> None:
    # Many small heads in one write, more than one read of the server (256 KiB), which
    # then ends inside a head: their sum is no head, however many arrive in one read.
    count = 5000
    request = b"GET /livez HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Padding: " + b"a" * 40 + b"\r\n\r\n"
    with connect(slow_clients_server) as sock:
        sock.sendall(request * count)
        sock.shutdown(socket.SHUT_WR)
        received, _ = read_until_closed(sock)
    assert received.count(b"HTTP/1.1 200 ") == count
    assert b"HTTP/1.1 400 " not in received

"""End to end: the HTTP protocol of a real `cleanair serve` process, over raw sockets
(findings of the security review, issue 31).

- A client pipelining megabytes of requests makes the server hold a bounded number of them,
  not every request it sends (over a gigabyte for 20 MB of `GET /livez`); a legit pipelined
  batch is still answered in full, in order.
- A chunked body's trailers never join the request's headers: a trailer X-Forwarded-For
  does not choose the client's address, so the pairing limit per address holds.
- An answer given to an `Expect: 100-continue` request before its body was asked for
  closes the connection: the body may never come, and the next request must not be read
  as that body.
- An oversized request head is answered 431 in the JSON error envelope, and closed.
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.servers import Server, running_server, server_env

pytestmark = pytest.mark.e2e

#: A socket read waits this long at most for the server.
READ_TIMEOUT = 10.0
LIVEZ = b"GET /livez HTTP/1.1\r\nHost: x\r\n\r\n"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp_path = tmp_path_factory.mktemp("http-protocol")
    # Trusted proxies: the address of a request comes from its X-Forwarded-For. The deadlines
    # are long, so that only the server's own decision can close a connection within a test.
    env = server_env(
        tmp_path,
        CLEANAIR_TRUSTED_PROXIES="127.0.0.1",
        CLEANAIR_PAIRING_GUESS_BUDGET="1000",
        CLEANAIR_HEADER_TIMEOUT="60",
        CLEANAIR_BODY_TIMEOUT="60",
    )
    with running_server(env, tmp_path / "server.log") as started:
        yield started


def connect(server: Server) -> socket.socket:
    return socket.create_connection(("127.0.0.1", server.port), timeout=READ_TIMEOUT)


def read_until_closed(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes; a server that keeps the connection open
    fails the test after READ_TIMEOUT (socket.timeout)."""
    received = b""
    with contextlib.suppress(ConnectionResetError):
        while chunk := sock.recv(65536):
            received += chunk
    return received


def read_response(sock: socket.socket) -> tuple[bytes, bytes]:
    """One response with a Content-Length: its head (lower case) and its body."""
    received = b""
    while b"\r\n\r\n" not in received:
        chunk = sock.recv(65536)
        assert chunk, received
        received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    head = head.lower()
    length = int(head.split(b"content-length:", 1)[1].split(b"\r\n", 1)[0])
    while len(body) < length:
        chunk = sock.recv(65536)
        assert chunk, received
        body += chunk
    assert len(body) == length, "more than one response"
    return head, body


# An oversized head.


def test_an_oversized_head_is_refused_in_the_error_envelope(server: Server) -> None:
    head = b"GET /livez HTTP/1.1\r\nHost: x\r\nX-Padding: " + b"a" * 100_000 + b"\r\n\r\n"
    with connect(server) as sock:
        sock.sendall(head)
        received = read_until_closed(sock)
    answer, _, body = received.partition(b"\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 431 ")
    assert b"\r\ncontent-type: application/json\r\n" in answer
    assert b"\r\nconnection: close\r\n" in answer + b"\r\n"
    assert json.loads(body) == {"detail": "Request header fields too large"}


def test_bytes_that_are_not_http_are_refused_in_the_error_envelope(server: Server) -> None:
    with connect(server) as sock:
        sock.sendall(b"HELLO THERE\r\n\r\n")
        received = read_until_closed(sock)
    answer, _, body = received.partition(b"\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 400 ")
    assert b"\r\ncontent-type: application/json\r\n" in answer
    assert json.loads(body) == {"detail": "Invalid HTTP request"}


# D4: trailers.


def redeem_with_a_trailer(server: Server, code: str, forwarded_for: str, trailer_for: str) -> int:
    """A wrong pairing code sent chunked, its X-Forwarded-For in the head and another in a
    trailer; the answer's status."""
    body = json.dumps({"code": code, "name": "guess"}).encode()
    request = (
        b"POST /v1/connections/token HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Transfer-Encoding: chunked\r\nX-Forwarded-For: %s\r\n\r\n"
        b"%x\r\n%s\r\n0\r\nX-Forwarded-For: %s\r\n\r\n"
    ) % (forwarded_for.encode(), len(body), body, trailer_for.encode())
    with connect(server) as sock:
        sock.sendall(request)
        head, _ = read_response(sock)
    return int(head.split(b" ", 2)[1])


def test_a_trailer_does_not_choose_the_clients_address(server: Server) -> None:
    # The proxy (127.0.0.1, trusted) says the client is 198.51.100.7; each trailer claims
    # another address, which, merged into the headers, would be the nearest untrusted hop.
    # The limit is 10 a clock minute: 21 quick attempts fall in at most two minutes, so one
    # of them holds 11 and its 11th is refused, wherever the minute turns.
    statuses = [
        redeem_with_a_trailer(server, f"{i:06d}", "198.51.100.7", f"203.0.113.{i + 1}")
        for i in range(21)
    ]
    assert 429 in statuses
    assert set(statuses) == {401, 429}


# D9: Expect: 100-continue.


def test_an_answer_before_an_expected_body_closes_the_connection(server: Server) -> None:
    # No token: 401 before the body is asked for, so no `100 Continue` is sent, and the
    # client need not send the body. The next request it sends must not be read as that
    # body (which it exactly fits), its answer never coming.
    following = LIVEZ
    with connect(server) as sock:
        sock.sendall(
            b"POST /v1/airquality/score HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Expect: 100-continue\r\nContent-Length: %d\r\n\r\n" % len(following)
        )
        head, _ = read_response(sock)
        assert head.startswith(b"http/1.1 401 ")
        assert b"\r\nconnection: close" in head
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            sock.sendall(following)
        assert read_until_closed(sock) == b""  # closed, not waiting for more body


def test_an_expected_body_read_before_the_answer_keeps_the_connection(server: Server) -> None:
    # The redemption reads its body: `100 Continue`, the body, the 401, and the connection
    # serves the next request.
    body = json.dumps({"code": "999999", "name": "e2e"}).encode()
    with connect(server) as sock:
        sock.sendall(
            b"POST /v1/connections/token HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Expect: 100-continue\r\nContent-Length: %d\r\n\r\n" % len(body)
        )
        continued = sock.recv(65536)
        assert continued == b"HTTP/1.1 100 Continue\r\n\r\n"
        sock.sendall(body)
        head, _ = read_response(sock)
        assert head.startswith(b"http/1.1 401 ")
        assert b"connection: close" not in head
        sock.sendall(LIVEZ)
        head, answer = read_response(sock)
        assert head.startswith(b"http/1.1 200 ")
        assert json.loads(answer) == {"status": "ok"}


# D1: pipelining.


def statuses_in(raw: bytes) -> list[int]:
    """The status of each response in `raw`, in order (no body here holds a status line)."""
    return [int(status) for status in re.findall(rb"HTTP/1\.1 (\d{3}) ", raw)]


def memory_kib(pid: int) -> dict[str, int]:
    """A process's resident memory now (VmRSS) and at its peak (VmHWM), in KiB."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            fields[name] = int(value.split()[0])
    return fields


#: What the client pipelines: 20 MB of `GET /livez`, as the review's attacker did.
PIPELINED_BYTES = 20_000_000
#: How much the server's peak memory may grow meanwhile. Holding every request read took it
#: from 123 MB to 1,382 MB; holding a few dozen, it grows by a few MB.
GROWTH_BOUND_KIB = 100 * 1024


def test_pipelining_megabytes_of_requests_keeps_the_servers_memory_bounded(
    server: Server,
) -> None:
    before = memory_kib(server.process.pid)
    chunk = LIVEZ * (256 * 1024 // len(LIVEZ))
    sent = 0
    sock = socket.socket()
    # A small receive window: the client reads no answer, so the server soon cannot write
    # any more of them, and then stops reading requests (a server that read on would take
    # all 20 MB in well under a second).
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    with sock:
        sock.connect(("127.0.0.1", server.port))
        sock.settimeout(2.0)  # a send blocked this long: the server has stopped reading
        with contextlib.suppress(TimeoutError, ConnectionResetError, BrokenPipeError):
            while sent < PIPELINED_BYTES:
                sock.sendall(chunk)
                sent += len(chunk)
        after = memory_kib(server.process.pid)
    grown = after["VmHWM"] - before["VmHWM"]
    print(f"sent {sent} bytes; server memory {before} -> {after}; peak grew {grown} KiB")
    assert grown < GROWTH_BOUND_KIB, (sent, before, after)
    assert sent < PIPELINED_BYTES, "the server read every request it was sent"


def test_a_pipelined_batch_is_answered_in_full_and_in_order(server: Server) -> None:
    # Three kinds of answer, in a pattern: a reordered or lost answer breaks it. More than
    # the server reads ahead, so it must read on as it answers.
    requests = [
        LIVEZ,
        b"GET /v1/quota HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET /nowhere HTTP/1.1\r\nHost: x\r\n\r\n",
    ]
    rounds = 400
    with connect(server) as sock:
        sock.sendall(b"".join(requests) * rounds)
        sock.shutdown(socket.SHUT_WR)
        received = read_until_closed(sock)
    assert statuses_in(received) == [200, 401, 404] * rounds

"""The HTTP protocol `cleanair serve` runs (`connection_deadlines.DeadlineProtocol`), served by
a real uvicorn on a socket, in front of a small app whose answer can be made to wait: what the
deadlines and bounds do while the server itself is the one being waited for. (Its behaviour
in front of the real app: tests/e2e/test_transport.py and test_half_close.py.)"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import threading
import time
from collections.abc import Iterator

import pytest
import uvicorn
from hypothesis import example, given, settings
from hypothesis import strategies as st

from cleanair_runtime.processes.connection_deadlines import (
    MAX_FRAMING_BYTES,
    MAX_QUEUED,
    with_deadlines,
)
from cleanair_runtime.processes.server import listening_socket

#: The read deadlines of the server under test: short, so a test waits little for them.
DEADLINE_S = 0.5
#: How long the slow answer takes: three read deadlines.
SLOW_S = 3 * DEADLINE_S
#: A socket read waits this long at most for the server.
READ_TIMEOUT = 10.0


#: The paths the app was run for, in order.
RUN: list[str] = []
#: The size of `/big`'s answer: below the transport's 64 KiB high-water mark, so writing is
#: never paused for it.
BIG = 40_000


async def read_body(receive: object) -> bytes:
    body = b""
    while True:
        message = await receive()  # type: ignore[operator]
        body += bytes(message.get("body", b""))
        if not message.get("more_body"):
            return body


async def app(scope: dict, receive: object, send: object) -> None:  # type: ignore[type-arg]
    """`/slow` answers after SLOW_S (the server's own wait), `/big` with BIG bytes, `/echo`
    with the request's body, `/headers` (once the body is read) with the request's header
    names, anything else at once with its path."""
    if scope["type"] != "http":
        return
    RUN.append(scope["path"])
    if scope["path"] == "/slow":
        await asyncio.sleep(SLOW_S)
    if scope["path"] == "/echo":
        body = await read_body(receive)
    elif scope["path"] == "/headers":
        await read_body(receive)
        body = b",".join(name for name, _ in scope["headers"])
    else:
        body = b"b" * BIG if scope["path"] == "/big" else scope["path"].encode()
    await send(  # type: ignore[operator]
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})  # type: ignore[operator]


@pytest.fixture(scope="module")
def port() -> Iterator[int]:
    sock = listening_socket("127.0.0.1", 0)
    # A small send buffer (the accepted sockets inherit it): an answer the client does not
    # read stays in the server's own buffer, which closing waits on.
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    config = uvicorn.Config(
        app,
        log_config=None,
        lifespan="off",
        http=with_deadlines(DEADLINE_S, DEADLINE_S, DEADLINE_S),
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + READ_TIMEOUT
    while not server.started:
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.01)
    yield sock.getsockname()[1]
    server.should_exit = True
    thread.join(READ_TIMEOUT)
    sock.close()


def connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=READ_TIMEOUT)


def read_until_closed(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes; a server that never closes it fails the
    test after READ_TIMEOUT."""
    received = b""
    with contextlib.suppress(ConnectionResetError):
        while chunk := sock.recv(65536):
            received += chunk
    return received


def refused_after_the_slow_answer(port: int, refused: bytes, status: int = 400) -> None:
    """Send `refused` pipelined behind a slow request: the slow answer comes, then the
    refusal (`status`)."""
    with connect(port) as sock:
        sock.sendall(b"GET /slow HTTP/1.1\r\nhost: x\r\n\r\n" + refused)
        received = read_until_closed(sock)
    first, _, rest = received.partition(b"/slow")
    assert first.startswith(b"HTTP/1.1 200 ")
    assert rest.startswith(b"HTTP/1.1 %d " % status)


def wait_for_message(caplog: pytest.LogCaptureFixture, message: str) -> None:
    """Wait, bounded, for the server's thread to log `message`."""
    deadline = time.monotonic() + READ_TIMEOUT
    while message not in caplog.messages:
        assert time.monotonic() < deadline, caplog.messages
        time.sleep(0.01)


def test_a_request_pipelined_behind_a_slow_answer_waits_for_it_before_its_own_deadline(
    port: int,
) -> None:
    # The second request's head is incomplete: its deadline is the client's, and the client
    # is waiting on the server's slow answer, which must not be lost to that deadline.
    with connect(port) as sock:
        sock.sendall(b"GET /slow HTTP/1.1\r\nhost: x\r\n\r\nGET /next HTTP/1.1\r\nho")
        received = read_until_closed(sock)
    assert received.startswith(b"HTTP/1.1 200 ")
    assert received.endswith(b"/slow")


def test_line_breaks_between_requests_do_not_keep_a_connection_open(port: int) -> None:
    # They begin no request, but stop the keep-alive timer: the next head is owed at once.
    with connect(port) as sock:
        sock.sendall(b"GET /a HTTP/1.1\r\nhost: x\r\n\r\n")
        received = b""
        while not received.endswith(b"/a"):  # the head and the body may come apart
            chunk = sock.recv(65536)
            assert chunk, received
            received += chunk
        sock.sendall(b"\r\n")
        assert read_until_closed(sock) == b""


def test_a_head_larger_than_the_bound_in_one_read_is_refused(port: int) -> None:
    with connect(port) as sock:
        sock.sendall(b"GET /a HTTP/1.1\r\nhost: x\r\nx-padding: " + b"a" * 100_000 + b"\r\n\r\n")
        received = read_until_closed(sock)
    head, _, body = received.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 431 ")
    assert b"content-type: application/json" in head.lower()
    assert b"connection: close" in head.lower()
    assert json.loads(body) == {"detail": "Request header fields too large"}


def test_trailers_past_the_framing_bound_are_refused(
    port: int, caplog: pytest.LogCaptureFixture
) -> None:
    # httptools buffers a trailer as it does a header: without a bound, a client could
    # stream one for the whole body deadline.
    head = b"POST /a HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\n0\r\nx-t: "
    with caplog.at_level(logging.INFO, logger="cleanair.server"), connect(port) as sock:
        with contextlib.suppress(ConnectionResetError, BrokenPipeError):
            sock.sendall(head + b"a" * (4 * MAX_FRAMING_BYTES))
            read_until_closed(sock)
        wait_for_message(caplog, "request body framing too large")


def test_a_refused_head_behind_a_slow_answer_is_refused_after_it(port: int) -> None:
    # Written at once, the 400 would reach the client before the answer owed to it.
    refused = b"GET /a HTTP/1.1\r\nx-padding: " + b"a" * 40_000 + b"\r\n\r\n"
    refused_after_the_slow_answer(port, refused, status=431)


def test_a_refused_request_queued_behind_an_answer_never_runs(port: int) -> None:
    # Its head was read (and queued) behind the slow request; its body is then refused.
    refused = b"DELETE /refused HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n"
    refused_after_the_slow_answer(port, refused)
    assert "/refused" not in RUN


def test_a_closing_connection_whose_client_reads_nothing_is_cut_off(
    port: int, caplog: pytest.LogCaptureFixture
) -> None:
    # `Connection: close`: uvicorn closes once the answer is written, and the close waits for
    # the client to read it, for ever without the send deadline.
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
    sock.settimeout(READ_TIMEOUT)
    with caplog.at_level(logging.INFO, logger="cleanair.server"), sock:
        sock.connect(("127.0.0.1", port))
        sock.sendall(b"GET /big HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
        wait_for_message(caplog, "send timeout")


def test_trailers_never_join_the_requests_headers(port: int) -> None:
    # uvicorn appended them to the list the application reads, after the application began:
    # a trailer X-Forwarded-For then chose the client's address.
    with connect(port) as sock:
        sock.sendall(
            b"POST /headers HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\n"
            b"2\r\nab\r\n0\r\nx-forwarded-for: 203.0.113.9\r\nx-other: 1\r\n\r\n"
            b"GET /after HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n"
        )
        received = read_until_closed(sock)
    assert received.count(b"HTTP/1.1 200 ") == 2
    assert b"host,transfer-encoding" in received
    assert b"x-forwarded-for" not in received
    assert b"x-other" not in received
    assert received.endswith(b"/after")


def request_and_answer(path: int, padding: int, body: bytes | None) -> tuple[bytes, bytes]:
    """A GET of `/p<path>` with `padding` bytes of header, answered with its path, or a POST
    of `body` to `/echo`."""
    if body is None:
        target = b"/p%d" % path
        return b"GET %s HTTP/1.1\r\nhost: x\r\nx-padding: %s\r\n\r\n" % (
            target,
            b"a" * padding,
        ), target
    head = b"POST /echo HTTP/1.1\r\nhost: x\r\ncontent-length: %d\r\n\r\n" % len(body)
    return head + body, body


#: More requests than are queued before reading waits, in more than one of the parser's
#: slices (FEED_BYTES) of a read: some wait as bytes, and must be parsed as answers go.
MANY_SMALL = [(i, 200, None) for i in range(3 * MAX_QUEUED)]


@settings(max_examples=15, deadline=None)
@given(
    requests=st.lists(
        st.tuples(
            st.integers(0, 10**6),
            st.integers(0, 400),
            st.none() | st.binary(max_size=20_000).map(lambda b: b.replace(b"HTTP", b"h")),
        ),
        min_size=1,
        max_size=3 * MAX_QUEUED,
    ),
    writes=st.integers(1, 8),
)
@example(requests=MANY_SMALL, writes=1)
def test_pipelined_requests_are_all_answered_in_order(
    port: int, requests: list[tuple[int, int, bytes | None]], writes: int
) -> None:
    # However many are sent at once (more than are queued before reading waits), and however
    # the bytes are split between writes, with bodies that cross the parser's slices.
    pairs = [request_and_answer(*request) for request in requests]
    sent = b"".join(request for request, _ in pairs)
    step = -(-len(sent) // writes)
    with connect(port) as sock:
        for start in range(0, len(sent), step):
            sock.sendall(sent[start : start + step])
        sock.shutdown(socket.SHUT_WR)
        received = read_until_closed(sock)
    answers = []
    while received:
        head, _, rest = received.partition(b"\r\n\r\n")
        length = int(head.lower().split(b"content-length: ", 1)[1].split(b"\r\n", 1)[0])
        answers.append(rest[:length])
        received = rest[length:]
    assert answers == [answer for _, answer in pairs]

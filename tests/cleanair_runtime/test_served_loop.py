"""What a served request costs the event loop (`support.loop_counts`), under a real uvicorn
with `cleanair serve`'s protocol (`connection_deadlines.DeadlineProtocol`): no timer, one
task and one `send` a request, a score included; and what the protocol does with fewer of
them still holds (the keep-alive closes an idle connection, a head is never lost or held
back from a stream, a shutdown waits for a running request)."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from cleanair_core import CleanAir
from cleanair_http.app import create_app, with_access_log
from cleanair_runtime.composition.settings import Settings
from cleanair_runtime.processes.connection_deadlines import DeadlineProtocol, with_deadlines
from support.loop_counts import READ_TIMEOUT_S, CountedServer, counted_server, exchange, per_request

#: Requests counted a test: enough that one-offs (the server's 0.1 s tick) stay below 0.1.
REQUESTS = 60
PROTOCOL = with_deadlines(10.0, 30.0, 30.0)


def score_request(token: str) -> bytes:
    body = json.dumps({"lat": 60.17, "lon": 24.94}).encode()
    return (
        f"POST /v1/airquality/score HTTP/1.1\r\nhost: test\r\n"
        f"authorization: Bearer {token}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\n\r\n"
    ).encode() + body


@pytest.fixture
def served_app(core: CleanAir) -> Iterator[tuple[CountedServer, str]]:
    """The app as `cleanair serve` serves it (access log, metrics), and a caller's token."""
    core.add_user("alice")
    token = core.redeem_pairing_code(core.create_pairing_code("alice"), "phone", "127.0.0.1")
    app = with_access_log(create_app(core, Settings(plan_workers=0, metrics="on")))
    with counted_server(app, http=PROTOCOL, server_header=False) as server:
        yield server, token.token


def ok(status: int, head: bytes, body: bytes) -> None:
    assert status == 200, body


def test_a_served_score_costs_one_task_one_send_and_no_timer(
    served_app: tuple[CountedServer, str],
) -> None:
    server, token = served_app
    counts = per_request(server, score_request(token), REQUESTS, check=ok)
    # uvicorn wrote the head and the body apart, and made and cancelled a keep-alive timer
    # for every answer: 2 sends and 1 timer a request before.
    assert counts["sends"] == 1
    assert counts["timers"] < 0.1
    assert counts["timers_cancelled"] < 0.1
    # The request's own task, and at most one of the SQLite writes' group commit: a task the
    # HTTP layer made per request (a `receive` watch, a log hand-off) would make it 3.
    assert counts["tasks"] <= 2


def test_a_probe_costs_one_callback_one_task_and_one_send(
    served_app: tuple[CountedServer, str],
) -> None:
    """The request read makes its task, whose one step answers it. uvicorn's done callback
    (the task out of the server's set) was a second callback, at times a pass of the loop of
    its own: about 2.0 callbacks and 2.3 passes a probe before, 1.0 and 2.0 now."""
    server, _ = served_app
    request = b"GET /livez HTTP/1.1\r\nhost: test\r\n\r\n"
    counts = per_request(server, request, REQUESTS, check=ok)
    assert counts["tasks"] == 1
    assert counts["sends"] == 1
    assert counts["timers"] < 0.1
    assert counts["callbacks"] < 1.5
    assert counts["iterations"] < 2.5


# -- the protocol's behaviour with fewer timers, tasks and writes -------------------------------

#: Set by `/stream` once its head is sent; `/stream`'s body waits for `RELEASE`.
RELEASE = threading.Event()


async def small_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """`/stream` a chunked answer whose body waits, `/fail` raises after its head (with a
    length), `/slow` answers after `RELEASE`, anything else a small JSON answer."""
    if scope["type"] != "http":
        return
    path = scope["path"]
    if path == "/stream":
        await send({"type": "http.response.start", "status": 200, "headers": []})
        while not RELEASE.is_set():
            await asyncio.sleep(0.01)
        await send({"type": "http.response.body", "body": b"late", "more_body": False})
        return
    if path == "/fail":
        await send(
            {"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"9")]}
        )
        raise RuntimeError("after the head")
    if path == "/slow":
        while not RELEASE.is_set():
            await asyncio.sleep(0.01)
    body = b'{"ok":true}'
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"application/json"), (b"content-length", b"11")],
        }
    )
    await send({"type": "http.response.body", "body": body, "more_body": False})


@pytest.fixture
def release() -> Iterator[threading.Event]:
    RELEASE.clear()
    yield RELEASE
    RELEASE.set()


def connected(server: CountedServer) -> socket.socket:
    return socket.create_connection(("127.0.0.1", server.port), timeout=READ_TIMEOUT_S)


def read_until_closed(conn: socket.socket) -> bytes:
    received = b""
    while chunk := conn.recv(65536):
        received += chunk
    return received


def test_an_idle_kept_alive_connection_is_still_closed_after_the_keep_alive() -> None:
    with (
        counted_server(small_app, http=PROTOCOL, timeout_keep_alive=0.3) as server,
        connected(server) as conn,
    ):
        for _ in range(3):  # the one timer is moved on by each answer, then fires
            assert exchange(conn, b"GET /a HTTP/1.1\r\nhost: t\r\n\r\n")[0] == 200
        assert read_until_closed(conn) == b""  # closed by the server, not the timeout


class FakeLoop:
    """The loop as the keep-alive sees it: a clock the test moves and the timers set."""

    _clock_resolution = 1e-9

    def __init__(self) -> None:
        self.now = 0.0
        self.timers: list[tuple[float, Any]] = []

    def time(self) -> float:
        return self.now

    def get_debug(self) -> bool:
        return False

    def call_at(self, when: float, callback: Any) -> asyncio.TimerHandle:
        self.timers.append((when, callback))
        return asyncio.TimerHandle(when, callback, (), self)  # type: ignore[arg-type]

    def fire(self) -> None:
        when, callback = self.timers.pop(0)
        self.now = max(self.now, when)
        callback()


class FakeTransport:
    closed = False

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def get_write_buffer_size(self) -> int:
        return 0


def keep_alive_protocol(loop: FakeLoop) -> tuple[DeadlineProtocol, FakeTransport]:
    protocol = DeadlineProtocol.__new__(DeadlineProtocol)
    transport = FakeTransport()
    protocol.loop = loop  # type: ignore[assignment]
    protocol.transport = transport  # type: ignore[assignment]
    protocol.timeout_keep_alive = 5
    return protocol, transport


def test_the_keep_alive_runs_from_the_last_answer_with_one_timer() -> None:
    loop = FakeLoop()
    protocol, transport = keep_alive_protocol(loop)
    protocol._arm_keep_alive()  # an answer at 0: due at 5
    loop.now = 3.0
    protocol._unset_keepalive_if_required()  # a request read at 3
    protocol._arm_keep_alive()  # and answered: due at 8, no new timer
    assert len(loop.timers) == 1
    loop.fire()  # at 5: early, moved on
    assert not transport.closed
    assert [when for when, _ in loop.timers] == [8.0]
    loop.fire()
    assert transport.closed


def test_the_keep_alive_timer_finds_nothing_to_do_while_a_request_runs() -> None:
    loop = FakeLoop()
    protocol, transport = keep_alive_protocol(loop)
    protocol._arm_keep_alive()
    protocol._unset_keepalive_if_required()  # a request came and is being answered
    loop.fire()
    assert not transport.closed
    assert loop.timers == []  # the next answer arms one again


def test_a_streamed_answer_sends_its_head_before_its_body(release: threading.Event) -> None:
    with counted_server(small_app, http=PROTOCOL) as server, connected(server) as conn:
        conn.sendall(b"GET /stream HTTP/1.1\r\nhost: t\r\n\r\n")
        head = b""
        while b"\r\n\r\n" not in head:
            head += conn.recv(65536)  # the body waits for `release`: the head alone
        assert head.startswith(b"HTTP/1.1 200 OK\r\n")
        assert b"transfer-encoding: chunked" in head
        release.set()
        rest = head.partition(b"\r\n\r\n")[2]
        while not rest.endswith(b"0\r\n\r\n"):
            rest += conn.recv(65536)
        assert rest == b"4\r\nlate\r\n0\r\n\r\n"


def test_a_head_held_for_its_body_is_sent_when_the_app_fails_after_it() -> None:
    """uvicorn closes the connection: the client gets the head it had, as before."""
    with counted_server(small_app, http=PROTOCOL) as server, connected(server) as conn:
        conn.sendall(b"GET /fail HTTP/1.1\r\nhost: t\r\n\r\n")
        received = read_until_closed(conn)
    assert received.startswith(b"HTTP/1.1 200 OK\r\n")
    assert received.endswith(b"content-length: 9\r\n\r\n")


def test_a_shutdown_still_waits_for_a_running_request(release: threading.Event) -> None:
    with counted_server(small_app, http=PROTOCOL) as server, connected(server) as conn:
        conn.sendall(b"GET /slow HTTP/1.1\r\nhost: t\r\n\r\n")
        waited = threading.Event()
        for _ in range(int(READ_TIMEOUT_S * 100)):  # until its task runs: bounded
            if server.running_requests():
                break
            waited.wait(0.01)
        server.stop()  # as SIGTERM: the request's task keeps the server up
        assert server.running_requests() == 1
        release.set()
        received = read_until_closed(conn)
    assert received.startswith(b"HTTP/1.1 200 OK\r\n")
    assert received.endswith(b'{"ok":true}')

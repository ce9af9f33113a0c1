"""What a served request costs the event loop: loop iterations, callbacks, timers, tasks and
socket writes, counted on a real uvicorn serving an app in a thread of its own.

The figures say where a served request's "event loop and sockets" time goes: each loop
iteration is a selector poll and a pass of asyncio's Python loop, each callback a handle run,
each timer a heap push (and its cancellation a heap entry left behind), each task a coroutine
driven step by step through callbacks, each write a `send` system call. The client is a
plain blocking socket in the calling thread, so nothing of it runs on the server's loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, fields
from typing import Any

import uvicorn

from cleanair_runtime.processes.server import listening_socket

#: How long a read from the server waits at most: generous, the machine is shared.
READ_TIMEOUT_S = 60.0


@dataclass
class LoopCounts:
    """Events on one event loop, counted while it serves."""

    iterations: int = 0  # `_run_once`: one selector poll and one pass over the ready queue
    callbacks: int = 0  # handles made ready now (`call_soon`, `call_soon_threadsafe`)
    timers: int = 0  # handles scheduled for later (`call_later`, `call_at`), sleeps aside
    sleeps: int = 0  # of them, `asyncio.sleep`s (uvicorn's server ticks every 0.1 s, say)
    timers_cancelled: int = 0  # scheduled timers (sleeps aside) cancelled before they ran
    tasks: int = 0  # tasks created (`create_task`, `ensure_future`)
    sends: int = 0  # `send`/`sendmsg` calls on the server's side of a connection

    def copy(self) -> LoopCounts:
        return LoopCounts(**{f.name: getattr(self, f.name) for f in fields(self)})

    def per(self, since: LoopCounts, n: int) -> dict[str, float]:
        """Each figure's growth since `since`, per one of `n` requests."""
        return {f.name: (getattr(self, f.name) - getattr(since, f.name)) / n for f in fields(self)}


def instrument(loop: asyncio.AbstractEventLoop, counts: LoopCounts, port: int) -> None:
    """Count `loop`'s events into `counts` (sends: of sockets whose local port is `port`)."""
    base: Any = loop
    run_once = base._run_once
    call_soon = base._call_soon
    call_at = base.call_at
    create_task = base.create_task
    timer_cancelled = base._timer_handle_cancelled

    def counted_run_once() -> None:
        counts.iterations += 1
        run_once()

    def counted_call_soon(*args: Any, **kwargs: Any) -> Any:
        counts.callbacks += 1
        return call_soon(*args, **kwargs)

    def counted_call_at(when: float, callback: Any, *args: Any, **kwargs: Any) -> Any:
        if callback is _SLEEP_DONE:
            counts.sleeps += 1
        else:
            counts.timers += 1
        return call_at(when, callback, *args, **kwargs)

    def counted_create_task(*args: Any, **kwargs: Any) -> Any:
        counts.tasks += 1
        return create_task(*args, **kwargs)

    def counted_timer_cancelled(handle: Any) -> None:
        if getattr(handle, "_callback", None) is not _SLEEP_DONE:
            counts.timers_cancelled += 1
        timer_cancelled(handle)

    base._run_once = counted_run_once
    base._call_soon = counted_call_soon
    base.call_at = counted_call_at
    base.create_task = counted_create_task
    base._timer_handle_cancelled = counted_timer_cancelled
    _count_sends(counts, port)


#: What `asyncio.sleep` schedules (a private name of asyncio's, as `_run_once` is).
_SLEEP_DONE = getattr(asyncio.futures, "_set_result_unless_cancelled", None)

_SEND_COUNTERS: list[tuple[LoopCounts, int]] = []


def _count_sends(counts: LoopCounts, port: int) -> None:
    """Wrap `socket.socket.send` and `sendmsg` once, counting per registered server port."""
    _SEND_COUNTERS.append((counts, port))
    if getattr(socket.socket, "_counted", False):
        return
    send, sendmsg = socket.socket.send, socket.socket.sendmsg

    def tally(sock: socket.socket) -> None:
        if sock.family not in (socket.AF_INET, socket.AF_INET6):
            return  # the loop's own wake-up pipe, say
        try:
            local = sock.getsockname()[1]
        except OSError:
            return
        for counted, server_port in _SEND_COUNTERS:
            if local == server_port:
                counted.sends += 1

    def counted_send(self: socket.socket, *args: Any) -> int:
        tally(self)
        return send(self, *args)

    def counted_sendmsg(self: socket.socket, *args: Any) -> int:
        tally(self)
        return sendmsg(self, *args)

    socket.socket.send = counted_send  # type: ignore[method-assign,assignment]
    socket.socket.sendmsg = counted_sendmsg  # type: ignore[method-assign,assignment]
    socket.socket._counted = True  # type: ignore[attr-defined]


@dataclass
class CountedServer:
    """A uvicorn server on a thread of its own, its loop counted."""

    port: int
    counts: LoopCounts
    loop: asyncio.AbstractEventLoop
    server: uvicorn.Server

    def running_requests(self) -> int:
        """Requests whose task has not ended (what a shutdown waits for)."""
        return len(self.server.server_state.tasks)

    def stop(self) -> None:
        """Begin a graceful shutdown, as SIGTERM does."""
        self.server.should_exit = True

    def settled(self) -> LoopCounts:
        """The counts once the loop has run everything made ready so far (the work a
        response leaves behind it, such as starting the next request's wait)."""
        done = threading.Event()
        for _ in range(3):  # three passes: a callback's own callbacks, and theirs
            done.clear()
            self.loop.call_soon_threadsafe(done.set)
            if not done.wait(READ_TIMEOUT_S):
                raise TimeoutError("the server's loop did not settle")
        return self.counts.copy()


@contextlib.contextmanager
def counted_server(app: Any, **config: Any) -> Iterator[CountedServer]:
    """Serve `app` with uvicorn (`config`: more `uvicorn.Config` options, `http=` say) on a
    free loopback port, in a thread with its own counted loop, until the block ends."""
    # `cleanair serve`'s own socket: made with IPPROTO_TCP, so asyncio sets TCP_NODELAY on
    # its connections (without it an answer written in two parts waits for a delayed ACK).
    listening = listening_socket("127.0.0.1", 0)
    port = listening.getsockname()[1]
    counts = LoopCounts()
    loop = asyncio.new_event_loop()
    instrument(loop, counts, port)
    server = uvicorn.Server(
        uvicorn.Config(app, log_config=None, access_log=False, lifespan="on", **config)
    )

    def run() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(server.serve(sockets=[listening]))

    thread = threading.Thread(target=run, name="counted-server", daemon=True)
    thread.start()
    try:
        for _ in range(int(READ_TIMEOUT_S * 10)):
            if server.started or not thread.is_alive():
                break
            threading.Event().wait(0.1)
        if not server.started:
            raise RuntimeError("the counted server did not start")
        yield CountedServer(port, counts, loop, server)
    finally:
        server.should_exit = True
        thread.join(READ_TIMEOUT_S)
        loop.close()
        listening.close()
        _SEND_COUNTERS[:] = [(c, p) for c, p in _SEND_COUNTERS if c is not counts]


def exchange(conn: socket.socket, request: bytes) -> tuple[int, bytes, bytes]:
    """Send `request` on a kept-alive connection and read its answer in full: status, head
    and body (the answer has a `content-length`)."""
    conn.sendall(request)
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = conn.recv(65536)
        if not chunk:
            raise ConnectionError("the server closed the connection")
        head += chunk
    head, _, body = head.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            raise ConnectionError("the server closed the connection")
        body += chunk
    return int(head.split(b" ", 2)[1]), head, body


def per_request(
    server: CountedServer,
    request: bytes,
    n: int,
    check: Callable[[int, bytes, bytes], None] | None = None,
) -> dict[str, float]:
    """The loop's events per request over `n` requests sent one after another on one
    kept-alive connection (after one not counted, which opens it); `check` sees each answer."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=READ_TIMEOUT_S) as conn:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        exchange(conn, request)
        before = server.settled()
        for _ in range(n):
            answer = exchange(conn, request)
            if check is not None:
                check(*answer)
        after = server.settled()
    # Each `settled` adds its own three callbacks and up to three iterations: take them out.
    figures = after.per(before, n)
    figures["callbacks"] -= 3 / n
    return figures

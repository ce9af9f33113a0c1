"""Deadlines for a connection: reading a request's headers, then its body, and sending.

uvicorn times a connection out only between requests (its keep-alive timer). A client that
connects and sends nothing, or sends its headers or its body a byte now and then, holds the
connection, a file descriptor and a little memory for as long as it likes; a few hundred
such clients starve the server (slowloris). This protocol gives each request
`header_timeout` seconds from the connection's opening, or from the first byte of a
following request on a kept-alive connection, until its headers are complete, then
`body_timeout` seconds until its body is. A deadline is never extended by further bytes, so
trickling does not help. When one passes the connection is closed; an application still
waiting for the body sees `http.disconnect`.

A client that stops reading its responses (pipelining requests and never reading the
answers) fills the send buffers, and uvicorn, like asyncio's close, waits for them to drain
without end. So while writing is paused for a full buffer, and while a closing connection
still has data to send, `send_timeout` runs: past it the connection is aborted.

A client may half-close its socket once its request is sent (`shutdown(SHUT_WR)`): that
says it will send no more, not that it will read no more. uvicorn closed the connection at
that EOF, so an answer still being prepared was lost, though its work was done (a plan
submission, stored and charged, whose `request_id` never reached the client). Here every
request received in full before the EOF is answered, pipelined ones included, and the
connection closes after the last answer; an EOF with no request, or in the middle of one,
still closes it at once. `send_timeout` still bounds a client that never reads.

A client pipelining requests (sending them without waiting for the answers) is read only a
little ahead: uvicorn queued every request of each read (256 KiB) and read on after every
answer, so one connection sending 20 MB of `GET /livez` made the server hold half a million
queued requests, over a gigabyte. Here the parser is fed `FEED_BYTES` at a time, and once
`MAX_QUEUED` requests are queued behind the one being answered the rest of the read waits as
bytes, and reading waits too, until answers shorten the queue. A connection then holds at
most `MAX_QUEUED` queued requests and those of one slice more (a few hundred of the smallest,
under a MB), and one read not yet parsed.

A chunked body's trailers never join the request's headers (uvicorn appended them to the
very list the application reads, after it began): a trailer `X-Forwarded-For` would have
chosen the client's address. They are dropped, as a recipient may.

An answer given to an `Expect: 100-continue` request before its body was read in full
closes the connection: the client may never send that body (it was told not to wait), and
the next request would be read as it.

A refused request (a head over `MAX_HEAD_BYTES`, too much framing, bytes that are not HTTP)
is answered in the service's JSON error envelope (`{"detail": ...}`, contract section 7):
431 for the head, 400 otherwise, and the connection closed.

What a request costs the event loop is kept to what it needs (each pass of asyncio's loop is
a selector poll and tens of µs of Python): an answer with a `Content-Length` leaves in one
`send`, its head joined to its body (`_JoinedWrites`); the keep-alive timer is one timer a
connection, moved rather than cancelled and made again for every request
(`_arm_keep_alive`); and a request's task takes itself out of the server's set as it ends,
not through a done callback that costs a pass of the loop of its own (`_start_asgi_task`).
`tests/cleanair_runtime/test_served_loop.py` counts them.

A reverse proxy in front should enforce its own, tighter limits (docs/deployment.md); these
deadlines protect the server when it has none, or a misconfigured one.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from uvicorn.protocols.http.flow_control import FlowControl, service_unavailable
from uvicorn.protocols.http.httptools_impl import (
    STATUS_LINE,
    HttpToolsProtocol,
    RequestResponseCycle,
)

if TYPE_CHECKING:
    from uvicorn._types import ASGI3Application, ASGIReceiveCallable, ASGISendCallable, Scope

log = logging.getLogger("cleanair.server")

Phase = Literal["headers", "body"]

#: The most bytes a request's head (request line and headers) may take: h11's default, the
#: limit the service had before it parsed with httptools, which sets none of its own.
MAX_HEAD_BYTES = 16 * 1024
#: The most bytes of a chunked body's framing and trailers a request may send besides its
#: body: httptools buffers a trailer as it does a header. A body in chunks of 1 KiB up to
#: the 10 MB body limit takes about 70 KiB.
MAX_FRAMING_BYTES = 256 * 1024
#: The most requests queued behind the one being answered before reading waits: enough to
#: keep a pipelining client's answers flowing, each a couple of KB of the server's memory.
MAX_QUEUED = 32
#: The bytes handed to the parser at once: every request they hold is queued, so a read of
#: tiny pipelined requests is parsed a slice at a time, and the rest waits as bytes.
FEED_BYTES = 4096

HEAD_TOO_LARGE = "request head too large"
#: The status and detail of a refusal, by its reason; any other (malformed bytes, too much
#: framing) is a 400.
_REFUSALS = {HEAD_TOO_LARGE: (431, "Request header fields too large")}
_MALFORMED = (400, "Invalid HTTP request")


class _HeldFlow(FlowControl):
    """uvicorn's flow control, whose `resume_reading` waits while `held()`: uvicorn resumes
    reading after every answer and whenever an application asks for its body, whatever is
    still queued."""

    def __init__(self, transport: asyncio.Transport, held: Callable[[], bool]) -> None:
        super().__init__(transport)
        self._held = held

    def resume_reading(self) -> None:
        if not self._held():
            super().resume_reading()


class _Refused(Exception):
    """Raised in a parser callback: uvicorn then refuses the request (`send_400_response`)."""


class DeadlineProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with header, body and send deadlines (seconds; class
    attributes, since uvicorn builds the protocol itself: see `with_deadlines`) and bounds on
    a request's head (`MAX_HEAD_BYTES`) and on its body's framing (`MAX_FRAMING_BYTES`): past
    them, 431 or 400 and the connection closed, once the answers owed to earlier requests are
    sent.

    The deadlines are the client's: they run while the server waits on it, not while it
    waits on the server (a pipelined request read behind one being answered waits for that
    answer before its own deadline starts, as it did when h11 left it unread)."""

    header_timeout: float = 10.0
    body_timeout: float = 30.0
    send_timeout: float = 30.0

    _deadline: asyncio.TimerHandle | None = None
    _phase: Phase | None = None
    _send_deadline: asyncio.TimerHandle | None = None
    #: The client has half-closed: no request will follow the ones already received.
    _client_done_sending = False
    #: Between a request's first byte and its last.
    _in_request = False
    #: The request under way has its head complete (its body, if any, is being read).
    _head_done = False
    #: Bytes read wholly inside the head under way, then wholly inside its body's framing.
    _head_bytes = 0
    _framing_bytes = 0
    #: A request began within the bytes being read, and the body bytes among them.
    _began = False
    _body_read = 0
    #: Requests received in full whose answers are not complete.
    _owed = 0
    #: Why the request under way is refused (the INFO line), and whether its 400 waits for
    #: the answers owed before it.
    _refusal: str | None = None
    _refuse_once_answered = False
    #: Bytes read but not yet parsed: they wait for the queue of requests to shorten.
    _unparsed = b""
    #: The keep-alive of an `Expect: 100-continue` request, given back once its body is read
    #: before its answer begins; until then its answer closes the connection.
    _keep_alive_once_read = False
    _shutting_down = False
    #: When the keep-alive runs out (loop time), while it runs; and the one timer that checks
    #: it, which may be set earlier than that: it is moved on when it fires early.
    _keep_alive_at: float | None = None
    _keep_alive_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.flow = _HeldFlow(transport, self._reading_held)
        # Before the first request the client owes its headers from the start.
        self._arm("headers", self.header_timeout)

    def _reading_held(self) -> bool:
        """Whether reading waits: requests are queued behind the one being answered (read on,
        and every request in the read would be queued too), or a client is being refused."""
        return bool(self.pipeline) or bool(self._unparsed) or self._refuse_once_answered

    def data_received(self, data: bytes) -> None:
        if self._refuse_once_answered:  # nothing more is read from a client being refused
            self.flow.pause_reading()
            return
        if self._unparsed:  # read while bytes wait: they come first
            self._unparsed += data
            self.flow.pause_reading()
            return
        self._parse(data)

    def _parse(self, data: bytes) -> None:
        """Parse `data` a slice at a time, until the queue is full: the rest then waits, and
        so does reading."""
        for start in range(0, len(data), FEED_BYTES):
            if len(self.pipeline) >= MAX_QUEUED:
                self._unparsed = data[start:]
                self.flow.pause_reading()
                return
            self._parse_slice(data[start : start + FEED_BYTES])
            if self.transport.is_closing() or self._refuse_once_answered:
                return

    def _parse_slice(self, data: bytes) -> None:
        self._began = False
        self._body_read = 0
        after_head = self._in_request and self._head_done
        super().data_received(data)
        if self.transport.is_closing():
            self._disarm()
            return
        # httptools buffers a header (or a trailer) until it is complete, without a bound:
        # count the bytes read wholly inside a head, or after it besides the body (not those
        # of the read where a request began, so a burst of pipelined requests is never taken
        # for one head), which bounds what it holds by one read more.
        if self._in_request and not self._began:
            if not self._head_done:
                self._head_bytes += len(data)
                if self._head_bytes > MAX_HEAD_BYTES:
                    self._refuse(HEAD_TOO_LARGE)
                    return
            elif after_head:
                self._framing_bytes += len(data) - self._body_read
                if self._framing_bytes > MAX_FRAMING_BYTES:
                    self._refuse("request body framing too large")
                    return
        if not self._in_request and self._owed <= 0 and self.cycle is not None:
            # Bytes between requests that begin none (line breaks, say): the next request's
            # headers are owed from now, as the keep-alive timer these bytes stopped was.
            self._arm("headers", self.header_timeout)
            return
        self._update_deadline()

    def _refuse(self, reason: str) -> None:
        self._refusal = reason
        self.send_400_response("Invalid HTTP request received.")

    def send_400_response(self, msg: str) -> None:
        """Refuse the request (`_write_refusal`) and close, once the answers owed are sent:
        written now, it would come before them. uvicorn calls it when parsing fails, with
        plain text `msg`, which the envelope replaces."""
        self._disarm()
        if self._refusal is not None and not self._refuse_once_answered:
            log.info(self._refusal)  # no client address, as "read timeout"
        if self._owed > 0:
            self._refuse_once_answered = True
            self.flow.pause_reading()  # nothing more is read from this client
            return
        self._write_refusal()
        self._sent_and_closing()

    def _write_refusal(self) -> None:
        """The refusal in the error envelope (as errors.py shapes the application's), then
        close: what follows a request that cannot be parsed cannot be either."""
        status, detail = _REFUSALS.get(self._refusal or "", _MALFORMED)
        body = json.dumps({"detail": detail}, separators=(",", ":")).encode()
        content = [STATUS_LINE[status]]
        for name, value in self.server_state.default_headers:
            content += [name, b": ", value, b"\r\n"]
        content += [
            b"content-type: application/json\r\n",
            b"content-length: %d\r\n" % len(body),
            b"connection: close\r\n\r\n",
            body,
        ]
        self.transport.write(b"".join(content))
        self.transport.close()

    # Parser callbacks: where the request under way is.
    def on_message_begin(self) -> None:
        self._in_request = True
        self._head_done = False
        self._head_bytes = 0
        self._framing_bytes = 0
        self._began = True
        super().on_message_begin()

    def on_headers_complete(self) -> None:
        self._head_done = True
        # The head read in one or two reads was never counted (`data_received`): its size.
        size = len(self.url) + sum(len(name) + len(value) + 4 for name, value in self.headers)
        if size > MAX_HEAD_BYTES:
            self._refusal = HEAD_TOO_LARGE
            raise _Refused
        super().on_headers_complete()
        self._keep_alive_once_read = False
        cycle = self.cycle
        if cycle is not None and cycle.scope is self.scope:
            cycle.transport = _JoinedWrites(self.transport, cycle)  # type: ignore[assignment]
        if self.expect_100_continue and cycle is not None and cycle.scope is self.scope:
            # Answered before its body is read, the client may never send it, or send it
            # after all: either way the connection cannot go on. `on_message_complete` gives
            # the keep-alive back.
            self._keep_alive_once_read = cycle.keep_alive
            cycle.keep_alive = False

    def _start_asgi_task(self, cycle: RequestResponseCycle, app: ASGI3Application) -> None:
        # uvicorn answers a request over the connection cap (`limit_concurrency`,
        # CLEANAIR_MAX_CONNECTIONS) in plain text: here in the error envelope.
        if app is service_unavailable:
            app = _over_capacity
        if self.config.reset_contextvars:
            super()._start_asgi_task(cycle, app)
            return
        # As uvicorn's, but the task leaves `tasks` (what a shutdown waits for) as its last
        # step, where uvicorn's done callback took a pass of the loop of its own.
        task = self.loop.create_task(_run_asgi(cycle, app, self.tasks))
        self.tasks.add(task)

    def on_header(self, name: bytes, value: bytes) -> None:
        if self._head_done:
            return  # a trailer: the request's headers are those of its head, read before it
        super().on_header(name, value)

    def on_body(self, body: bytes) -> None:
        self._body_read += len(body)
        super().on_body(body)

    def on_message_complete(self) -> None:
        self._in_request = False
        self._owed += 1
        cycle = self.cycle
        if self._keep_alive_once_read and not cycle.response_started and not self._shutting_down:
            cycle.keep_alive = True  # the body was read in full: the next request is a request
        self._keep_alive_once_read = False
        super().on_message_complete()

    def on_response_complete(self) -> None:
        # Pipelined requests already read start here, one at a time.
        self._owed -= 1
        if self._refuse_once_answered and self._owed <= 0:
            # What is left queued is the refused request itself (its head read, its body
            # refused): it never runs.
            self.pipeline.clear()
            self._unparsed = b""
            self._write_refusal()
            self._sent_and_closing()
            return
        self._next_or_keep_alive()  # starts the next request queued, if any
        if self.transport.is_closing():  # a `Connection: close` answer, say
            self._sent_and_closing()
            return
        if self._unparsed and len(self.pipeline) < MAX_QUEUED:
            unparsed, self._unparsed = self._unparsed, b""
            self._parse(unparsed)
            if self.transport.is_closing() or self._refuse_once_answered:
                return
        self.flow.resume_reading()  # unless still held
        if self._owed > 0:
            return
        if self._client_done_sending:
            self.transport.close()  # the last answer is written; nothing more can come
            self._sent_and_closing()
            return
        self._update_deadline()

    def _next_or_keep_alive(self) -> None:
        """uvicorn's `on_response_complete`, with the keep-alive timer moved (`_arm_keep_alive`)
        rather than made anew."""
        self.server_state.total_requests += 1
        if self.transport.is_closing():
            return
        self._unset_keepalive_if_required()
        self.flow.resume_reading()
        if self.pipeline:
            cycle, app = self.pipeline.pop()
            self._start_asgi_task(cycle, app)
        else:
            self._arm_keep_alive()

    def _unset_keepalive_if_required(self) -> None:
        # uvicorn cancels its timer at every read and makes a new one after every answer:
        # here the one timer stays, and finds nothing to do if the keep-alive stopped.
        self._keep_alive_at = None

    def _arm_keep_alive(self) -> None:
        """The keep-alive runs from now (`timeout_keep_alive`), as uvicorn's timer would."""
        self._keep_alive_at = self.loop.time() + self.timeout_keep_alive
        if self._keep_alive_timer is None:
            self._keep_alive_timer = self.loop.call_at(self._keep_alive_at, self._keep_alive_due)

    def _keep_alive_due(self) -> None:
        self._keep_alive_timer = None
        at = self._keep_alive_at
        if at is None:
            return  # a request came: the next answer arms it again
        # A timer runs up to the clock's resolution early (asyncio's `_run_once`).
        if self.loop.time() + self._clock_resolution() < at:
            self._keep_alive_timer = self.loop.call_at(at, self._keep_alive_due)
            return
        self._keep_alive_at = None
        self.timeout_keep_alive_handler()

    def _clock_resolution(self) -> float:
        resolution: float = getattr(self.loop, "_clock_resolution", 0.0)
        return resolution

    def _sent_and_closing(self) -> None:
        """The transport is closing: close() waits for the buffer to be read, not for ever."""
        self._disarm()
        if self.transport.get_write_buffer_size():
            self._arm_send()

    def eof_received(self) -> bool | None:  # type: ignore[override]  # asyncio allows a bool
        """Keep the connection open for the answers still owed (True), else close it (None:
        asyncio then closes the transport, as uvicorn always had it)."""
        self._client_done_sending = True
        if self._owed > 0:
            self._disarm()  # no deadline for a request that cannot come, or end
            return True
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self._unparsed = b""
        self._disarm()
        self._disarm_send()
        self._keep_alive_at = None
        if self._keep_alive_timer is not None:
            self._keep_alive_timer.cancel()
            self._keep_alive_timer = None
        super().connection_lost(exc)

    def pause_writing(self) -> None:
        super().pause_writing()
        self._arm_send()

    def resume_writing(self) -> None:
        super().resume_writing()
        self._disarm_send()

    def timeout_keep_alive_handler(self) -> None:
        # close() waits for the buffered response to be read: not for ever.
        super().timeout_keep_alive_handler()
        if self.transport.get_write_buffer_size():
            self._arm_send()

    def shutdown(self) -> None:
        self._shutting_down = True  # no keep-alive is given back (`on_message_complete`)
        super().shutdown()
        if self.transport.is_closing() and self.transport.get_write_buffer_size():
            self._arm_send()

    def _arm_send(self) -> None:
        if self._send_deadline is None:
            self._send_deadline = self.loop.call_later(self.send_timeout, self._send_passed)

    def _disarm_send(self) -> None:
        if self._send_deadline is not None:
            self._send_deadline.cancel()
        self._send_deadline = None

    def _send_passed(self) -> None:
        self._send_deadline = None
        log.info("send timeout")
        self.transport.abort()  # close() would wait for the very buffer nobody reads

    def _update_deadline(self) -> None:
        if self.transport.is_closing() or self._owed > 0:
            self._disarm()  # the client waits on the server: its own deadlines wait too
        elif self._in_request:
            if self._head_done:
                self._arm("body", self.body_timeout)
            else:
                self._arm("headers", self.header_timeout)
        elif self.cycle is not None:
            # Between requests (or while one is answered): uvicorn's keep-alive timer runs
            # until a byte of the next one arrives.
            self._disarm()

    def _arm(self, phase: Phase, timeout: float) -> None:
        if self._phase == phase:
            return  # never extended: a trickle of bytes must not keep the connection alive
        self._disarm()
        self._phase = phase
        self._deadline = self.loop.call_later(timeout, self._deadline_passed, phase)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
        self._deadline = None
        self._phase = None

    def _deadline_passed(self, phase: Phase) -> None:
        self._deadline = None
        self._phase = None
        if self.transport.is_closing():
            return
        # No client address: the access log has none either.
        log.info("read timeout", extra={"phase": phase})
        self.transport.close()
        self._sent_and_closing()


class _JoinedWrites:
    """The transport as one request's cycle writes to it: an answer's head, when its length
    is known, waits for the first bytes of its body and leaves with them in one `send`
    (uvicorn writes them apart: two system calls, and two TCP segments). Anything else, and a
    close, writes what waits first."""

    __slots__ = ("_cycle", "_head", "_head_seen", "_transport")

    def __init__(self, transport: asyncio.Transport, cycle: RequestResponseCycle) -> None:
        self._transport = transport
        self._cycle = cycle
        self._head: bytes | None = None
        self._head_seen = False

    def write(self, data: bytes) -> None:
        head = self._head
        if head is not None:
            self._head = None
            self._transport.write(head + data)
            return
        cycle = self._cycle
        if not self._head_seen and cycle.response_started:
            # The head: the first write once the answer began (a `100 Continue` comes
            # before). A chunked answer (a stream, whose first chunk may be long in coming)
            # sends its head at once.
            self._head_seen = True
            if cycle.chunked_encoding is False or cycle.chunked_encoding is None:
                self._head = data
                return
        self._transport.write(data)

    def _release(self) -> None:
        head = self._head
        if head is not None:
            self._head = None
            self._transport.write(head)

    def close(self) -> None:
        self._release()
        self._transport.close()

    def abort(self) -> None:
        self._head = None
        self._transport.abort()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


async def _run_asgi(
    cycle: RequestResponseCycle, app: ASGI3Application, tasks: set[asyncio.Task[None]]
) -> None:
    try:
        await cycle.run_asgi(app)
    finally:
        task = asyncio.current_task()
        if task is not None:
            tasks.discard(task)


def with_deadlines(
    header_timeout: float, body_timeout: float, send_timeout: float
) -> type[DeadlineProtocol]:
    """The protocol class to pass to uvicorn as `http=`, with these deadlines (seconds)."""
    headers, body, send = header_timeout, body_timeout, send_timeout

    class Configured(DeadlineProtocol):
        header_timeout = headers
        body_timeout = body
        send_timeout = send

    return Configured


_OVER_CAPACITY = json.dumps(
    {"detail": "The server is at its connection limit: try again shortly"}, separators=(",", ":")
).encode()


async def _over_capacity(_: Scope, __: ASGIReceiveCallable, send: ASGISendCallable) -> None:
    """uvicorn's answer over the connection cap, in the service's JSON error envelope."""
    await send(
        {
            "type": "http.response.start",
            "status": 503,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(_OVER_CAPACITY)).encode()),
                (b"retry-after", b"1"),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": _OVER_CAPACITY, "more_body": False})

"""How an API process of `serve --workers N` serves a listening socket it shares (where
SO_REUSEPORT does not spread connections: `test_slot_sockets`): one connection accepted a
wake-up, so a pool of connections opened together is spread over the processes, and the
socket's queue left as the command set it."""

from __future__ import annotations

import asyncio
import socket

from cleanair_runtime.processes.server import listening_socket
from cleanair_runtime.processes.shared_listening import LISTEN_QUEUE, served_listening

#: Connections waiting before the process starts serving: more than listen(1) lets queue.
WAITING = 16


def test_a_shared_socket_keeps_the_queue_the_command_set() -> None:
    listening = listening_socket("127.0.0.1", 0)
    served, backlog = served_listening(listening, shared_with_others=True)
    clients: list[socket.socket] = []
    try:
        served.listen(backlog)  # as asyncio does when it starts serving a socket
        port = listening.getsockname()[1]
        # None accepted: each waits in the queue. Had listen(1) taken, the third would time out.
        clients = [
            socket.create_connection(("127.0.0.1", port), timeout=30) for _ in range(WAITING)
        ]
        assert len(clients) == WAITING
    finally:
        for client in clients:
            client.close()
        served.close()
        listening.close()


def test_closing_the_served_socket_leaves_the_commands_open() -> None:
    listening = listening_socket("127.0.0.1", 0)
    served, _ = served_listening(listening, shared_with_others=True)
    served.close()
    try:
        port = listening.getsockname()[1]  # still open, still listening
        socket.create_connection(("127.0.0.1", port), timeout=30).close()
    finally:
        listening.close()


def test_a_socket_of_its_own_is_served_as_is_with_the_full_queue() -> None:
    listening = listening_socket("127.0.0.1", 0)
    try:
        assert served_listening(listening, shared_with_others=False) == (listening, LISTEN_QUEUE)
    finally:
        listening.close()


def passes_that_made_connections(shared_with_others: bool) -> list[int]:
    """Serve a listening socket as an API process would, with `WAITING` connections queued
    before it starts; the loop pass in which each connection was made."""
    listening = listening_socket("127.0.0.1", 0)
    port = listening.getsockname()[1]
    clients = [socket.create_connection(("127.0.0.1", port), timeout=30) for _ in range(WAITING)]
    made_in: list[int] = []

    async def serve() -> None:
        loop = asyncio.get_running_loop()
        passes = 0

        def count_pass() -> None:  # once a pass of the loop
            nonlocal passes
            passes += 1
            if len(made_in) < WAITING:
                loop.call_soon(count_pass)

        class Made(asyncio.Protocol):
            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                made_in.append(passes)

        served, backlog = served_listening(listening, shared_with_others=shared_with_others)
        server = await loop.create_server(Made, sock=served, backlog=backlog)
        loop.call_soon(count_pass)
        while len(made_in) < WAITING:
            await asyncio.sleep(0)
        server.close()
        await server.wait_closed()

    try:
        asyncio.run(serve())
    finally:
        for client in clients:
            client.close()
        listening.close()
    return made_in


def test_a_shared_socket_is_accepted_one_connection_a_wakeup() -> None:
    # So a process that is handling one leaves the next to another process that is idle:
    # accepting all that wait at once, the first process awake took a whole pool.
    made_in = passes_that_made_connections(shared_with_others=True)
    assert len(set(made_in)) == WAITING, made_in


def test_a_socket_of_its_own_is_accepted_all_at_once() -> None:
    # Nothing to share with: the queue is taken in one pass, as asyncio does by default.
    made_in = passes_that_made_connections(shared_with_others=False)
    assert len(set(made_in)) == 1, made_in

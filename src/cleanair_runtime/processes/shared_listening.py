"""The listening socket the API processes of `serve --workers N` share, as each serves it.

asyncio accepts up to `backlog` connections each time a listening socket is readable, and
uvicorn passes its backlog (2048): the process that woke first took every connection
waiting, so eight keep-alive connections opened together all went to one process and the
others served none of them (a reverse proxy's pool of upstream connections would do the
same; `bench.served_matrix` measured two API processes at 1.09x one). Each process now
accepts one connection a wake-up: while it handles that one, another that is idle takes the
next. asyncio also calls `listen(backlog)` again on a socket it starts serving, which on a
shared socket would set the queue of every process: that call is left to the command, which
made the socket (`server.listening_socket`).
"""

from __future__ import annotations

import os
import socket

#: The listening socket's queue of connections not yet accepted.
LISTEN_QUEUE = 2048
#: Connections an API process accepts each time the shared socket is readable.
ACCEPTS_PER_WAKEUP = 1


class SharedListening(socket.socket):
    """A listening socket served by several processes: its queue stays as its maker set it."""

    def listen(self, backlog: int = 0, /) -> None:
        """Leave the queue alone: it is the command's, for every process (see the module)."""


def served_listening(
    listening: socket.socket, *, shared_with_others: bool
) -> tuple[socket.socket, int]:
    """The socket this process hands uvicorn for `listening`, and the backlog its config gets
    (asyncio's accepts a wake-up, and the queue of a socket it listens on itself). Shared with
    other processes: a duplicate of `listening` whose `listen` leaves the queue alone (closing
    it leaves `listening` open), one connection a wake-up."""
    if not shared_with_others:
        return listening, LISTEN_QUEUE
    duplicate = SharedListening(
        listening.family, listening.type, listening.proto, fileno=os.dup(listening.fileno())
    )
    return duplicate, ACCEPTS_PER_WAKEUP

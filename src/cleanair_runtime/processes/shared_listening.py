"""The listening sockets of `serve --workers N`, and how each API process serves its own.

On Linux the command binds N sockets to the one address with `SO_REUSEPORT`, one per API
process slot, before it forks (`slot_sockets`): the kernel then hands each new connection to
one of them by a hash of its addresses, whichever processes happen to be running. On one
shared socket the first process awake took whatever waited, and a pool of eight keep-alive
connections opened together landed 8-0 or 6-2 on a busy machine (`bench.served_matrix`).
The command keeps every socket open for its whole life: while the API process of slot i is
dead, connections hashed to slot i wait in its queue (a socket whose last descriptor closes
resets its queue), and the replacement for slot i serves that socket and answers them. Each
API process closes the sockets of the other slots it inherited, so that nothing holds them
past the command's stop.

A socket of its own is served with asyncio's default: every waiting connection accepted a
wake-up, as no other process could take them. Where `SO_REUSEPORT` does not spread
connections (not Linux), the command keeps one socket for all, and each API process accepts
one connection a wake-up so that an idle one takes the next (`served_listening`). asyncio
also calls `listen(backlog)` again on a socket it starts serving, which on a shared socket
would set the queue of every process: that call is then left to the command.
"""

from __future__ import annotations

import os
import socket
import sys

import attrs

#: The listening socket's queue of connections not yet accepted (each slot's, with several).
LISTEN_QUEUE = 2048
#: Connections an API process accepts each time a socket it shares is readable.
ACCEPTS_PER_WAKEUP = 1
#: Whether the kernel spreads connections over sockets bound to one address. Linux's
#: SO_REUSEPORT does (by a hash of each connection's addresses); elsewhere the option may
#: exist without spreading (the BSDs, macOS: the last socket bound takes them all).
SPREADS_CONNECTIONS = sys.platform == "linux" and hasattr(socket, "SO_REUSEPORT")


def bound_socket(host: str, port: int, *, reuse_port: bool = False) -> socket.socket:
    """A TCP socket listening on `host:port`, inheritable; `reuse_port`: with `SO_REUSEPORT`,
    so that more such sockets of this user may bind the same address.

    Made with the protocol number IPPROTO_TCP, as asyncio's own listeners are: asyncio sets
    TCP_NODELAY on accepted connections only for such sockets (`socket.create_server` gives
    protocol 0), and without it every small response waits ~40 ms for a delayed ACK."""
    family, kind, protocol, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP
    )[0]
    sock = socket.socket(family, kind, protocol)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(address)
        sock.listen(LISTEN_QUEUE)
    except BaseException:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


@attrs.frozen
class Listening:
    """The command's listening sockets: one per API process slot, or one all share."""

    sockets: tuple[socket.socket, ...]
    #: The port they listen on (kept: in an API process, the other slots' are closed).
    port: int

    @property
    def per_slot(self) -> bool:
        """Each slot has a socket of its own (else all serve the one)."""
        return len(self.sockets) > 1

    def of_slot(self, index: int) -> socket.socket:
        """The socket the API process of slot `index` serves."""
        return self.sockets[index] if self.per_slot else self.sockets[0]

    def close_others(self, index: int) -> None:
        """In the API process of slot `index`: close the other slots' sockets it inherited."""
        for sock in self.sockets:
            if sock is not self.of_slot(index):
                sock.close()

    def close(self) -> None:
        for sock in self.sockets:
            sock.close()


def slot_sockets(host: str, port: int, workers: int) -> Listening:
    """The listening sockets for `workers` API processes on `host:port`: one each with
    `SO_REUSEPORT` where it spreads connections and `workers` > 1, else one for all.
    Raises OSError when the port is in use (or `host` no address of this machine)."""
    if workers < 2 or not SPREADS_CONNECTIONS:
        sock = bound_socket(host, port)
        return Listening((sock,), sock.getsockname()[1])
    # A plain bind first, closed at once: a port some socket already listens on is refused as
    # without SO_REUSEPORT. An unrelated program's socket would refuse the others anyway, but
    # another `serve` of this user (SO_REUSEPORT too) would be joined, and the two commands
    # would then share each other's connections.
    probe = bound_socket(host, port)
    port = probe.getsockname()[1]  # the one the system chose, for port 0
    probe.close()
    sockets: list[socket.socket] = []
    try:
        for _ in range(workers):
            sockets.append(bound_socket(host, port, reuse_port=True))
    except BaseException:
        for sock in sockets:
            sock.close()
        raise
    return Listening(tuple(sockets), port)


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
    it leaves `listening` open), one connection a wake-up. A socket of its own (alone, or its
    slot's): `listening` itself, every waiting connection a wake-up."""
    if not shared_with_others:
        return listening, LISTEN_QUEUE
    duplicate = SharedListening(
        listening.family, listening.type, listening.proto, fileno=os.dup(listening.fileno())
    )
    return duplicate, ACCEPTS_PER_WAKEUP

"""The listening sockets of `serve --workers N` (`shared_listening.slot_sockets`): on Linux
one per API process slot, bound to one port with SO_REUSEPORT, so that the kernel spreads
connections over the slots whichever processes run; one socket for all elsewhere, and for
one process exactly as before; a port already listened on refused either way."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from cleanair_runtime.cli import main
from cleanair_runtime.processes import shared_listening
from cleanair_runtime.processes.shared_listening import (
    LISTEN_QUEUE,
    bound_socket,
    served_listening,
    slot_sockets,
)

#: Connections opened to see both of two slots' queues get some: all on one has odds 2**-31.
CONNECTIONS = 32


def reuse_port(sock: socket.socket) -> int:
    return sock.getsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT)


def listens(sock: socket.socket) -> int:
    return sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN)


def test_n_api_processes_get_n_sockets_on_one_port_with_reuse_port() -> None:
    listening = slot_sockets("127.0.0.1", 0, 3)
    try:
        assert listening.per_slot
        assert len(listening.sockets) == 3
        assert len({sock.fileno() for sock in listening.sockets}) == 3
        assert {sock.getsockname() for sock in listening.sockets} == {("127.0.0.1", listening.port)}
        assert listening.port != 0
        assert all(reuse_port(sock) and listens(sock) for sock in listening.sockets)
        assert all(sock.get_inheritable() for sock in listening.sockets)
        # Made as asyncio's listeners are, so accepted connections get TCP_NODELAY.
        assert all(sock.proto == socket.IPPROTO_TCP for sock in listening.sockets)
        assert [listening.of_slot(i) for i in range(3)] == list(listening.sockets)
    finally:
        listening.close()


def test_one_api_process_gets_one_socket_as_before() -> None:
    listening = slot_sockets("127.0.0.1", 0, 1)
    try:
        assert not listening.per_slot
        (sock,) = listening.sockets
        assert not reuse_port(sock)
        assert listens(sock)
        assert listening.of_slot(0) is sock
    finally:
        listening.close()


def test_without_spreading_every_slot_shares_one_socket(monkeypatch: pytest.MonkeyPatch) -> None:
    # Not Linux: SO_REUSEPORT, where it exists, would not spread connections.
    monkeypatch.setattr(shared_listening, "SPREADS_CONNECTIONS", False)
    listening = slot_sockets("127.0.0.1", 0, 2)
    try:
        assert not listening.per_slot
        (sock,) = listening.sockets
        assert not reuse_port(sock)
        assert listening.of_slot(0) is listening.of_slot(1) is sock
    finally:
        listening.close()


def accepted_by_each(sockets: tuple[socket.socket, ...]) -> list[int]:
    """How many connections wait in each of `sockets`' queues (each accepted and closed)."""
    counts = []
    for sock in sockets:
        sock.setblocking(False)
        count = 0
        while True:
            try:
                accepted, _ = sock.accept()
            except BlockingIOError:
                break
            accepted.close()
            count += 1
        counts.append(count)
    return counts


def test_the_kernel_spreads_connections_over_the_slots() -> None:
    # No process accepts while they arrive: the kernel alone chose each one's slot (by its
    # addresses; each client here has a port of its own).
    listening = slot_sockets("127.0.0.1", 0, 2)
    clients: list[socket.socket] = []
    try:
        for _ in range(CONNECTIONS):
            clients.append(socket.create_connection(("127.0.0.1", listening.port), timeout=30))
        counts = accepted_by_each(listening.sockets)
        assert sum(counts) == CONNECTIONS
        assert all(counts), counts
    finally:
        for client in clients:
            client.close()
        listening.close()


def test_an_api_process_keeps_only_its_slots_socket() -> None:
    listening = slot_sockets("127.0.0.1", 0, 3)
    try:
        listening.close_others(1)
        assert [sock.fileno() == -1 for sock in listening.sockets] == [True, False, True]
    finally:
        listening.close()


def test_a_slots_socket_is_served_as_its_own() -> None:
    # Nobody else accepts on it: every waiting connection is taken a wake-up (asyncio's
    # default), with the full queue.
    listening = slot_sockets("127.0.0.1", 0, 2)
    try:
        sock = listening.of_slot(1)
        assert served_listening(sock, shared_with_others=False) == (sock, LISTEN_QUEUE)
    finally:
        listening.close()


@pytest.mark.parametrize("other_reuses_port", [False, True], ids=["plain", "reuse-port"])
def test_a_port_something_listens_on_is_refused(other_reuses_port: bool) -> None:
    # Plain: an unrelated program. With SO_REUSEPORT: another `serve --workers` of this
    # user, which the command would otherwise join, each taking a share of the other's
    # connections.
    with bound_socket("127.0.0.1", 0, reuse_port=other_reuses_port) as other:
        port = other.getsockname()[1]
        with pytest.raises(OSError, match="Address already in use"):
            slot_sockets("127.0.0.1", port, 2).close()


def test_serve_workers_on_a_port_another_serve_listens_on_is_one_line_and_exit_1(
    database: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # As test_server_socket's plain socket, for a socket with SO_REUSEPORT (another
    # `serve --workers`): refused, not joined.
    monkeypatch.setenv("CLEANAIR_METRICS", "off")  # see test_server_socket
    with bound_socket("127.0.0.1", 0, reuse_port=True) as other:
        port = other.getsockname()[1]
        status = main(["serve", "--port", str(port), "--workers", "2"])
    err = capsys.readouterr().err
    assert status == 1
    assert f"cleanair: cannot listen on 127.0.0.1:{port}: Address already in use" in err
    assert "Traceback" not in err

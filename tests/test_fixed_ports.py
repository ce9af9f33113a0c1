"""No test may listen on a fixed port: the README's own set-up runs `make run` (port 8000) in
one terminal and `make test` in another. The session fixture `developer_ports_busy` keeps
those ports taken for the whole session, whoever holds them."""

from __future__ import annotations

import socket

import pytest

from support.servers import DEVELOPER_PORTS


@pytest.mark.parametrize("port", DEVELOPER_PORTS)
def test_the_developer_ports_are_busy_for_every_test(port: int) -> None:
    with socket.socket() as sock, pytest.raises(OSError, match="in use"):
        sock.bind(("127.0.0.1", port))

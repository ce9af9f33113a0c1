"""The socket `serve --workers` shares: connections accepted on it get TCP_NODELAY."""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from cleanair_runtime.cli import main
from cleanair_runtime.processes.server import listening_socket


def test_connections_on_the_shared_socket_are_not_delayed_by_nagle() -> None:
    """Without TCP_NODELAY every small response waits ~40 ms for the client's delayed ACK;
    asyncio sets it only on sockets made with the TCP protocol number."""
    sock = listening_socket("127.0.0.1", 0)
    port = sock.getsockname()[1]
    assert sock.proto == socket.IPPROTO_TCP
    nodelay: list[int] = []

    class Probe(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            accepted = transport.get_extra_info("socket")
            nodelay.append(accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            transport.close()

    async def main() -> None:
        server = await asyncio.get_running_loop().create_server(Probe, sock=sock)
        async with server:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            while not nodelay:
                await asyncio.sleep(0)
            writer.close()

    asyncio.run(asyncio.wait_for(main(), timeout=10))
    assert nodelay[0] != 0


@pytest.fixture
def root_logging() -> Iterator[None]:
    """`serve` configures the root logger: put it back as it was for the tests after."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.mark.usefixtures("root_logging")
def test_serve_workers_on_a_port_in_use_is_one_line_and_exit_1(
    database: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # `serve --workers` in this test process, where earlier tests imported prometheus_client:
    # its figures could not be shared across the forks (the real command imports it later).
    monkeypatch.setenv("CLEANAIR_METRICS", "off")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        status = main(["serve", "--port", str(port), "--workers", "2"])
    err = capsys.readouterr().err
    assert status == 1
    assert f"cleanair: cannot listen on 127.0.0.1:{port}: Address already in use" in err
    assert "Traceback" not in err

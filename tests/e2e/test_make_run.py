"""End to end: `make run PORT=… HOST=…` serves there (README's "Two commands"), and a shell's
own HOST or PORT does not move it."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from support.servers import STARTUP_S, free_port, server_env

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).parents[2]


def test_make_run_serves_on_the_port_and_host_given(tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "make.log"
    # HOST and PORT in the environment, as a shell may have them: the command line wins.
    env = {**server_env(tmp_path), "HOST": "example.invalid", "PORT": "1"}
    with log.open("w") as output:
        make = subprocess.Popen(
            ["make", "--no-print-directory", "run", f"PORT={port}", "HOST=127.0.0.1"],
            cwd=ROOT,
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + STARTUP_S
        while True:  # bounded: until it answers there
            try:
                live = httpx.get(f"http://127.0.0.1:{port}/livez", timeout=1)
                break
            except httpx.TransportError:
                assert make.poll() is None, log.read_text()
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.1)
        assert live.status_code == 200
    finally:
        # Ctrl-C in the terminal: SIGINT to make and the server alike.
        os.killpg(make.pid, signal.SIGINT)
        make.wait(timeout=60)
    assert f"--port {port}" in log.read_text()
    assert f"API on http://127.0.0.1:{port}" in log.read_text()

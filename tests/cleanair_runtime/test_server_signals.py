"""The API process's server: a Ctrl-C and the command's SIGTERM that passes it on are one
stop, whichever arrives first; only a second Ctrl-C quits at once (skipping the shutdown
that hands plans back)."""

from __future__ import annotations

import signal

import pytest
import uvicorn

from cleanair_runtime.processes.server import _Server


async def app(scope: object, receive: object, send: object) -> None:
    raise AssertionError("never served")


def server() -> _Server:
    # No log_config: uvicorn's own would take its loggers off the root logger for the session.
    return _Server(uvicorn.Config(app, log_config=None), None)


@pytest.mark.parametrize(
    ("signals", "forced"),
    [
        ((signal.SIGINT, signal.SIGTERM), False),  # the Ctrl-C first, then the command's
        ((signal.SIGTERM, signal.SIGINT), False),  # the command's first: the same stop
        ((signal.SIGTERM,), False),
        ((signal.SIGINT, signal.SIGINT), True),  # Ctrl-C twice: quit now
        ((signal.SIGTERM, signal.SIGINT, signal.SIGINT), True),
    ],
)
def test_a_stop_forces_an_exit_only_on_a_second_ctrl_c(
    signals: tuple[signal.Signals, ...], forced: bool
) -> None:
    stopping = server()
    for signum in signals:
        stopping.handle_exit(signum, None)
    assert stopping.should_exit
    assert stopping.force_exit is forced

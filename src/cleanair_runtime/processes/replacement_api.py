"""A replacement API process of `cleanair serve --workers N`: a fresh interpreter that
serves on its slot's listening socket of the command (`api_processes.spawn` starts it).

Apart from `api_processes` because it runs `server.serve_on`, and the server imports
`api_processes` to watch its API processes: kept in one module, the two imported each other.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
from collections.abc import Sequence
from types import FrameType

from cleanair_runtime.composition.settings import Settings
from cleanair_runtime.logs import configure_logging, stop_logging
from cleanair_runtime.processes.plan_processes import WakePipe, die_with, plans_in_processes
from cleanair_runtime.processes.server import serve_on
from cleanair_runtime.terminal import escape_nonprintable


def _interrupted(signum: int, _: FrameType | None) -> None:
    raise KeyboardInterrupt


def main(argv: Sequence[str]) -> int:
    """A replacement API process: `argv` is the command's pid, the host, the listening
    socket's descriptor, the wake pipe's writing end (-1: none), its slot, and whether that
    socket is `shared` by every API process or the slot's `own`; the settings are the
    environment's, as the command's were. Its exit status."""
    # As a forked API process: uvicorn shuts down on SIGTERM, then raises it again under the
    # handler it found, which ends the process as SIGINT does (status 0).
    signal.signal(signal.SIGTERM, _interrupted)
    status = 1
    try:
        command, host = int(argv[0]), argv[1]
        listen_fd, write_fd, index = int(argv[2]), int(argv[3]), int(argv[4])
        shared = argv[5] == "shared"
        die_with(command, signal.SIGTERM)
        settings = Settings.from_env()
        configure_logging(settings.log_level, settings.access_log, settings.log_file)

        listening = socket.socket(fileno=listen_fd)
        status = serve_on(
            settings,
            host,
            listening,
            polls_observations=index == 0,
            plans_here=not plans_in_processes(settings),
            wakeups=None if write_fd < 0 else WakePipe.writing(write_fd),
            shared_with_others=shared,
        )
    except KeyboardInterrupt:  # stopped before it was serving (still opening, say)
        status = 0
    except Exception as exc:
        print(f"cleanair: {escape_nonprintable(str(exc))}", file=sys.stderr, flush=True)
    finally:
        stop_logging()
    return status


if __name__ == "__main__":
    exit_status = main(sys.argv[1:])
    sys.stderr.flush()
    os._exit(exit_status)

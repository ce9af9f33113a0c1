"""The plan processes `cleanair serve` starts beside its API processes.

A path search on a large network holds the interpreter that runs it for seconds at a time:
run in an API process, it held back every request that process answered (a score's p99 near
a second while two plans ran on a million-node grid, `bench/loaded.py`). So by default the
API processes plan nothing themselves: the command forks plan processes, each running
`cleanair worker`'s loop (`worker.run_plans`) on the same database at a lower CPU priority,
and the API processes' interpreters only answer requests.

A plan submitted on a SQLite database reaches them through a pipe (`WakePipe`) the command
makes before it forks: one byte per submitted plan wakes an idle runner at once, where
otherwise it would look again only after its idle wait. PostgreSQL tells them itself
(LISTEN/NOTIFY). An in-memory database (`:memory:`) cannot be shared between processes: its
API process keeps planning itself (`plans_in_processes`).
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import select
import signal
import socket
import sys
import threading
from collections.abc import Callable
from types import FrameType

from cleanair_core.routes.plans import Subscription
from cleanair_http.access_log import stop_logging
from cleanair_http.settings import Settings
from cleanair_http.terminal import escape_nonprintable

log = logging.getLogger("cleanair")


def plans_in_processes(settings: Settings) -> bool:
    """Whether `cleanair serve` runs its plans in plan processes: always when it plans at all,
    but on an in-memory database, which only the process that opened it sees."""
    return settings.plan_workers > 0 and str(settings.database) != ":memory:"


#: How much lower than the API processes' the plan processes' CPU priority is (`nice`).
PLAN_NICENESS = 10


class WakePipe:
    """A pipe from the API processes to the plan processes: `wake` in one, `subscribe` in the
    other (a `PlanWakeups`). Made before the processes are forked; each keeps its end."""

    def __init__(self) -> None:
        self._read, self._write = os.pipe()
        # A full pipe already holds more wake-ups than there are runners: drop the byte
        # rather than wait.
        os.set_blocking(self._write, False)

    def wake(self) -> None:
        """A plan was submitted: wake one idle runner of the plan processes."""
        with contextlib.suppress(BlockingIOError, BrokenPipeError):
            os.write(self._write, b"!")

    def subscribe(self, wake: Callable[[], None]) -> Subscription:
        """Call `wake` (from a thread of its own) for every plan submitted, until closed."""
        return _Reader(self._read, wake)

    def keep_reading_end(self) -> None:
        """In a plan process: close the end it never writes to."""
        self._close_write()

    def keep_writing_end(self) -> None:
        """In an API process: close the end it never reads from."""
        self._close_read()

    def close(self) -> None:
        """Close both ends, in a process that neither wakes nor plans (the command)."""
        self._close_read()
        self._close_write()

    # Each end is closed once: its number, once free, may be given to another file.
    def _close_read(self) -> None:
        if self._read >= 0:
            os.close(self._read)
            self._read = -1

    def _close_write(self) -> None:
        if self._write >= 0:
            os.close(self._write)
            self._write = -1


class _Reader:
    """A thread reading the pipe's bytes as wake-ups, until closed or every writer has gone."""

    def __init__(self, fd: int, wake: Callable[[], None]) -> None:
        self._fd = fd
        self._wake = wake
        self._stop_read, self._stop_write = os.pipe()
        self._thread = threading.Thread(target=self._read, name="cleanair wake-ups", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        while True:
            ready, _, _ = select.select([self._fd, self._stop_read], [], [])
            if self._stop_read in ready:
                return
            if not os.read(self._fd, 4096):  # every API process has ended
                return
            self._wake()

    def close(self) -> None:
        os.write(self._stop_write, b"!")
        self._thread.join()
        os.close(self._stop_read)
        os.close(self._stop_write)


class PlanProcesses:
    """The forked plan processes of one `cleanair serve`."""

    def __init__(self, pids: list[int]) -> None:
        self.pids = pids

    @classmethod
    def start(
        cls,
        settings: Settings,
        count: int,
        wakeups: WakePipe | None,
        inherited: socket.socket | None = None,
    ) -> PlanProcesses:
        """Fork `count` plan processes of `settings.plan_workers` runners each. `inherited`:
        the listening socket, which they close (the port must close with the API)."""
        pids: list[int] = []
        parent = os.getpid()
        for _ in range(count):
            pid = os.fork()
            if pid == 0:
                _die_with(parent)
                _plan_process(settings, wakeups, inherited)  # never returns
            pids.append(pid)
        return cls(pids)

    def stop(self) -> None:
        """Tell every plan process to stop: each hands its plans back and exits at once."""
        for pid in self.pids:
            with contextlib.suppress(ProcessLookupError):  # that one has already ended
                os.kill(pid, signal.SIGTERM)

    def wait(self) -> int:
        """Wait for every plan process to end; how many ended with an error."""
        failed = 0
        for pid in self.pids:
            _, status = os.waitpid(pid, 0)
            _forget_metrics(pid)
            if os.waitstatus_to_exitcode(status) != 0:
                failed += 1
                log.error("a plan process ended with an error", extra={"pid": pid})
        return failed


def _forget_metrics(pid: int) -> None:
    if "prometheus_client" in sys.modules:  # metrics are on
        from cleanair_http.metrics import mark_process_dead

        mark_process_dead(pid)


def _die_with(parent: int) -> None:
    """Have the kernel kill this process when `parent` dies, as if they were one process: a
    `kill -9` of `cleanair serve` (or its crash) then leaves no plan process planning on, its
    plans left to their leases as the API process's own were."""
    if sys.platform == "linux":
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # it died before the kernel was told
        os._exit(1)


_PR_SET_PDEATHSIG = 1


def _interrupted(signum: int, _: FrameType | None) -> None:
    raise KeyboardInterrupt


def _plan_process(
    settings: Settings, wakeups: WakePipe | None, inherited: socket.socket | None
) -> None:
    """A forked plan process's life; it ends the process."""
    status = 1
    # A terminal's Ctrl-C reaches every process of the group: the command passes it on as
    # SIGTERM, the one signal a plan process answers. Until its worker listens for it, a
    # SIGTERM ends it as a stop would (status 0), not killed by the signal.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _interrupted)
    # Plans are background work, requests are waited for: on a busy machine a request's
    # turn on the CPU comes before a search's.
    os.nice(PLAN_NICENESS)
    try:
        if inherited is not None:
            inherited.close()
        if wakeups is not None:
            wakeups.keep_reading_end()
        from cleanair_http.worker import run_plans

        status = run_plans(
            settings,
            settings.plan_workers,
            wakeups=wakeups,
            stop_signals=(signal.SIGTERM,),
        )
    except KeyboardInterrupt:  # stopped before its worker listened (still opening, say)
        status = 0
    except BaseException as exc:  # os._exit skips the usual report: make it here
        print(f"cleanair: {escape_nonprintable(str(exc))}", file=sys.stderr, flush=True)
    finally:
        stop_logging()  # os._exit skips atexit, where the last lines would be written
        logging.shutdown()
        # Not sys.exit: the forked copy of the command's stack must not unwind (it would
        # serve, or wait for children that are not its own).
        os._exit(status)

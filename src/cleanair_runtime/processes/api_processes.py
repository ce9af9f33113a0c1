"""The API processes of `cleanair serve --workers N`, watched and replaced when one dies.

An API process killed for its memory (or by a `kill -9`) used to be gone for good: with all
of them gone the command stayed up, its plan processes with it, while the port refused every
connection. The command now starts a replacement on the same listening socket (the slot's
own, with `SO_REUSEPORT`: connections queued on it meanwhile are answered), after a
back-off like the plan processes' (`plan_processes.restart_delay`): one that dies again and
again soon after it started waits longer each time, and each death is logged with why
(its status) and when the next starts.

The first N are forked, before the command starts any thread. A replacement is a fresh
interpreter (`python -P -m cleanair_runtime.processes.replacement_api`), as a plan process is:
by then the
command runs threads (the plan processes' watchers, the metrics port), and a fork could copy
a lock one of them held. It is handed its slot's listening socket and the wake pipe's writing end,
which the command keeps open for it, and reads the settings from the environment as the
command did.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from typing import Protocol

import attrs

from cleanair_runtime.processes.plan_processes import (
    STEADY_S,
    STOP_HEARD_WITHIN_S,
    WakePipe,
    restart_delay,
)

log = logging.getLogger("cleanair")

#: An API process that ended with one of these stopped (exit 0, or ended by SIGTERM or SIGINT
#: under its handlers): a service manager signalling every process at once may reach it
#: before the command, so it is replaced only if no stop follows within `STOP_HEARD_WITHIN_S`.
_STOP_STATUSES = (0, -signal.SIGTERM, -signal.SIGINT)


class Child(Protocol):
    """A running API process: its pid, and whether (with what status) it has ended."""

    @property
    def pid(self) -> int: ...

    def poll(self) -> int | None:
        """Its exit status once it has ended (-N: killed by signal N), reaping it; else None."""


@attrs.define
class Forked:
    """An API process forked by the command: reaped with `os.waitpid`."""

    pid: int
    status: int | None = None

    def poll(self) -> int | None:
        if self.status is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid != 0:
                self.status = os.waitstatus_to_exitcode(status)
        return self.status


@attrs.define
class _Slot:
    """One of the N places an API process serves in; `index` 0 polls the observations."""

    index: int
    child: Child | None
    began: float
    #: How many times in a row it ended soon after it started.
    restarts: int = 0
    #: When its replacement is due (monotonic seconds), while it has none.
    due: float | None = None
    #: Logged when the replacement starts: the one before stopped with a stop's status, so
    #: it is said only once no stop followed.
    stopped_by_itself: dict[str, object] | None = None


class ApiProcesses:
    """The API processes of one command: `reap` the ended, `restart_due` their replacements.

    `start(index)` starts the replacement for slot `index`; `clock` is monotonic seconds.
    Every ended process is forgotten through `forget` (its metrics marked dead)."""

    def __init__(
        self,
        children: Sequence[Child],
        start: Callable[[int], Child],
        *,
        clock: Callable[[], float] = time.monotonic,
        forget: Callable[[int], None] = lambda pid: None,
    ) -> None:
        self._start = start
        self._clock = clock
        self._forget = forget
        now = clock()
        self._slots = [_Slot(index, child, now) for index, child in enumerate(children)]
        self.stopping = False
        #: API processes that ended with an error once the command was stopping.
        self.failed = 0

    def running(self) -> list[Child]:
        return [slot.child for slot in self._slots if slot.child is not None]

    def stop(self) -> None:
        """Replace none from now on, and tell every running one to stop (SIGTERM)."""
        self.stopping = True
        for child in self.running():
            with contextlib.suppress(ProcessLookupError):  # that one has already ended
                os.kill(child.pid, signal.SIGTERM)

    def done(self) -> bool:
        """Stopping, and every API process has ended."""
        return self.stopping and not self.running()

    def next_due(self) -> float | None:
        """When the next replacement is due (monotonic seconds); None: none is waiting."""
        if self.stopping:
            return None
        return min((slot.due for slot in self._slots if slot.due is not None), default=None)

    def reap(self) -> None:
        """Take note of every API process that has ended: counted as failed if the command
        was stopping, else its replacement scheduled (and why logged)."""
        now = self._clock()
        for slot in self._slots:
            if slot.child is None or (status := slot.child.poll()) is None:
                continue
            pid, slot.child = slot.child.pid, None
            self._forget(pid)
            if self.stopping:
                # Ended by the stop it was sent (a replacement still starting has no handler
                # for it yet), or cleanly: not a failure.
                if status not in _STOP_STATUSES:
                    self.failed += 1
                    log.error(
                        "a serving process ended with an error",
                        extra={"pid": pid, "status": status},
                    )
                continue
            slot.restarts = slot.restarts + 1 if now - slot.began < STEADY_S else 1
            delay = restart_delay(slot.restarts)
            fields: dict[str, object] = {"pid": pid, "status": status, "restart_in_s": delay}
            if status in _STOP_STATUSES:
                # A service manager's SIGTERM to every process may be on its way to the
                # command too: wait for it that long before taking this for a crash.
                delay = max(delay, STOP_HEARD_WITHIN_S)
                fields["restart_in_s"] = delay
                slot.stopped_by_itself = fields
            else:
                # Killed (status -9: the OOM killer, say) or failed (1: the database could
                # not be opened, say): every API process serves all callers, so it is missed.
                log.error("an API process ended; starting another", extra=fields)
            slot.due = now + delay

    def restart_due(self) -> None:
        """Start the replacements whose time has come (none once stopping)."""
        now = self._clock()
        for slot in self._slots:
            if self.stopping or slot.due is None or slot.due > now:
                continue
            if slot.stopped_by_itself is not None:
                log.warning("an API process stopped by itself", extra=slot.stopped_by_itself)
                slot.stopped_by_itself = None
            slot.due = None
            try:
                child = self._start(slot.index)
            except OSError as exc:  # out of processes or memory, say: try again later
                slot.restarts += 1
                delay = restart_delay(slot.restarts)
                log.error(
                    "could not start an API process",
                    extra={"error": str(exc), "restart_in_s": delay},
                )
                slot.due = now + delay
                continue
            slot.child, slot.began = child, now
            log.info("started an API process", extra={"pid": child.pid, "slot": slot.index})
            if self.stopping:  # a stop landed while it started
                with contextlib.suppress(ProcessLookupError):
                    os.kill(child.pid, signal.SIGTERM)


#: How often the command looks for ended API processes where it cannot be told at once
#: (no pidfd: not Linux).
_POLL_S = 0.5


def wait_for_change(children: Sequence[Child], wake_fd: int, timeout: float | None) -> None:
    """Return when one of `children` may have ended, `wake_fd` is readable (a stop), or
    `timeout` seconds have passed (None: no limit)."""
    pidfds: list[int] = []
    try:
        if hasattr(os, "pidfd_open"):
            for child in children:
                with contextlib.suppress(ProcessLookupError):  # ended: reaped on return
                    pidfds.append(os.pidfd_open(child.pid))
        else:
            timeout = _POLL_S if timeout is None else min(timeout, _POLL_S)
        # select retries after a signal handler ran (PEP 475): a stop writes to `wake_fd`.
        select.select([wake_fd, *pidfds], [], [], timeout)
    finally:
        for fd in pidfds:
            os.close(fd)


@attrs.define
class Spawned:
    """A replacement API process (`replacement_api.main`), started by `spawn`."""

    process: subprocess.Popen[bytes]

    @property
    def pid(self) -> int:
        return self.process.pid

    def poll(self) -> int | None:
        return self.process.poll()


def spawn(
    host: str, listening: socket.socket, wakeups: WakePipe | None, index: int, *, shared: bool
) -> Spawned:
    """Start a replacement API process for slot `index`, serving on `listening`: the slot's
    own socket, or (`shared`) the one every API process serves."""
    write = -1 if wakeups is None else wakeups.writing_end
    fds = (listening.fileno(),) if write < 0 else (listening.fileno(), write)
    return Spawned(
        subprocess.Popen(
            # -P: not the working directory first on the import path (`cleanair` has not it).
            [
                sys.executable,
                "-P",
                "-m",
                "cleanair_runtime.processes.replacement_api",
                str(os.getpid()),
                host,
                str(listening.fileno()),
                str(write),
                str(index),
                "shared" if shared else "own",
            ],
            pass_fds=fds,
            stdin=subprocess.DEVNULL,
        )
    )

"""The plan processes `cleanair serve` starts beside its API processes.

A path search on a large network holds the interpreter that runs it for seconds at a time:
run in an API process, it held back every request that process answered (a score's p99 near
a second while two plans ran on a million-node grid, `bench/loaded.py`). So by default the
API processes plan nothing themselves: the command starts plan processes, each running
`cleanair worker`'s loop (`worker.run_plans`) on the same database at a lower CPU priority,
and the API processes' interpreters only answer requests. One that ends by itself is started
again (`PlanProcesses`).

A plan submitted on a SQLite database reaches them through a pipe (`WakePipe`) the command
makes before it forks its API processes: one byte per submitted plan wakes an idle runner at
once, where otherwise it would look again only after its idle wait. PostgreSQL tells them itself
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
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from types import FrameType

from cleanair_core.routes.plans import Subscription
from cleanair_runtime.composition.settings import Settings
from cleanair_runtime.logs import configure_logging, stop_logging
from cleanair_runtime.processes.plan_malloc import PLAN_MALLOC
from cleanair_runtime.terminal import escape_nonprintable

log = logging.getLogger("cleanair")


def plans_in_processes(settings: Settings) -> bool:
    """Whether `cleanair serve` runs its plans in plan processes: always when it plans at all,
    but on an in-memory database, which only the process that opened it sees."""
    return settings.plan_workers > 0 and str(settings.database) != ":memory:"


#: How much lower than the API processes' the plan processes' CPU priority is (`nice`).
PLAN_NICENESS = 10


class WakePipe:
    """A pipe from the API processes to the plan processes: `wake` in one, `subscribe` in the
    other (a `PlanWakeups`). Made before the API processes are forked, each keeping its
    writing end; the reading end is handed to each plan process started (`reading`)."""

    def __init__(self) -> None:
        self._read, self._write = os.pipe()
        # A full pipe already holds more wake-ups than there are runners: drop the byte
        # rather than wait.
        os.set_blocking(self._write, False)

    @classmethod
    def reading(cls, fd: int) -> WakePipe:
        """In a plan process: the reading end `fd` it was started with."""
        pipe = cls.__new__(cls)
        pipe._read, pipe._write = fd, -1
        return pipe

    @classmethod
    def writing(cls, fd: int) -> WakePipe:
        """In a replacement API process: the writing end `fd` it was started with."""
        pipe = cls.__new__(cls)
        pipe._read, pipe._write = -1, fd
        return pipe

    @property
    def writing_end(self) -> int:
        """The writing end's file descriptor, to hand to a replacement API process."""
        return self._write

    @property
    def reading_end(self) -> int:
        """The reading end's file descriptor, to hand to a plan process (-1: closed)."""
        return self._read

    def wake(self) -> None:
        """A plan was submitted: wake one idle runner of the plan processes."""
        with contextlib.suppress(BlockingIOError, BrokenPipeError):
            os.write(self._write, b"!")

    def subscribe(self, wake: Callable[[], None]) -> Subscription:
        """Call `wake` (from a thread of its own) for every plan submitted, until closed."""
        return _Reader(self._read, wake)

    def keep_writing_end(self) -> None:
        """In a forked API process: close the end it never reads from."""
        self._close_read()

    def close_writing_end(self) -> None:
        """In the command, once it is stopping: it starts no API process any more, and the
        plan processes hear every writer has gone once the API processes have ended."""
        self._close_write()

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


#: How long after a plan process ended by itself the next is started: doubled while each
#: lives less than `STEADY_S`, up to the last; back to the first after one that lived longer.
RESTART_DELAYS_S = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 60.0)
STEADY_S = 60.0


def restart_delay(restarts: int) -> float:
    """The wait before restarting a plan process that has ended `restarts` times in a row,
    each soon after it started (1 for the first)."""
    return RESTART_DELAYS_S[min(max(restarts, 1), len(RESTART_DELAYS_S)) - 1]


#: A plan process that stopped (exit 0, or ended by SIGTERM or SIGINT) before this process
#: heard of a stop: a service manager signalling every process at once may reach it first.
#: Taken for one that stopped by itself only if no stop follows within this long.
STOP_HEARD_WITHIN_S = 2.0
_STOP_STATUSES = (0, -signal.SIGTERM, -signal.SIGINT)


class PlanProcesses:
    """The plan processes of one `cleanair serve`. A plan process that ends by itself (killed
    for its memory, say) is logged and started again, after `restart_delay`, until `stop`.

    Each is a fresh interpreter (`python -P -m cleanair_runtime.processes.plan_processes`,
    reading the
    settings from the environment as the command did) rather than a fork: it may be started
    again while the process that watches it runs threads, and a fork then could copy a lock
    some thread held. Each is started, watched and restarted by a thread of its own, which
    lives as long as the process it started: on Linux the kernel kills a plan process when
    that thread's process dies (`die_with`). Each is in a session of its own: a terminal's
    Ctrl-C reaches the command, which passes a stop on as SIGTERM."""

    def __init__(self, wakeups: WakePipe | None) -> None:
        self._wakeups = wakeups
        # Reentrant: `stop` may run in a signal handler while the same thread is in `stop`.
        self._lock = threading.RLock()
        self._stopping = threading.Event()
        self._stop_asked = False
        self._running: dict[int, subprocess.Popen[bytes]] = {}
        self._watchers: list[threading.Thread] = []
        self._failed = 0

    @classmethod
    def start(cls, count: int, wakeups: WakePipe | None) -> PlanProcesses:
        """Start `count` plan processes, woken by `wakeups` (whose reading end this process
        then keeps, to hand to a restarted one)."""
        processes = cls(wakeups)
        for index in range(count):
            started = threading.Event()
            watcher = threading.Thread(
                target=processes._watch,
                args=(index, started),
                name=f"cleanair plan process {index}",
                daemon=True,
            )
            processes._watchers.append(watcher)
            watcher.start()
            started.wait()  # each is started before the API serves, as a fork was
        return processes

    def stop(self) -> None:
        """Tell every plan process to stop: each hands its plans back and exits at once. None
        is started again."""
        # A second stop signal landing in here must not wait on the first (the Event's own
        # lock is not reentrant): once asked, it is done.
        if self._stop_asked:
            return
        self._stop_asked = True
        self._stopping.set()  # before the lock: a watcher checks it there before it starts one
        with self._lock:
            running = list(self._running.values())
        for process in running:
            with contextlib.suppress(ProcessLookupError):  # that one has already ended
                process.send_signal(signal.SIGTERM)

    def wait(self) -> int:
        """Wait for every plan process to end (`stop` first); how many ended with an error
        (or could not be started), those restarted included."""
        for watcher in self._watchers:
            watcher.join()
        with self._lock:
            return self._failed

    def _watch(self, index: int, started: threading.Event) -> None:
        restarts = 0
        try:
            while True:
                with self._lock:
                    if self._stopping.is_set():
                        return
                    process: subprocess.Popen[bytes] | None = None
                    try:
                        process = self._spawn()
                    except OSError as exc:  # out of processes or memory, say
                        reason = str(exc)
                    else:
                        self._running[index] = process
                started.set()
                began = time.monotonic()
                status = None if process is None else self._wait_for(index, process)
                restarts = restarts + 1 if time.monotonic() - began < STEADY_S else 1
                delay = restart_delay(restarts)
                if process is None:
                    self._count_failure()
                    log.error(
                        "could not start a plan process",
                        extra={"error": reason, "restart_in_s": delay},
                    )
                elif status in _STOP_STATUSES:
                    if self._stopping.wait(STOP_HEARD_WITHIN_S):
                        return
                    log.warning(
                        "a plan process stopped by itself",
                        extra={"pid": process.pid, "status": status, "restart_in_s": delay},
                    )
                else:
                    self._count_failure()
                    log.error(
                        "a plan process ended with an error",
                        extra={"pid": process.pid, "status": status, "restart_in_s": delay},
                    )
                if self._stopping.wait(delay):
                    return
        finally:
            started.set()  # a watcher that failed must not hold `start` for ever

    def _wait_for(self, index: int, process: subprocess.Popen[bytes]) -> int:
        """Wait for `process` to end, and forget it; its exit status."""
        status = process.wait()
        _forget_metrics(process.pid)
        with self._lock:
            del self._running[index]
        return status

    def _count_failure(self) -> None:
        with self._lock:
            self._failed += 1

    def _spawn(self) -> subprocess.Popen[bytes]:
        read = -1 if self._wakeups is None else self._wakeups.reading_end
        return subprocess.Popen(
            # -P: not the working directory first on the import path (`cleanair` has not it).
            [
                sys.executable,
                "-P",
                "-m",
                "cleanair_runtime.processes.plan_processes",
                str(os.getpid()),
                str(read),
            ],
            pass_fds=() if read < 0 else (read,),
            stdin=subprocess.DEVNULL,
            env=plan_process_environment(os.environ),
            # Its own session: a terminal's Ctrl-C (or its job control) never reaches it.
            start_new_session=True,
        )


#: glibc's malloc arenas in a plan process (unless the environment sets its own). Plans run
#: on threads, and each thread's arena kept the freed blocks of the plan's arrays over every
#: node: on the generated million-node city a process's anonymous memory grew by 154 MiB in
#: ten walks with the default arenas, 23 MiB with one (docs/routing.md). `plan_malloc.py`
#: says why its mmap threshold is fixed too.
PLAN_MALLOC_ARENAS = PLAN_MALLOC["MALLOC_ARENA_MAX"]


def plan_process_environment(environment: Mapping[str, str]) -> dict[str, str]:
    """The environment a plan process is started with: `environment`, with its malloc
    tuned to give freed memory back (`plan_malloc.PLAN_MALLOC`) unless it says otherwise."""
    return {**PLAN_MALLOC, **environment}


def _forget_metrics(pid: int) -> None:
    if "prometheus_client" in sys.modules:  # metrics are on
        from cleanair_runtime.processes.metrics_port import mark_process_dead

        mark_process_dead(pid)


def die_with(parent: int, signum: signal.Signals = signal.SIGKILL) -> None:
    """Have the kernel send this process `signum` when `parent` (the thread of it that
    started this process) ends, as if they were one process: a `kill -9` of `cleanair serve`
    (or its crash) then leaves no plan process planning on, its plans left to their leases
    as the API process's own were, and no API process holding the port."""
    if sys.platform == "linux":
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signum)
    if os.getppid() != parent:  # it died before the kernel was told
        os._exit(1)


_PR_SET_PDEATHSIG = 1


def _interrupted(signum: int, _: FrameType | None) -> None:
    raise KeyboardInterrupt


def main(argv: Sequence[str]) -> int:
    """A plan process started by `PlanProcesses`: `argv` is the pid of the process that
    started it and the reading end of its wake pipe (-1: none); the settings are the
    environment's, as the command's were. Its exit status."""
    # SIGTERM is the one signal it answers (the command passes a Ctrl-C on as one). Until its
    # worker listens for it, it ends the process as a stop would (status 0), not killed by it.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _interrupted)
    status = 1
    try:
        parent, read = int(argv[0]), int(argv[1])
        die_with(parent)
        settings = Settings.from_env()
        configure_logging(settings.log_level, settings.access_log, settings.log_file)
        # Plans are background work, requests are waited for: on a busy machine a request's
        # turn on the CPU comes before a search's.
        os.nice(PLAN_NICENESS)
        from cleanair_runtime.processes.worker import run_plans

        status = run_plans(
            settings,
            settings.plan_workers,
            wakeups=None if read < 0 else WakePipe.reading(read),
            stop_signals=(signal.SIGTERM,),
        )
    except KeyboardInterrupt:  # stopped before its worker listened (still opening, say)
        status = 0
    except Exception as exc:
        print(f"cleanair: {escape_nonprintable(str(exc))}", file=sys.stderr, flush=True)
    finally:
        stop_logging()
        logging.shutdown()
    return status


if __name__ == "__main__":
    exit_status = main(sys.argv[1:])
    # Not sys.exit: a path search abandoned in its thread, or a worker thread, must not hold
    # the exit (the log lines are written already).
    sys.stderr.flush()
    os._exit(exit_status)

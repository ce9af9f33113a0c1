"""`cleanair serve`: the API under uvicorn, in one process or several on one port.

With `--workers N` (N > 1) the command binds the port itself, one socket per API process
with `SO_REUSEPORT` on Linux (else one they share: `shared_listening`), then forks N
processes that each open their own deployment (database connections, plan workers, sources)
and serve on their socket: the kernel hands each new connection to one of them. Everything
they share (credits, rate limits, plans) is in the database, so limits hold across them.
SIGTERM or SIGINT to the command is passed on to every process as SIGTERM, which then shuts
down gracefully (a Ctrl-C that reached them too included); the command exits once they all
have (non-zero if any failed). One that dies before (killed for its memory, say) is
replaced on its slot's socket, after a back-off (`api_processes`).

With metrics on (`CLEANAIR_METRICS=on`), the command makes a private directory for
prometheus_client's multiprocess mode before anything imports it, so that every process
writes its metrics there and a scrape of any of them adds up all; it removes the directory
when they have all ended. A separate metrics port (`CLEANAIR_METRICS_PORT`) is served by the
command itself, reading that directory: one address for the whole group.

Route plans run in plan processes the command starts beside its API processes
(`plan_processes`), one per API process, each with `CLEANAIR_PLAN_WORKERS` runners: no API
process's interpreter ever runs a path search; one that ends by itself is started again. They
are stopped with the API processes, and metrics are then always gathered in the private
directory, so that a scrape shows theirs too.
A single-process `serve` is the API process and the parent of its plan process at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from types import FrameType
from typing import Any

import anyio
import attrs
import uvicorn

from cleanair_core import CleanAir
from cleanair_http.app import create_app, with_access_log
from cleanair_http.plan_worker import PlanWorker
from cleanair_runtime.composition.bootstrap import open_deployment
from cleanair_runtime.composition.settings import Settings, database_label
from cleanair_runtime.logs import configure_logging, stop_logging
from cleanair_runtime.processes.api_processes import ApiProcesses, Forked, spawn, wait_for_change
from cleanair_runtime.processes.connection_deadlines import with_deadlines
from cleanair_runtime.processes.open_files import (
    AcceptErrors,
    max_connections,
    quiet_refusals,
    raise_open_files_limit,
)
from cleanair_runtime.processes.plan_processes import (
    PlanProcesses,
    WakePipe,
    die_with,
    plans_in_processes,
)
from cleanair_runtime.processes.shared_listening import (
    LISTEN_QUEUE,
    Listening,
    bound_socket,
    served_listening,
    slot_sockets,
)
from cleanair_runtime.terminal import cannot_listen, escape_nonprintable

log = logging.getLogger("cleanair")


def serve(
    settings: Settings,
    host: str,
    port: int,
    workers: int = 1,
    *,
    prepare: Callable[[], None] | None = None,
) -> int:
    """Serve the API on `host:port` in `workers` processes; the exit status. `prepare` runs
    once the port is bound, before anything is opened (the CLI's database check, which may
    create the database's folder): a port in use fails first, having made nothing."""
    configure_logging(settings.log_level, settings.access_log, settings.log_file)
    if settings.metrics_port == port:
        return cannot_listen(host, port, "the metrics port (CLEANAIR_METRICS_PORT) is this port")
    # Bound here, not by uvicorn: a port in use is then one line and exit 1, where uvicorn
    # logs it among its start-up lines and exits 3 ("try again" in our codes).
    try:
        listening = slot_sockets(host, port, workers)
    except OSError as exc:  # in use, or not an address of this machine
        return cannot_listen(host, port, exc)
    try:
        if prepare is not None:
            prepare()
        # Once the command is sure to serve (a refusal above stays its one line), and before
        # any process is started: they all inherit it.
        raise_open_files_limit()
        if workers == 1 and not plans_in_processes(settings):
            return _serve_alone(settings, host, port, listening.of_slot(0), planners=None)
        with _shared_metrics(settings):
            if workers == 1:
                # As `_serve_processes` does: a new database and key are made here, once,
                # rather than raced for by the two processes.
                open_deployment(settings, with_sources=False).close()
                # The API process keeps both ends of the pipe: it wakes the plan process
                # through one and hands the other to the plan process it starts again.
                with _wake_pipe(settings) as wakeups:
                    planners = PlanProcesses.start(1, wakeups)
                    return _serve_alone(
                        settings, host, port, listening.of_slot(0), planners, wakeups
                    )
            return _serve_processes(settings, host, listening, workers)
    finally:
        listening.close()


def _serve_alone(
    settings: Settings,
    host: str,
    port: int,
    listening: socket.socket,
    planners: PlanProcesses | None,
    wakeups: WakePipe | None = None,
) -> int:
    """`serve` in one API process, the parent of `planners` (when plans run in processes)."""
    # uvicorn shuts down on SIGTERM, then raises it again under the handler it found: this
    # one ends the process as SIGINT does (status 0, as `--workers N`), not killed by it.
    signal.signal(signal.SIGTERM, _interrupted)
    status = 1
    try:
        status = _serve(
            settings,
            host,
            port,
            listening,
            announce=True,
            polls_observations=True,
            plans_here=planners is None,
            planners=planners,
            wakeups=wakeups,
        )
    except KeyboardInterrupt:  # stopped before it was serving (still opening, say)
        status = 0
    finally:
        if planners is not None:
            planners.stop()  # already told, unless the server failed to start
            if planners.wait():
                status = 1
    return status


@contextlib.contextmanager
def _wake_pipe(settings: Settings) -> Iterator[WakePipe | None]:
    """The pipe that tells plan processes of submitted plans, for a SQLite database
    (PostgreSQL tells them itself); closed in this process when the block ends."""
    if settings.uses_postgres:
        yield None
        return
    pipe = WakePipe()
    try:
        yield pipe
    finally:
        pipe.close()


@contextlib.contextmanager
def _shared_metrics(settings: Settings) -> Iterator[None]:
    """With metrics on, a private directory the serving processes write their metrics to
    (prometheus_client's multiprocess mode), removed when they have ended."""
    if not settings.metrics_enabled:
        yield
        return
    # prometheus_client picks its mode when first imported: nothing may have imported it.
    if "prometheus_client" in sys.modules:
        raise RuntimeError("prometheus_client was imported before the metrics directory")
    directory = tempfile.mkdtemp(prefix="cleanair-metrics-")
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = directory
    try:
        yield
    finally:
        del os.environ["PROMETHEUS_MULTIPROC_DIR"]
        shutil.rmtree(directory, ignore_errors=True)


def _metrics_port(settings: Settings) -> Callable[[], None] | None:
    """Serve the metrics on their own port when one is set; the function that stops it.
    Raises OSError when it cannot listen there."""
    if settings.metrics_port is None:
        return None
    from cleanair_runtime.processes.metrics_port import serve_metrics

    return serve_metrics(settings.metrics_host, settings.metrics_port)


def _serve_processes(settings: Settings, host: str, listening: Listening, workers: int) -> int:
    """`serve` with `workers` > 1: forked processes, each serving its slot of `listening`."""
    # Open (and close) the deployment here first: a bad database or key is then one clear
    # error from this command, not N from its processes. Nothing stays open across the fork.
    open_deployment(settings, with_sources=False).close()
    _banner(settings, host, listening.port, workers=workers)
    with _wake_pipe(settings) as wakeups:
        children = _fork_serving(settings, host, listening, workers, wakeups)
        # The command keeps the listening sockets and both ends of the wake pipe: it hands
        # them to an API process it starts in place of one that died (`api_processes`), and
        # a slot's queue outlives its process (`shared_listening`).
        planners = PlanProcesses.start(workers if plans_in_processes(settings) else 0, wakeups)
        api = ApiProcesses(
            [Forked(pid) for pid in children],
            lambda index: spawn(
                host, listening.of_slot(index), wakeups, index, shared=not listening.per_slot
            ),
            forget=_forget_metrics if settings.metrics_enabled else lambda pid: None,
        )
        return _supervise(settings, api, planners, listening, wakeups)


def _fork_serving(
    settings: Settings,
    host: str,
    listening: Listening,
    workers: int,
    wakeups: WakePipe | None,
) -> list[int]:
    """Fork `workers` API processes, each serving its slot of `listening`; their pids."""
    children: list[int] = []
    command = os.getpid()
    for index in range(workers):
        pid = os.fork()
        if pid == 0:  # a serving process: its own deployment on the shared socket
            status = 1
            # uvicorn shuts down on SIGTERM, then raises it again under the handler it found:
            # here that ends the process as SIGINT does (status 0), not killed by the signal.
            signal.signal(signal.SIGTERM, _interrupted)
            # A `kill -9` of the command stops it too (gracefully): left running, it would
            # hold the port a restarted command then fails to bind.
            die_with(command, signal.SIGTERM)
            try:
                # Held here, another slot's socket would outlive a stop of the command.
                listening.close_others(index)
                if wakeups is not None:
                    wakeups.keep_writing_end()
                # One process polls the live observations: they are stored for all, and N
                # pollers would spend OpenAQ's rate limit N times over for the same values.
                status = _serve(
                    settings,
                    host,
                    listening.port,
                    listening.of_slot(index),
                    announce=False,
                    polls_observations=index == 0,
                    plans_here=not plans_in_processes(settings),
                    wakeups=wakeups,
                    shared_with_others=not listening.per_slot,
                )
            except KeyboardInterrupt:  # stopped before it was serving (still opening, say)
                status = 0
            except BaseException as exc:  # os._exit skips the usual report: make it here
                print(f"cleanair: {escape_nonprintable(str(exc))}", file=sys.stderr, flush=True)
            finally:
                stop_logging()  # os._exit skips atexit, where the last lines would be written
                os._exit(status)
        children.append(pid)
    return children


def _supervise(
    settings: Settings,
    api: ApiProcesses,
    planners: PlanProcesses,
    listening: Listening,
    wakeups: WakePipe | None,
) -> int:
    """Replace API processes that die, pass a stop on to them and the plan processes, and
    wait for them all; the command's exit status."""
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)

    def pass_on(signum: int, _: FrameType | None) -> None:
        # Always SIGTERM: a terminal's Ctrl-C has already sent every process of the group a
        # SIGINT, and uvicorn takes a second SIGINT as "quit now", skipping the shutdown
        # that hands plans back and closes connections.
        api.stop()
        planners.stop()
        # New connections are refused from now on, not left waiting for nobody.
        listening.close()
        with contextlib.suppress(BlockingIOError):  # already woken
            os.write(wake_write, b"!")

    signal.signal(signal.SIGTERM, pass_on)
    signal.signal(signal.SIGINT, pass_on)
    failed = 0
    stop_metrics = None
    try:
        # Started only now: a thread running across a fork could leave a lock held.
        stop_metrics = _metrics_port(settings)
    except OSError as exc:
        assert settings.metrics_port is not None
        failed = cannot_listen(settings.metrics_host, settings.metrics_port, exc)
        pass_on(signal.SIGTERM, None)
    try:
        while True:
            api.reap()
            if api.stopping and wakeups is not None:
                # No API process is started any more: the command lets go of the pipe's
                # writing end, which it kept for them. Held past the stop, a plan process
                # told to stop did not end in one stop of two of `--workers 2` (until
                # killed; test_plan_processes): the writers' end is what it last waits for.
                # Here, not in the signal handler, which may run in the middle of a `spawn`.
                wakeups.close_writing_end()
            if api.done():
                break
            api.restart_due()
            due = api.next_due()
            wait_for_change(
                api.running(), wake_read, None if due is None else max(0.0, due - time.monotonic())
            )
        failed += api.failed
        failed += planners.wait()
    finally:
        if stop_metrics is not None:
            stop_metrics()
        os.close(wake_read)
        os.close(wake_write)
    return 1 if failed else 0


def _forget_metrics(pid: int) -> None:
    from cleanair_runtime.processes.metrics_port import mark_process_dead

    mark_process_dead(pid)


def serve_on(
    settings: Settings,
    host: str,
    listening: socket.socket,
    *,
    polls_observations: bool,
    plans_here: bool,
    wakeups: WakePipe | None,
    shared_with_others: bool,
) -> int:
    """One API process of `--workers N` on the command's `listening` socket (its slot's, or
    the one all share when `shared_with_others`): the replacement of one that died
    (`replacement_api.main`). Its exit status."""
    return _serve(
        settings,
        host,
        listening.getsockname()[1],
        listening,
        announce=False,
        polls_observations=polls_observations,
        plans_here=plans_here,
        wakeups=wakeups,
        shared_with_others=shared_with_others,
    )


def _interrupted(signum: int, _: FrameType | None) -> None:
    raise KeyboardInterrupt


def listening_socket(host: str, port: int) -> socket.socket:
    """A TCP socket listening on `host:port`, as `serve` makes for one process (or for
    forked ones sharing it): see `shared_listening.bound_socket`."""
    return bound_socket(host, port)


def _alert_loops(core: CleanAir, settings: Settings) -> Callable[[], Coroutine[Any, Any, None]]:
    """The alert loops (`worker.alert_worker`) as work for the app's lifetime."""
    from cleanair_runtime.processes.worker import alert_worker

    async def run() -> None:
        async with alert_worker(core, settings).running():
            await anyio.sleep_forever()

    return run


def _serve(
    settings: Settings,
    host: str,
    port: int,
    listening: socket.socket | None,
    *,
    announce: bool,
    polls_observations: bool = False,
    plans_here: bool = True,
    planners: PlanProcesses | None = None,
    wakeups: WakePipe | None = None,
    shared_with_others: bool = False,
) -> int:
    """One serving process, on `listening` when given (shared with others when
    `shared_with_others`: then it accepts a connection a wake-up), else binding
    `host:port` itself; `announce` prints the banner once the deployment is open;
    `polls_observations` runs the live observation poller (when configured) in this one.
    `plans_here`: whether it works on plans itself, else plan processes do, which `wakeups`
    (if any) tells of submitted plans; `planners`, the plan processes it started itself, are
    told to stop the moment it is."""
    deployment = open_deployment(settings, polls_observations=polls_observations)
    if not plans_here:
        settings = attrs.evolve(settings, plan_workers=0)
    # Where this process plans (an in-memory database), it decides and sends alerts too.
    alerts = [_alert_loops(deployment.core, settings)] if settings.plan_workers > 0 else []
    app = create_app(
        deployment.core,
        settings,
        on_shutdown=[deployment.aclose],
        plan_wakeups=deployment.plan_wakeups,
        background=[*deployment.background, *deployment.watchers, *alerts],
        wake_planners=None if wakeups is None else wakeups.wake,
    )
    stop_metrics = None
    if announce:  # alone, so the metrics port (if any) is this process's own
        try:
            stop_metrics = _metrics_port(settings)
        except OSError as exc:
            deployment.close()
            assert settings.metrics_port is not None
            return cannot_listen(settings.metrics_host, settings.metrics_port, exc)
        # The port bound, which `--port 0` leaves to the system.
        _banner(
            settings, host, port if listening is None else listening.getsockname()[1], workers=1
        )
    # Each serving process says what it loaded (with --workers, each loads its own networks,
    # so a network imported while they started may be in some and not others).
    log.info(
        "API process started",
        extra={"pid": os.getpid(), "plan_runners": settings.plan_workers, **deployment.in_use()},
    )
    backlog = LISTEN_QUEUE
    if listening is not None:
        listening, backlog = served_listening(listening, shared_with_others=shared_with_others)
    config = uvicorn.Config(
        with_access_log(app),
        host=host,
        port=port,
        access_log=False,  # ours is structured and never shows tokens or query strings
        log_config=None,
        server_header=False,
        # The client's address is decided in one place, client_address.py, from
        # CLEANAIR_TRUSTED_PROXIES. uvicorn's own X-Forwarded-For handling (on by default,
        # trusting 127.0.0.1 or $FORWARDED_ALLOW_IPS) would rewrite the peer first, so a
        # client behind a local proxy, or on loopback, could pick any address it liked.
        proxy_headers=False,
        forwarded_allow_ips=[],  # and, were it ever turned on, trust nobody
        # Beyond it a request is answered 503 at once, while descriptors are left.
        limit_concurrency=max_connections(settings),
        http=with_deadlines(settings.header_timeout, settings.body_timeout, settings.send_timeout),
        # asyncio's accepts a wake-up (and the queue, for a socket of this process's own).
        backlog=backlog,
    )
    worker = app.state.get("plan_worker")
    stop_planning: Callable[[], Awaitable[None]] | None = (
        worker.stop if isinstance(worker, PlanWorker) else None
    )
    if planners is not None:
        stop_planning = _async(planners.stop)
    server = _Server(config, stop_planning)
    try:
        # A shared socket is handed over as the socket object: uvicorn's own `fd` option
        # rebuilds it as a UNIX socket, and TCP connections would lose TCP_NODELAY.
        server.run(sockets=None if listening is None else [listening])
    except KeyboardInterrupt:
        pass  # SIGINT ends the server gracefully (as `uvicorn.run` treats it): no traceback
    finally:
        deployment.close()  # whatever the app's shutdown has not closed (it never started, say)
        if stop_metrics is not None:
            stop_metrics()
    return 0


class _Server(uvicorn.Server):
    """uvicorn's server, stopping the plan worker the moment shutdown begins.

    uvicorn runs the app's lifespan shutdown only once every open connection has ended (a
    request waiting on a slow upstream, say): until then the runners would go on working on
    plans and claiming new ones, which a service manager that kills the process meanwhile
    leaves to wait out their leases."""

    def __init__(
        self, config: uvicorn.Config, stop_planning: Callable[[], Awaitable[None]] | None
    ) -> None:
        super().__init__(config)
        self._stop_planning = stop_planning
        self._interrupted = False

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        # uvicorn quits at once (no shutdown: plans not handed back) on a SIGINT after any
        # stop. A terminal's Ctrl-C reaches every process of `--workers N` and the command,
        # which passes it on as SIGTERM: that SIGTERM can reach an API process before the
        # Ctrl-C does, and the pair is one stop, not two. Only a second SIGINT quits at once.
        if sig == signal.SIGINT and not self._interrupted:
            self._interrupted = True
            if self.should_exit:  # a SIGTERM came first: remembered, re-raised at the end
                self._captured_signals.append(sig)
                return
        super().handle_exit(sig, frame)

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        asyncio.get_running_loop().set_exception_handler(AcceptErrors())
        quiet_refusals()
        await super().serve(sockets)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        if self._stop_planning is not None:
            await self._stop_planning()
        await super().shutdown(sockets)


def _async(call: Callable[[], None]) -> Callable[[], Awaitable[None]]:
    async def called() -> None:
        call()

    return called


def _banner(settings: Settings, host: str, port: int, *, workers: int) -> None:
    database = escape_nonprintable(database_label(settings.database))
    processes = f"{workers} processes, " if workers > 1 else ""
    print(
        f"cleanair {settings.environment.value} API on http://{escape_nonprintable(host)}:{port} "
        f"({processes}database {database}; OpenAPI at /schema/openapi.json)\n"
        "To pair a client, in another shell:\n"
        "  .venv/bin/cleanair users add alice\n"
        "  .venv/bin/cleanair pairing-code alice\n"
        'then POST {"code": "<code>", "name": "my app"} to /v1/connections/token '
        "within 60 seconds.",
        file=sys.stderr,
        flush=True,
    )

"""The service's thread offload (`in_thread`): where store calls and CPU-heavy work run so the
event loop never waits, with anyio's semantics on a cheaper hand-over."""

from __future__ import annotations

import asyncio
import contextvars
import threading

import anyio
import pytest

from cleanair_http import offloading
from cleanair_http.offloading import in_thread

#: Bounded waits for other threads: generous on a busy machine, never reached when it works.
WAIT_S = 30.0
#: Loop turns a caller that did not wait for its work would need to return.
TURNS = 50

_REQUEST: contextvars.ContextVar[str] = contextvars.ContextVar("request", default="none")


def test_the_work_runs_in_another_thread_with_the_callers_contextvars() -> None:
    async def main() -> None:
        _REQUEST.set("r1")
        here = threading.get_ident()
        seen = await in_thread(lambda: (threading.get_ident(), _REQUEST.get()))
        assert seen[0] != here
        assert seen[1] == "r1"

        def fail() -> None:
            raise ValueError("store failed")

        with pytest.raises(ValueError, match="store failed"):
            await in_thread(fail)

    anyio.run(main)


def test_a_cancelled_caller_waits_for_its_work_to_end() -> None:
    # What it cleans up after a cancellation (a refund, say) must never race the work.
    started, release = threading.Event(), threading.Event()
    ended: list[bool] = []
    returned: list[bool] = []

    def work() -> None:
        started.set()
        assert release.wait(WAIT_S)
        ended.append(True)

    async def main() -> None:
        scope = anyio.CancelScope()

        async def caller() -> None:
            with scope:
                await in_thread(work)
            returned.append(True)

        async with anyio.create_task_group() as group:
            group.start_soon(caller)
            assert await anyio.to_thread.run_sync(started.wait, WAIT_S)
            scope.cancel()
            for _ in range(TURNS):
                await anyio.sleep(0)
            assert returned == [], "the caller went on while its work still ran"
            release.set()

    anyio.run(main)
    assert ended == [True]
    assert returned == [True]


def test_a_caller_already_cancelled_never_starts_its_work() -> None:
    # A plan runner told to stop before its first claim must claim nothing.
    ran: list[bool] = []

    async def main() -> None:
        with anyio.CancelScope() as scope:
            scope.cancel()
            await in_thread(lambda: ran.append(True))
        assert scope.cancelled_caught

    anyio.run(main)
    assert ran == []


def test_a_caller_cancelled_while_its_work_waits_for_a_thread_never_starts_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(offloading, "OFFLOAD_THREADS", 1)
    started, release = threading.Event(), threading.Event()
    ran: list[bool] = []

    def block() -> None:
        started.set()
        assert release.wait(WAIT_S)

    async def main() -> None:
        scope = anyio.CancelScope()

        async def queued() -> None:
            with scope:
                await in_thread(lambda: ran.append(True))

        async with anyio.create_task_group() as group:
            group.start_soon(in_thread, block)
            assert await anyio.to_thread.run_sync(started.wait, WAIT_S)
            group.start_soon(queued)
            await anyio.wait_all_tasks_blocked()  # waiting for the one thread
            scope.cancel()
            await anyio.wait_all_tasks_blocked()
            release.set()
        assert scope.cancelled_caught

    anyio.run(main)
    assert ran == []


def test_no_offload_thread_outlives_its_event_loop() -> None:
    # The command opens and closes its deployment on a loop of its own, then forks its API
    # processes: a thread left running across a fork could leave a lock held in them.
    asyncio.run(in_thread(lambda: None))
    assert [t for t in threading.enumerate() if t.name.startswith("cleanair-offload")] == []

"""The service's offloads: no store call waits on the event loop.

Path searches and store calls that write more than once run in a worker thread (`in_thread`).
One-step store calls (the bearer middleware's authentication and rate-limit hit, a charge's
debit, a read) use `here_or_in_thread`: tried right here with the store told not to wait, and
handed to a thread only when it would have had to (a lock held by another process, a CLI
import say, or by this process's other threads). So the common case pays no thread hop, and
a held lock still stalls only the requests that must write.

Processes that only plan (`cleanair worker`, the plan processes `cleanair serve` starts) run
their work with `in_abandoned_thread`, so that stopping never waits for a path search.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
import weakref
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import anyio
import anyio.lowlevel

from cleanair_core.offload import here_unless_blocked

T = TypeVar("T")


#: Worker threads per event loop: anyio's default for its own pool.
OFFLOAD_THREADS = 40
_POOLS: weakref.WeakKeyDictionary[
    asyncio.AbstractEventLoop, tuple[ThreadPoolExecutor, asyncio.Semaphore]
] = weakref.WeakKeyDictionary()


def _pool(loop: asyncio.AbstractEventLoop) -> tuple[ThreadPoolExecutor, asyncio.Semaphore]:
    """The loop's worker threads, and the slots that bound the work handed to them."""
    found = _POOLS.get(loop)
    if found is None:
        pool = ThreadPoolExecutor(OFFLOAD_THREADS, "cleanair-offload")
        # As the loop's default executor, the threads end with the loop: asyncio.run and
        # anyio.run shut it down. None then outlives it into a fork (the command opens and
        # closes its deployment, then forks its API processes). A loop that has a default
        # executor already keeps it, and this pool lives until it is collected.
        if getattr(loop, "_default_executor", None) is None:
            loop.set_default_executor(pool)
        found = _POOLS[loop] = (pool, asyncio.Semaphore(OFFLOAD_THREADS))
    return found


async def in_thread(work: Callable[[], T], /) -> T:
    """Run `work` in a worker thread (with the caller's contextvars) and return its result.

    As anyio's `to_thread.run_sync`: a caller already cancelled, or cancelled while its work
    waits for a thread, never starts it; once started, a cancelled caller still waits for it
    to end, so nothing it cleans up afterwards races the work. Not anyio's pool: its
    hand-over costs about 125 µs of CPU a call with 8 callers at once, against 30-60 µs for
    this one, and a request on PostgreSQL makes one or two (bench/served.py)."""
    await anyio.lowlevel.checkpoint_if_cancelled()
    loop = asyncio.get_running_loop()
    pool, slots = _pool(loop)
    async with slots:
        future = loop.run_in_executor(pool, contextvars.copy_context().run, work)
        with anyio.CancelScope(shield=True):
            result = await future
    return result


#: One-step store work: here when the store is free, else in a thread.
here_or_in_thread = here_unless_blocked(in_thread)


async def in_abandoned_thread(work: Callable[[], T], /) -> T:
    """Run `work` in a daemon thread of its own and return its result; cancelled, return at
    once and leave `work` to end on its own, unawaited.

    A path search on a large network runs for tens of seconds and cannot be interrupted:
    anyio's threads are waited for on cancellation and joined when the interpreter exits, so
    a process told to stop would stop only once its search ended. A daemon thread is neither.
    Only for work whose outcome may be dropped: a plan's search (its plan is handed back) and
    the plan's outcome (fenced by its claim: stored once, by whichever worker holds it)."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[T] = loop.create_future()
    context = contextvars.copy_context()  # as anyio's threads run: the caller's contextvars

    def settle(outcome: Callable[[], None]) -> None:
        if not done.done():  # not cancelled meanwhile
            outcome()

    def run() -> None:
        try:
            value = context.run(work)
        except BaseException as exc:  # handed to the awaiting task, which raises it
            error = exc
            outcome = lambda: done.set_exception(error)  # noqa: E731
        else:
            outcome = lambda: done.set_result(value)  # noqa: E731
        # The loop has closed when the awaiting process stopped without it: nothing to tell.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(settle, outcome)

    threading.Thread(target=run, name="cleanair plan work", daemon=True).start()
    return await done

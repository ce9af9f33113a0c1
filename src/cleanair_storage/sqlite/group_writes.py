"""SQLite: the request path's writes committed together, their statements on the event loop
and only their COMMIT (the sync) on a thread of its own.

With `synchronous=FULL` a COMMIT waits for the disk, so no COMMIT may run on the event loop.
The first way off the loop handed whole writes to a writer thread: that thread then ran
Python (the writes, a SAVEPOINT and RELEASE each, every sqlite call dropping and re-taking
the GIL) against a loop thread that was 100 % busy, so each of its GIL re-takes queued
behind the loop (the switch interval is 5 ms), batches got slow and small, and a synced
score cost 0.6-0.7x an unsynced one. Now a batch's statements run right here, inside one
open transaction (they touch SQLite's page cache: microseconds), each write in a savepoint
of its own, so one that fails is undone alone and its caller hears of it; then the COMMIT
alone goes to the store's committer thread, and SQLite drops the GIL while it syncs. Writes
that arrive meanwhile form the next batch. Callers are answered only once their batch's
COMMIT returned (nothing is acknowledged before its sync); a COMMIT that fails fails every
caller of its batch.

When the write lock is not free (this process's other threads write, or another process:
a CLI import), nothing waits on the loop: that batch runs whole in a worker thread, which
waits for the lock as every other writer does.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import queue
import threading
import weakref
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, TypeVar, cast

import attrs

T = TypeVar("T")
#: The committer thread's name (py-spy and `threading.enumerate` show it).
GROUP_WRITER_THREAD = "cleanair-sqlite-group-writes"

_Job = tuple[
    Callable[[], None], asyncio.AbstractEventLoop, Callable[["BaseException | None"], None]
]


@attrs.frozen
class WriterUnit:
    """What the group writer needs of the store's writer connection."""

    #: Open a unit of work without waiting (write lock and BEGIN IMMEDIATE); False, with
    #: nothing held, when another thread or process holds the lock.
    begin: Callable[[], bool]
    #: Store calls on this thread join the unit `begin` opened, while the block runs.
    joined: Callable[[], AbstractContextManager[object]]
    #: Run one statement on the writer connection (a savepoint's).
    execute: Callable[[str], object]
    #: COMMIT (True) or ROLLBACK the unit `begin` opened, from any thread; the lock goes.
    end: Callable[[bool], None]
    #: A unit of work that waits for the lock (`SqliteDatabase.transaction`): off the loop.
    transaction: Callable[[], AbstractContextManager[object]]


class _Write:
    """A queued write: its work, its caller's future, and whether its batch has begun."""

    __slots__ = ("begun", "done", "ended", "work")

    def __init__(self, work: Callable[[], Any], done: asyncio.Future[Any]) -> None:
        self.work = work
        self.done = done
        self.begun = False
        #: Made when its caller is cancelled once the batch began: set when the batch ends.
        self.ended: asyncio.Future[None] | None = None


class _Queue:
    """One event loop's writes waiting for the next batch, and whether a batch is under way."""

    def __init__(self) -> None:
        self.waiting: list[_Write] = []
        self.busy = False


class GroupWriter:
    """Commits queued writes in batches: statements on the caller's loop, COMMIT on a thread.

    Driven by callbacks rather than a task: the COMMIT's return answers the batch's callers
    and starts the next batch in the same loop iteration, so a write waits for no loop
    iteration beyond the one its caller resumes in (each would be other requests' work)."""

    def __init__(self, unit: WriterUnit) -> None:
        self._unit = unit
        self._start_anew()
        #: Batches committed: what tests count against the writes queued.
        self.batches = 0
        #: Batches that found the write lock held and ran whole in a worker thread.
        self.waited_in_thread = 0

    def _start_anew(self) -> None:
        # In a process forked from one that wrote, the thread did not come along: a new
        # committer and queues (the parent's lock may have been held at the fork).
        self._pid = os.getpid()
        self._committer = _Committer()
        self._queues: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Queue] = (
            weakref.WeakKeyDictionary()
        )
        self._stopped = False

    async def write(self, work: Callable[[], T], /) -> T:
        """Run `work` (store calls that write) in the next batch and return its result, once
        the COMMIT that holds it returned.

        A caller cancelled before its batch began is left out of it; once it began, a
        cancelled caller still waits for the batch to end, so nothing it does afterwards
        races the write."""
        loop = asyncio.get_running_loop()
        if self._pid != os.getpid():
            self._start_anew()
        if self._stopped:
            raise RuntimeError("the store is closed")
        queue = self._queues.get(loop)
        if queue is None:
            queue = self._queues[loop] = _Queue()
        queued = _Write(work, loop.create_future())
        queue.waiting.append(queued)
        if not queue.busy:
            queue.busy = True
            # Next iteration: the writes queued in this one go with it.
            loop.call_soon(self._next_batch, loop, queue)
        try:
            return cast(T, await queued.done)
        except asyncio.CancelledError:
            if queued.begun:
                queued.ended = loop.create_future()
                await asyncio.wait([queued.ended])
            raise

    def stop(self) -> None:
        """End the committer thread once its COMMIT, if any, returned (the store is closing)."""
        self._stopped = True
        if self._pid == os.getpid():
            self._committer.stop()

    def _next_batch(self, loop: asyncio.AbstractEventLoop, queue: _Queue) -> None:
        """Begin the batch of what is queued (a callback on `loop`), or go idle."""
        batch = [queued for queued in queue.waiting if not queued.done.done()]
        queue.waiting = []
        if not batch:
            queue.busy = False
            return
        for queued in batch:
            queued.begun = True
        try:
            self._begin_batch(loop, queue, batch)
        except BaseException as exc:  # a bug: nobody waits forever
            self._finish(loop, queue, batch, [exc] * len(batch))
            raise

    def _begin_batch(
        self, loop: asyncio.AbstractEventLoop, queue: _Queue, batch: list[_Write]
    ) -> None:
        works = [queued.work for queued in batch]
        try:
            begun = self._unit.begin()
        except Exception as exc:
            self._finish(loop, queue, batch, [exc] * len(batch))
            return
        if not begun:
            self.waited_in_thread += 1
            waited = loop.create_task(asyncio.to_thread(self._commit_waiting, works))
            waited.add_done_callback(
                lambda task: self._finish(loop, queue, batch, _outcomes_of(task, len(batch)))
            )
            return
        if len(works) == 1:
            self._begin_alone(loop, queue, batch)
            return
        try:
            with self._unit.joined():
                outcomes = _each_in_savepoint(works, self._unit.execute)
        except BaseException as exc:
            # SQLite ended the whole transaction (a full disk, say): the batch fails with it.
            with contextlib.suppress(Exception):
                self._unit.end(False)
            self._finish(loop, queue, batch, [exc] * len(batch))
            return

        def committed(failed: BaseException | None) -> None:
            self._finish(loop, queue, batch, outcomes if failed is None else [failed] * len(batch))

        self._committer.hand(lambda: self._unit.end(True), loop, committed)

    def _begin_alone(
        self, loop: asyncio.AbstractEventLoop, queue: _Queue, batch: list[_Write]
    ) -> None:
        """A batch of one write (a request path's whole group commit, most often): the
        transaction is the write's own, so one that fails is undone by a ROLLBACK here rather
        than a savepoint's three statements and the sub-journal SQLite keeps for it."""
        try:
            with self._unit.joined():
                outcome: object = _Result(batch[0].work())
        except BaseException as exc:  # undone whole; the caller hears what the write raised
            with contextlib.suppress(Exception):
                self._unit.end(False)
            self._finish(loop, queue, batch, [exc])
            return

        def committed(failed: BaseException | None) -> None:
            self._finish(loop, queue, batch, [outcome if failed is None else failed])

        self._committer.hand(lambda: self._unit.end(True), loop, committed)

    def _finish(
        self,
        loop: asyncio.AbstractEventLoop,
        queue: _Queue,
        batch: list[_Write],
        outcomes: list[object],
    ) -> None:
        """Answer the batch's callers, then begin the next batch right away."""
        self.batches += 1
        _settle(batch, outcomes)
        self._next_batch(loop, queue)

    def _commit_waiting(self, works: list[Callable[[], Any]]) -> list[object]:
        """The batch in a worker thread, in a unit of work that waits for the lock."""
        try:
            with self._unit.transaction():
                return _each_in_savepoint(works, self._unit.execute)
        except BaseException as exc:
            return [exc] * len(works)


def _outcomes_of(task: asyncio.Task[list[object]], size: int) -> list[object]:
    if task.cancelled():
        return [asyncio.CancelledError()] * size
    failed = task.exception()
    return [failed] * size if failed is not None else task.result()


def _each_in_savepoint(
    works: list[Callable[[], Any]], execute: Callable[[str], object]
) -> list[object]:
    """Run each work in a savepoint of the open transaction: one that raises (anything, a
    BaseException too) is undone alone and its outcome is what it raised. Raises what ended
    the whole transaction, when undoing a write failed."""
    outcomes: list[object] = []
    for work in works:
        execute("SAVEPOINT queued_write")
        try:
            outcomes.append(_Result(work()))
        except BaseException as exc:
            try:
                execute("ROLLBACK TO queued_write")
            except Exception:
                raise exc from None
            outcomes.append(exc)
        execute("RELEASE queued_write")
    return outcomes


class _Committer:
    """One daemon thread that runs one job at a time (a COMMIT) and calls back into the loop
    that handed it over once it returned: one hand-over and one wake-up a batch.

    The jobs go through a `queue.SimpleQueue`: its put and its blocking get are C, so neither
    thread runs Python to hand a job over. A `threading.Condition` ran some forty lines of
    Python a batch (a lock made per wait, notify's bookkeeping), in the committer thread
    while it held the GIL the loop thread was waiting for."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._starting = threading.Lock()
        self._thread: threading.Thread | None = None

    def hand(
        self,
        job: Callable[[], None],
        loop: asyncio.AbstractEventLoop,
        then: Callable[[BaseException | None], None],
    ) -> None:
        """Run `job` on the thread, then `then(what it raised, or None)` on `loop`."""
        if self._thread is None:
            with self._starting:
                if self._thread is None:
                    self._thread = threading.Thread(
                        target=self._run, name=GROUP_WRITER_THREAD, daemon=True
                    )
                    self._thread.start()
        self._jobs.put((job, loop, then))

    def stop(self) -> None:
        """End the thread once the jobs handed over before have run."""
        with self._starting:
            thread = self._thread
        if thread is not None:
            self._jobs.put(None)
            thread.join()

    def _run(self) -> None:
        while (handed := self._jobs.get()) is not None:
            job, loop, then = handed
            failed: BaseException | None = None
            try:
                job()
            except BaseException as exc:  # handed to the batch's callers; the thread lives on
                failed = exc
            # That loop has closed: nobody is waiting.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(then, failed)


class _Result:
    """A work's value, told apart from an exception it returned rather than raised."""

    __slots__ = ("value",)

    def __init__(self, value: object) -> None:
        self.value = value


def _settle(batch: list[_Write], outcomes: list[object]) -> None:
    for queued, outcome in zip(batch, outcomes, strict=True):
        if queued.ended is not None and not queued.ended.done():
            queued.ended.set_result(None)
        if queued.done.done():
            continue
        if isinstance(outcome, _Result):
            queued.done.set_result(outcome.value)
        else:
            assert isinstance(outcome, BaseException)
            queued.done.set_exception(outcome)

"""SQLite: the request path's writes committed together by one writer thread per store.

With `synchronous=FULL` a COMMIT waits for the disk, so no write may run on the event loop.
Tried there first (`here_unless_blocked`), each one raised WouldBlock and was handed to a
pool thread: the loop paid the try, the exception and a pool hand-over for every batch, and
each uncharged rate-limit hit paid a sync of its own. Here a write is queued for the store's
one writer thread instead, never tried on the loop. The thread takes whatever is queued (a
group commit's charges, hits from any number of requests) and runs it in one transaction with
one COMMIT, so one sync covers them all; each write gets a savepoint, so one that fails is
undone alone and its caller hears of it, the others still commit. Its callers are woken with
one call into each loop per batch.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")
#: The writer thread's name (py-spy and `threading.enumerate` show it).
GROUP_WRITER_THREAD = "cleanair-sqlite-group-writes"

_Queued = tuple[Callable[[], Any], asyncio.AbstractEventLoop, "asyncio.Future[Any]"]


class GroupWriter:
    """Runs queued writes in batches on a thread of its own, one transaction a batch.

    `transaction` opens the store's unit of work (`SqliteDatabase.transaction`) and
    `execute` runs a statement on its writer connection; both are called on the thread."""

    def __init__(
        self,
        transaction: Callable[[], Any],
        execute: Callable[[str], object],
    ) -> None:
        self._transaction = transaction
        self._execute = execute
        self._start_anew()
        #: Batches committed: what tests count against the writes queued.
        self.batches = 0

    def _start_anew(self) -> None:
        # In a process forked from one that wrote, the thread did not come along: a new
        # lock, queue and thread (the parent's lock may have been held at the fork).
        self._pid = os.getpid()
        self._ready = threading.Condition(threading.Lock())
        self._queue: list[_Queued] = []
        self._thread: threading.Thread | None = None
        self._stopped = False

    async def write(self, work: Callable[[], T], /) -> T:
        """Run `work` (store calls that write) in the next batch and return its result.

        As `in_thread`: once queued, a cancelled caller still waits for its work to end, so
        nothing it does afterwards races the write."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[T] = loop.create_future()
        if self._pid != os.getpid():
            self._start_anew()
        with self._ready:
            if self._stopped:
                raise RuntimeError("the store is closed")
            self._queue.append((work, loop, done))
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name=GROUP_WRITER_THREAD, daemon=True
                )
                self._thread.start()
            self._ready.notify()
        try:
            return await asyncio.shield(done)
        except asyncio.CancelledError:
            if not done.done():
                await asyncio.wait([done])
            raise

    def stop(self) -> None:
        """Commit what is queued, then end the thread (the store is closing)."""
        with self._ready:
            self._stopped = True
            thread = self._thread
            self._ready.notify()
        if thread is not None and self._pid == os.getpid():
            thread.join()

    def _run(self) -> None:
        while True:
            with self._ready:
                while not self._queue and not self._stopped:
                    self._ready.wait()
                batch, self._queue = self._queue, []
            if not batch:
                return  # stopped, nothing left
            outcomes = self._commit(batch)
            self.batches += 1
            by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[Any], Any]]] = {}
            for (_, loop, done), outcome in zip(batch, outcomes, strict=True):
                by_loop.setdefault(loop, []).append((done, outcome))
            for loop, settled in by_loop.items():
                # That loop has closed: nobody is waiting.
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(_settle, settled)

    def _commit(self, batch: list[_Queued]) -> list[object]:
        """Each work's result, or the exception it raised; every one of them the error, when
        the transaction itself failed (nothing was committed)."""
        outcomes: list[object] = []
        try:
            with self._transaction():
                for work, _, _ in batch:
                    self._execute("SAVEPOINT queued_write")
                    try:
                        outcomes.append(_Result(work()))
                    except Exception as exc:
                        try:
                            self._execute("ROLLBACK TO queued_write")
                        except Exception:
                            # SQLite ended the whole transaction (a full disk, say): every
                            # write of the batch fails with the error that ended it.
                            raise exc from None
                        outcomes.append(exc)
                    self._execute("RELEASE queued_write")
        except Exception as exc:
            return [exc] * len(batch)
        return outcomes


class _Result:
    """A work's value, told apart from an exception it returned rather than raised."""

    __slots__ = ("value",)

    def __init__(self, value: object) -> None:
        self.value = value


def _settle(settled: list[tuple[asyncio.Future[Any], object]]) -> None:
    for done, outcome in settled:
        if done.done():
            continue
        if isinstance(outcome, _Result):
            done.set_result(outcome.value)
        else:
            assert isinstance(outcome, BaseException)
            done.set_exception(outcome)

"""Calls that go to the server together: while one batch's statement runs, the calls made
meanwhile queue, and go as the next batch, in one statement.

On the event loop a call's cost is mostly the driver's work around its round trip (about
150 µs of CPU with psycopg's asyncio waits, three times a sync call's), not the server's:
one statement for eight concurrent requests' reads pays it once. A call made while nothing
runs goes at the loop's next turn (with any made in the same turn), so a quiet service waits
for nothing.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

A = TypeVar("A")
R = TypeVar("R")


class _Queue(Generic[A, R]):
    """One event loop's calls waiting for the next batch."""

    def __init__(self) -> None:
        self.waiting: list[tuple[A, asyncio.Future[R]]] = []
        self.task: asyncio.Task[None] | None = None


class Batches(Generic[A, R]):
    """Runs calls a batch at a time through `run`, which answers a batch's arguments with
    their results in order. A call whose task is cancelled before its batch starts is left
    out of it; a batch that fails fails each of its calls with the same error."""

    def __init__(self, run: Callable[[Sequence[A]], Awaitable[list[R]]]) -> None:
        self._run = run
        # One queue per event loop: futures belong to the loop that made them.
        self._queues: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Queue[A, R]] = (
            weakref.WeakKeyDictionary()
        )

    async def call(self, argument: A) -> R:
        loop = asyncio.get_running_loop()
        queue = self._queues.get(loop)
        if queue is None:
            queue = self._queues[loop] = _Queue()
        answered: asyncio.Future[R] = loop.create_future()
        queue.waiting.append((argument, answered))
        if queue.task is None:
            queue.task = loop.create_task(self._drain(queue))
        return await answered

    async def _drain(self, queue: _Queue[A, R]) -> None:
        try:
            while queue.waiting:
                batch = [(a, f) for a, f in queue.waiting if not f.done()]
                queue.waiting = []
                if batch:
                    await self._answer(batch)
        finally:
            queue.task = None

    async def _answer(self, batch: list[tuple[A, asyncio.Future[R]]]) -> None:
        try:
            results = await self._run([argument for argument, _ in batch])
        except Exception as exc:  # the store failed: every call of the batch hears of it
            for _, answered in batch:
                if not answered.done():
                    answered.set_exception(exc)
            return
        for (_, answered), result in zip(batch, results, strict=True):
            if not answered.done():
                answered.set_result(result)

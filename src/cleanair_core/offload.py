"""The offload port: where blocking work runs, so it never stalls the event loop.

Storage waits (a write lock another process holds, a busy disk) and CPU-heavy path searches
block the thread that runs them. The async use cases hand such work to an `Offload`: the
service gives them a worker thread (`cleanair_http.offloading.in_thread`); an embedder
without an event loop to protect keeps the default, `inline`. Work that can tell when it
would wait (`WouldBlock`) can skip the thread while nothing holds the store:
`here_unless_blocked`.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from typing import Protocol, TypeVar

T = TypeVar("T")


class Offload(Protocol):
    """Runs `work` somewhere other than the event loop (a thread, say) and returns its result."""

    async def __call__(self, work: Callable[[], T], /) -> T: ...


async def inline(work: Callable[[], T], /) -> T:
    """Runs `work` right here: for callers with no event loop to keep responsive."""
    return work()


class WouldBlock(Exception):
    """A port told not to wait (`without_waiting`) would have had to: nothing was changed,
    and the same work may be run again where waiting is harmless."""


_WAITING_ALLOWED: ContextVar[bool] = ContextVar("cleanair_waiting_allowed", default=True)


def waiting_allowed() -> bool:
    """Whether a port may wait (for a lock, say) here; ports that can wait check it."""
    return _WAITING_ALLOWED.get()


def here_unless_blocked(fallback: Offload) -> Offload:
    """An `Offload` that runs work right here, telling ports not to wait, and hands it to
    `fallback` (a thread) only when a port raised WouldBlock.

    For work that changes the store in one atomic step at most (a charge's debit, a rate-limit
    hit), so running it again after WouldBlock cannot do anything twice. It spares the thread
    hop whenever nothing holds the store; when something does, only that work waits.
    """

    async def run(work: Callable[[], T], /) -> T:
        token = _WAITING_ALLOWED.set(False)
        try:
            return work()
        except WouldBlock:
            pass
        finally:
            _WAITING_ALLOWED.reset(token)
        return await fallback(work)

    return run

"""The offload port: where blocking work runs, so it never stalls the event loop.

Storage waits (a write lock another process holds, a busy disk) and CPU-heavy path searches
block the thread that runs them. The async use cases hand such work to an `Offload`: the
service gives them a worker thread (`anyio.to_thread.run_sync`); an embedder without an event
loop to protect keeps the default, `inline`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, TypeVar

T = TypeVar("T")


class Offload(Protocol):
    """Runs `work` somewhere other than the event loop (a thread, say) and returns its result."""

    async def __call__(self, work: Callable[[], T], /) -> T: ...


async def inline(work: Callable[[], T], /) -> T:
    """Runs `work` right here: for callers with no event loop to keep responsive."""
    return work()

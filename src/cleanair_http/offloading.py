"""The service's `Offload`: storage calls and path searches run in worker threads.

Every call into the store (even a read) goes through `in_thread`, so a database lock held by
another process (a CLI import, say) makes only the requests that need the store wait, in
their threads; the event loop keeps answering everything else.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import anyio.to_thread

T = TypeVar("T")


async def in_thread(work: Callable[[], T], /) -> T:
    """Run `work` in anyio's worker thread pool and return its result."""
    return await anyio.to_thread.run_sync(work)

"""The service's offloads: no store call waits on the event loop.

Path searches and store calls that write more than once run in a worker thread (`in_thread`).
One-step store calls (the bearer middleware's authentication and rate-limit hit, a charge's
debit, a read) use `here_or_in_thread`: tried right here with the store told not to wait, and
handed to a thread only when it would have had to (a lock held by another process, a CLI
import say, or by this process's other threads). So the common case pays no thread hop, and
a held lock still stalls only the requests that must write.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import anyio.to_thread

from cleanair_core.offload import here_unless_blocked

T = TypeVar("T")


async def in_thread(work: Callable[[], T], /) -> T:
    """Run `work` in anyio's worker thread pool and return its result."""
    return await anyio.to_thread.run_sync(work)


#: One-step store work: here when the store is free, else in a thread.
here_or_in_thread = here_unless_blocked(in_thread)

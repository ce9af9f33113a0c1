"""Running test work on threads released at once (the storage concurrency tests)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence


def run_together(work: Sequence[Callable[[], None]]) -> None:
    """Run each of `work` on a thread of its own, all released at once; re-raise the first
    failure."""
    barrier = threading.Barrier(len(work))
    failures: list[BaseException] = []

    def run(job: Callable[[], None]) -> None:
        try:
            barrier.wait(timeout=60)
            job()
        except BaseException as exc:  # handed to the test's thread
            failures.append(exc)

    threads = [threading.Thread(target=run, args=(job,)) for job in work]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert not any(thread.is_alive() for thread in threads)
    if failures:
        raise failures[0]

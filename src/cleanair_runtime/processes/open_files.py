"""Open files: every connection is one, and a process out of them cannot accept another.

At systemd's default soft limit (1,024 descriptors) about a thousand idle connections used to
lock new clients out until their header deadline closed them, while asyncio logged every
failed `accept()` with a traceback, thousands of times a second. So `cleanair serve` raises
its soft limit to the hard limit at start (`raise_open_files_limit`), each API process serves
at most `max_connections` connections (a request beyond them is answered 503 at once, by
uvicorn's `limit_concurrency`, whose line for each is written once a minute at most:
`RefusalLines`), and a failed `accept()` is logged once a minute at most, without a
traceback (`AcceptErrors`).
"""

from __future__ import annotations

import asyncio
import logging
import os
import resource
import time
from collections.abc import Callable
from typing import Any

from cleanair_runtime.composition.settings import Settings

log = logging.getLogger("cleanair.server")


def raise_open_files_limit() -> tuple[int, int]:
    """Raise this process's soft limit on open files to its hard limit (its children inherit
    it), logging both (at INFO when it was raised); the soft and hard limits now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    before = soft
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError) as exc:  # an unlimited hard limit the kernel refuses
            log.warning("could not raise the open files limit", extra={"error": str(exc)})
    # Said when it changed, or at DEBUG: a start-up line of every serve would be noise.
    log.log(
        logging.INFO if soft != before else logging.DEBUG,
        "open files limit",
        extra={"soft": _limit(soft), "hard": _limit(hard), "soft_at_start": _limit(before)},
    )
    return soft, hard


def _limit(value: int) -> int | str:
    return "unlimited" if value == resource.RLIM_INFINITY else value


def max_connections(settings: Settings) -> int:
    """The connections each API process serves: `CLEANAIR_MAX_CONNECTIONS`, else half the
    open-files limit. The other half is left for the connections beyond the cap (each takes
    a descriptor until it is answered 503 and closed), the database and the files: the
    process then never runs out of descriptors before it turns requests away."""
    if settings.max_connections > 0:
        return settings.max_connections
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return 1_000_000
    return max(1, soft // 2)


#: How often a failing `accept()` is logged at most.
ACCEPT_ERROR_EVERY_S = 60.0
_ACCEPT_ERROR = "socket.accept() out of system resource"


class AcceptErrors:
    """An event loop's exception handler: asyncio's own, but for a failed `accept()` (out of
    descriptors or memory), logged once per `every` seconds at most, without a traceback,
    with how many times it failed since. asyncio tries `accept()` again and again while a
    connection waits (up to the listen backlog's length per turn of the loop), logging each
    failure with its traceback: thousands of lines a second, and a core spent on them."""

    def __init__(
        self, every: float = ACCEPT_ERROR_EVERY_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._every = every
        self._clock = clock
        self._logged_at: float | None = None
        self._failures = 0

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if context.get("message") != _ACCEPT_ERROR:
            loop.default_exception_handler(context)
            return
        self._failures += 1
        now = self._clock()
        if self._logged_at is not None and now - self._logged_at < self._every:
            return
        error = context.get("exception")
        code = getattr(error, "errno", None)
        log.error(
            "cannot accept connections: out of file descriptors or memory",
            extra={
                "error": os.strerror(code) if isinstance(code, int) else type(error).__name__,
                "failures": self._failures,
                "next_report_in_s": self._every,
            },
        )
        self._logged_at, self._failures = now, 0


#: uvicorn's line for each request it answers 503 beyond `limit_concurrency`.
_REFUSED = "Exceeded concurrency limit."


class RefusalLines(logging.Filter):
    """A filter for uvicorn's logger: its line for a request refused beyond the cap, once per
    `every` seconds at most, with how many were refused since (`refused`): under the load
    that fills the cap, one line per refusal would be a flood of its own."""

    def __init__(
        self, every: float = ACCEPT_ERROR_EVERY_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        super().__init__()
        self._every = every
        self._clock = clock
        self._logged_at: float | None = None
        self._refused = 0

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg != _REFUSED:
            return True
        self._refused += 1
        now = self._clock()
        if self._logged_at is not None and now - self._logged_at < self._every:
            return False
        record.refused = self._refused
        self._logged_at, self._refused = now, 0
        return True


def quiet_refusals() -> None:
    """Have uvicorn's logger write its refusal line once a minute at most (`RefusalLines`)."""
    uvicorn_log = logging.getLogger("uvicorn.error")
    if not any(isinstance(f, RefusalLines) for f in uvicorn_log.filters):
        uvicorn_log.addFilter(RefusalLines())

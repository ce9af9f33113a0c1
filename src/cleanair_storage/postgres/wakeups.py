"""PostgreSQL LISTEN/NOTIFY: idle plan workers on any machine wake as soon as a plan is
submitted or handed back (`PlanWakeups`).

`PostgresPlans` notifies channel `cleanair_plans` (the payload: the plan's id) inside the
transaction that makes a plan claimable, so the notice is delivered when, and only if, it
commits. A subscription keeps
one connection of its own (outside the pool) that LISTENs in a background thread; after an
outage it connects again, and meanwhile workers fall back on their idle wait.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable

import psycopg

from cleanair_storage.postgres.database import with_connection_options

CHANNEL = "cleanair_plans"
#: How often the listening thread checks whether it should stop, and waits between
#: reconnection attempts, seconds.
POLL_S = 0.5

log = logging.getLogger("cleanair.plans")


class PostgresPlanWakeups:
    """`PlanWakeups` over the database at `url`."""

    def __init__(self, url: str) -> None:
        self.url = url

    def subscribe(self, wake: Callable[[], None]) -> _Listener:
        return _Listener(self.url, wake)


def _connect(url: str) -> psycopg.Connection[tuple[object, ...]]:
    return psycopg.connect(with_connection_options(url), autocommit=True)


class _Listener:
    """One LISTENing connection in a daemon thread, until `close()`."""

    def __init__(self, url: str, wake: Callable[[], None], *, poll_s: float = POLL_S) -> None:
        self._url, self._wake, self._poll_s = url, wake, poll_s
        self._stop = threading.Event()
        self.listening = threading.Event()  # set while LISTEN is in force (for tests)
        self._thread = threading.Thread(
            target=self._listen, name="cleanair-plan-wakeups", daemon=True
        )
        self._thread.start()

    def _listen(self) -> None:
        lost = False  # one line when the connection goes, one when it is back: not one a try
        while not self._stop.is_set():
            try:
                with _connect(self._url) as conn:
                    conn.execute(f"LISTEN {CHANNEL}")
                    self.listening.set()
                    if lost:
                        log.info("plan wake-ups are back")
                        lost = False
                    while not self._stop.is_set():
                        for _ in conn.notifies(timeout=self._poll_s, stop_after=1):
                            self._wake()
            except psycopg.Error:
                self.listening.clear()
                if not lost:
                    log.warning("plan wake-ups lost their connection; reconnecting")
                    lost = True
                self._stop.wait(self._poll_s)
            except Exception:  # a failing wake callback must not end the wake-ups
                log.exception("a plan wake-up failed")
        self.listening.clear()

    def close(self) -> None:
        self._stop.set()
        with contextlib.suppress(RuntimeError):
            self._thread.join(timeout=5 * POLL_S)

"""Time as a port: the core never reads the wall clock itself."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    """Source of the current time (timezone-aware, UTC)."""

    def now(self) -> datetime: ...


class SystemClock:
    """The real clock."""

    def now(self) -> datetime:
        return datetime.now(UTC)


class ManualClock:
    """A clock that only moves when told to; for tests and simulations."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2026, 1, 15, 12, 0, tzinfo=UTC)
        if self._now.tzinfo is None:
            raise ValueError("ManualClock needs a timezone-aware start")
        self._lock = threading.Lock()

    def now(self) -> datetime:
        with self._lock:
            return self._now

    def advance(self, seconds: float = 0, **delta: float) -> datetime:
        """Move forward by `seconds` (and/or timedelta keywords); returns the new time."""
        with self._lock:
            self._now += timedelta(seconds=seconds, **delta)
            return self._now

    def set(self, when: datetime) -> None:
        """Jump to `when` (forwards or backwards)."""
        with self._lock:
            self._now = when

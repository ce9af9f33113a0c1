"""A circuit breaker: while an upstream is down, calls fail at once instead of each waiting
out its deadline.

Closed (normal): calls go through; `failures` failed calls in a row open it. Open: every call
raises `SourceUnavailable` at once, its `retry_after` the seconds left, for `cooldown`
seconds. Then half-open: one trial call goes through (the others still fail at once); its
success closes the breaker, its failure opens it for another `cooldown`. A trial that ends
neither way (its caller went away) frees the slot for the next caller, so the breaker is
never stuck half-open. Time is the injected monotonic clock; one event loop calls it, so it
needs no lock.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from enum import StrEnum

from cleanair_core.errors import SourceUnavailable
from cleanair_core.metrics import Upstream

__all__ = ["BreakerState", "CircuitBreaker"]

_log = logging.getLogger("cleanair.sources.circuit_breaker")


class BreakerState(StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half-open"


#: What a caller refused while a half-open trial runs is told to wait: the trial decides
#: within one deadline, usually much sooner.
_TRIAL_RETRY_AFTER = 1


class CircuitBreaker:
    """The breaker of one upstream (`upstream` names it in logs and readiness)."""

    def __init__(
        self,
        upstream: Upstream,
        label: str,
        *,
        failures: int = 3,
        cooldown: float = 30.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        """`label` is how logs name the upstream ("Open-Meteo air quality")."""
        if failures < 1:
            raise ValueError("failures must be >= 1")
        if cooldown <= 0:
            raise ValueError("cooldown must be > 0")
        self.upstream = upstream
        self._label = label
        self._failures = failures
        self._cooldown = cooldown
        self._monotonic = monotonic
        self._failed_in_a_row = 0
        self._open_until: float | None = None
        self._trial_running = False

    @property
    def state(self) -> BreakerState:
        if self._open_until is None:
            return BreakerState.CLOSED
        if self._monotonic() < self._open_until:
            return BreakerState.OPEN
        return BreakerState.HALF_OPEN

    @contextmanager
    def call(self) -> Iterator[None]:
        """Guard one upstream call: raise `SourceUnavailable` at once while open (or while
        another caller's trial runs); count the block's `SourceUnavailable` as a failure and
        its normal end as a success."""
        trial = self._admit()
        try:
            yield
        except SourceUnavailable as exc:
            # An adapter may say why (`cause`: "ReadTimeout", "HTTP 502"); never data.
            self._failed(str(getattr(exc, "cause", "")) or type(exc).__name__)
            raise
        except BaseException:
            # Cancelled or a bug: says nothing of the upstream, but frees the trial slot.
            if trial:
                self._trial_running = False
            raise
        else:
            self._succeeded()

    def _admit(self) -> bool:
        """Whether the admitted call is the half-open trial; raises when none is admitted."""
        if self._open_until is None:
            return False
        left = self._open_until - self._monotonic()
        if left > 0:
            raise SourceUnavailable(retry_after=math.ceil(left))
        if self._trial_running:
            raise SourceUnavailable(retry_after=_TRIAL_RETRY_AFTER)
        self._trial_running = True
        return True

    def _succeeded(self) -> None:
        if self._open_until is not None:
            _log.warning(
                "%s answers again: circuit closed",
                self._label,
                extra={"upstream": str(self.upstream), "breaker": "closed"},
            )
        self._failed_in_a_row = 0
        self._open_until = None
        self._trial_running = False

    def _failed(self, cause: str) -> None:
        self._failed_in_a_row += 1
        was_trial = self._trial_running
        self._trial_running = False
        if was_trial or self._failed_in_a_row >= self._failures:
            self._open_until = self._monotonic() + self._cooldown
            _log.warning(
                "%s unavailable (%s): circuit open, calls answer 503 at once for %g s",
                self._label,
                cause,
                self._cooldown,
                extra={
                    "upstream": str(self.upstream),
                    "cause": cause,
                    "breaker": "open",
                    "failed_in_a_row": self._failed_in_a_row,
                },
            )

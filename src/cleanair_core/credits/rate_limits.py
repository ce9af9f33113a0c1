"""Fixed-window rate limits keyed on a subject (a connection, a client address, or global).

Windows are aligned to the epoch (a one-minute window starts on the minute), so Retry-After is
exactly the seconds until the window resets, as the contract words it. A client may spend a
whole window's allowance in one burst. Counters live behind a storage port so that every
process sharing one database enforces one limit.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Protocol

import attrs

from cleanair_core.errors import RateLimited


@attrs.frozen
class RateLimit:
    name: str
    limit: int
    window_seconds: int = 60

    def __attrs_post_init__(self) -> None:
        if self.limit < 1 or self.window_seconds < 1:
            raise ValueError("a rate limit needs a positive limit and window")

    def window_start(self, at: datetime) -> int:
        return int(at.timestamp()) // self.window_seconds * self.window_seconds

    def retry_after(self, at: datetime) -> int:
        reset = self.window_start(at) + self.window_seconds
        return max(1, math.ceil(reset - at.timestamp()))


class RateLimitStore(Protocol):
    """Storage port for rate-limit counters."""

    def hit(self, key: str, window_start: int, window_seconds: int = 60) -> int:
        """Count one event for `key` in the window starting at `window_start` and return the
        window's count so far. A counter from an older window starts again at zero; a hit up
        to one window older than the counter's (a host whose clock is behind) counts in the
        counter's window, and one older still (the counter came from a clock far ahead)
        starts it again from its own window."""


@attrs.frozen
class RateHit:
    """One request's hit on `key`'s counter (`RateLimitStore.hit`), over its rule when the
    window's count passes `limit`: what a final charge counts in the same write as its debit."""

    key: str
    window_start: int
    window_seconds: int
    limit: int


def hit_of(rule: RateLimit, subject: str, at: datetime) -> RateHit:
    """The hit a request of `subject` at `at` makes under `rule`."""
    return RateHit(f"{rule.name}:{subject}", rule.window_start(at), rule.window_seconds, rule.limit)


def counted_before(counter: tuple[int, int] | None, hit: RateHit) -> int:
    """What `hit` finds already counted in a counter read as `(window_start, count)`: as
    `RateLimitStore.hit` would count it, without counting it."""
    if counter is None:
        return 0
    start, count = counter
    if hit.window_start > start or hit.window_start < start - hit.window_seconds:
        return 0  # the hit would start the counter again
    return count


def enforce(store: RateLimitStore, rule: RateLimit, subject: str, at: datetime) -> None:
    """Count this request and raise RateLimited when it is over the rule's limit."""
    hit = hit_of(rule, subject, at)
    refuse_over(rule, store.hit(hit.key, hit.window_start, hit.window_seconds), at)


def refuse_over(rule: RateLimit, count: int, at: datetime) -> None:
    """Raise RateLimited when a window's `count`, this request's hit included, is over the
    rule's limit: whichever store call counted it (`enforce`, or an awaited one)."""
    if count > rule.limit:
        raise RateLimited(rule.retry_after(at))

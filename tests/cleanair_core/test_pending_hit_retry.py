"""A pending rate-limit hit whose write would have waited (WouldBlock: a SQLite store whose
commits wait for the disk, or whose writer is busy) is counted when the call runs again in
a thread, as `here_unless_blocked` runs it: a first try that wrote nothing loses nothing."""

from __future__ import annotations

import asyncio
import functools
from datetime import UTC, datetime
from typing import Any, cast

from cleanair_core.access.scopes import Scope
from cleanair_core.clock import ManualClock
from cleanair_core.keys import TokenKeys
from cleanair_core.offload import WouldBlock, here_unless_blocked, inline, waiting_allowed
from cleanair_core.policy import Policy
from cleanair_core.ports import Store
from cleanair_core.service import CleanAir
from cleanair_storage.memory import MemoryStore

KEYS = TokenKeys(b"pending-hit-retry-tests-key-32-bytes")
NOW = datetime(2026, 11, 22, 10, 15, 30, tzinfo=UTC)


class WaitingStore:
    """A MemoryStore whose writes would wait where waiting is not allowed."""

    def __init__(self) -> None:
        self.inner = MemoryStore()
        self.hits = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def hit(self, key: str, window_start: int, window_seconds: int) -> int:
        if not waiting_allowed():
            raise WouldBlock()
        self.hits += 1
        return self.inner.hit(key, window_start, window_seconds)


def test_a_hit_whose_write_would_wait_is_counted_when_run_again() -> None:
    store = WaitingStore()
    core = CleanAir(cast(Store, store), KEYS, Policy(), ManualClock(NOW))
    core.add_user("alice")
    token = core.redeem_pairing_code(core.create_pairing_code("alice"), "phone", "1.2.3.4").token
    admitted = core.admit(token, scope=Scope.AQ_READ, defer_hit=True)
    assert admitted.pending is not None
    store.hits = 0  # pairing counted its own
    here_or_inline = here_unless_blocked(inline)
    over = asyncio.run(here_or_inline(functools.partial(core.count_pending_hit, admitted.pending)))
    assert over is False
    assert store.hits == 1
    assert admitted.pending.counted
    assert core.count_pending_hit(admitted.pending) is False  # once
    assert store.hits == 1

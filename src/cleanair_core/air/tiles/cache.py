"""Rendered tiles kept in process, bounded by their bytes: least recently used out first."""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections import OrderedDict
from collections.abc import Hashable

#: The default budget: about 16,000 tiles of a few kilobytes.
DEFAULT_BUDGET_BYTES = 64 * 1024 * 1024
#: Tiles rendered at once per process (and event loop): a render holds Python's GIL for much
#: of its 20-30 ms, and several at once starved the event loop (the scores waited on it).
RENDERS_AT_ONCE = 1


class TileCache:
    """PNG bytes by key, at most `budget_bytes` of them; safe to share between threads.
    `renders` counts the tiles rendered (`rendered`) since it was made."""

    def __init__(self, budget_bytes: int = DEFAULT_BUDGET_BYTES) -> None:
        if budget_bytes < 0:
            raise ValueError("a cache budget is not negative")
        self.budget_bytes = budget_bytes
        self.renders = 0
        self._lock = threading.Lock()
        self._tiles: OrderedDict[Hashable, bytes] = OrderedDict()
        self._bytes = 0
        #: Renders under way, by key: touched on the event loop only (no lock), so that a
        #: request for a tile being rendered awaits that render instead of another.
        self.under_way: dict[Hashable, asyncio.Future[bytes]] = {}
        self._slots: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = (
            weakref.WeakKeyDictionary()
        )

    def render_slots(self) -> asyncio.Semaphore:
        """The running event loop's `RENDERS_AT_ONCE` render slots (call on the loop)."""
        loop = asyncio.get_running_loop()
        slots = self._slots.get(loop)
        if slots is None:
            slots = self._slots[loop] = asyncio.Semaphore(RENDERS_AT_ONCE)
        return slots

    def get(self, key: Hashable) -> bytes | None:
        with self._lock:
            found = self._tiles.get(key)
            if found is not None:
                self._tiles.move_to_end(key)
            return found

    def rendered(self, key: Hashable, png: bytes) -> None:
        """Count a render and keep its bytes, dropping the least recently used to fit (a
        tile larger than the whole budget is not kept)."""
        with self._lock:
            self.renders += 1
            old = self._tiles.pop(key, None)
            if old is not None:
                self._bytes -= len(old)
            if len(png) > self.budget_bytes:
                return
            self._tiles[key] = png
            self._bytes += len(png)
            while self._bytes > self.budget_bytes:
                _, dropped = self._tiles.popitem(last=False)
                self._bytes -= len(dropped)

    @property
    def size_bytes(self) -> int:
        with self._lock:
            return self._bytes

    def __len__(self) -> int:
        with self._lock:
            return len(self._tiles)

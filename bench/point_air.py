"""The air at one point, in process (`make bench`, section 25): what a served score's air costs.

A score asks its source for one sample, the period's start at the point. Timed here, best of
60 rounds of 20 scores (`score_at`, the score included) at a central Helsinki point, over
the service's layers one by one: the embedded model alone, downscaled to street level by the
shipped network's traffic, and fused with an empty observation store (a deployment without
stations, the default). To compare two checkouts, run this in each, alternating; the
machine is shared, so compare their ratio, not the microseconds.

Alone: `PYTHONPATH=. .venv/bin/python -m bench.point_air` (about 20 seconds).
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime

from cleanair_core.air.gridded_fused_air import fused_air
from cleanair_core.air.point_score import score_at
from cleanair_core.air.quality_source import AirQualitySource
from cleanair_core.air.street_level import street_level_air
from cleanair_core.clock import ManualClock
from cleanair_core.geo import Point
from cleanair_runtime.composition.bootstrap import DEFAULT_NETWORK_FILE
from cleanair_sources.embedded_model import EmbeddedModel
from cleanair_sources.gazetteer import Gazetteer
from cleanair_sources.osm_import import import_network
from cleanair_sources.street_increments import NetworkIncrements
from cleanair_storage.memory import MemoryStore

ROUNDS = 60
SCORES = 20
POINT = Point(60.1699, 24.9384)
NOW = datetime(2026, 11, 24, 12, 20, tzinfo=UTC)


async def best_us(source: AirQualitySource) -> float:
    """The least time of one score over `ROUNDS` rounds of `SCORES`, microseconds."""

    async def scores() -> None:
        for _ in range(SCORES):
            await score_at(source, POINT, NOW)

    await scores()  # warm the caches
    best = float("inf")
    for _ in range(ROUNDS):
        started = time.perf_counter()
        await scores()
        best = min(best, (time.perf_counter() - started) / SCORES)
    return best * 1e6


async def main() -> None:
    """Section 24, printed."""
    network = import_network(DEFAULT_NETWORK_FILE, "helsinki")
    model = EmbeddedModel(Gazetteer.load())
    street = street_level_air(model, model, NetworkIncrements([network]))
    fused = fused_air(street, MemoryStore(), clock=ManualClock(NOW))
    figures = {
        name: await best_us(source)
        for name, source in (("model", model), ("street", street), ("fused", fused))
    }
    print(f"the air at a point, in process (score_at, best of {ROUNDS} rounds of {SCORES}):")
    print(f"  embedded model alone                     {figures['model']:7.1f} µs")
    print(f"  + street level (Helsinki's traffic)      {figures['street']:7.1f} µs")
    print(f"  + fusion, no stations (the default)      {figures['fused']:7.1f} µs")


if __name__ == "__main__":
    asyncio.run(main())

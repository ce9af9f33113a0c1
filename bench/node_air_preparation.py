"""A plan process's memory across an hour's turn, in process, on a generated city (M37).

Ten minutes before each hour a plan worker prepares the node air of the coming hour and the
one after it (`NetworkAir.prepare`, `use_cases.routes.prepare_network_air`). Here, on a
generated grid (`planning.city_grid`, a million nodes by default) with the embedded model at
street level: `WALKS` walks of 2-5 km planned at 21:40 UTC, the hours of 22:00 and 23:00
prepared as the worker does, the same walks planned again at 22:05. Printed: the traced
(NumPy and Python) peak of the preparation, its CPU time, the node air written, the process's
peak RSS and a digest of every plan's result (equal between checkouts when the answers are).

The hours are pinned: before M37 the whole network was prepared whatever the time, which
`bench.shared_networks` sees only when its plan processes run in an hour's last ten minutes
(the 230-310 MiB of own memory found at 21:51-21:58 UTC). Run alone:
`PYTHONPATH=. .venv/bin/python -m bench.node_air_preparation [--nodes N]`; against another
checkout, put its `src` first on PYTHONPATH.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import hashlib
import math
import os
import pickle
import resource
import time
import tracemalloc
from datetime import UTC, datetime, timedelta

from bench.planning import WALK, city_grid, walk_pairs
from cleanair_core.air.street_level import GriddedStreetLevelAir, street_level_air
from cleanair_core.routes.network_air import NetworkAir
from cleanair_core.routes.planner import plan_routes
from cleanair_core.routes.plans import PlanRequest
from cleanair_core.routes.results import PlanResult
from cleanair_sources.embedded_model import EmbeddedModel
from cleanair_sources.gazetteer import Gazetteer
from cleanair_sources.street_increments import NetworkIncrements
from cleanair_sources.street_router import LoadedNetworks

WALKS = 4
#: Helsinki's midnight in November: the hour the finding was first put down to.
TURN = datetime(2026, 11, 24, 22, tzinfo=UTC)
MIB = 1024 * 1024


async def measure(nodes: int) -> dict[str, float | str]:
    """Plans before the turn, the preparation, plans after it: the figures printed."""
    grid = city_grid(math.isqrt(nodes), seed=13)
    background = EmbeddedModel(Gazetteer.load())
    air = street_level_air(background, background, NetworkIncrements([grid]))
    assert isinstance(air, GriddedStreetLevelAir)
    networks = LoadedNetworks([grid])
    pairs = walk_pairs(grid, WALKS, 7, 2_000.0, 5_000.0)
    cache = NetworkAir()
    results: list[PlanResult] = []
    for start, end in pairs:
        request = PlanRequest(start, end, WALK, TURN - timedelta(minutes=20))
        results.append(await plan_routes(request, networks, air, network_air=cache))
    gc.collect()
    tracemalloc.start()
    cpu = time.process_time()
    for hour in (TURN, TURN + timedelta(hours=1)):
        await cache.prepare(grid, air, hour)
    cpu = time.process_time() - cpu
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    for start, end in pairs:
        request = PlanRequest(start, end, WALK, TURN + timedelta(minutes=5))
        results.append(await plan_routes(request, networks, air, network_air=cache))
    return {
        "nodes": grid.node_count,
        "peak": peak / MIB,
        "cpu": cpu,
        "written": cache.bytes_written / MIB,
        "max_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "digest": hashlib.sha256(pickle.dumps(results)).hexdigest()[:12],
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="bench.node_air_preparation")
    parser.add_argument("--nodes", type=int, default=1_000_000)
    args = parser.parse_args(argv)
    load = os.getloadavg()[0]
    figures = asyncio.run(measure(args.nodes))
    print(
        f"node air prepared for the next two hours, in process ({figures['nodes']:,}-node "
        f"generated grid, {WALKS} walks before and after the turn; load {load:.2f}):"
    )
    print(
        f"  preparation: traced peak {figures['peak']:,.1f} MiB, CPU {figures['cpu']:.2f} s; "
        f"node air written {figures['written']:,.1f} MiB; process peak RSS "
        f"{figures['max_rss']:,.0f} MiB; plans' digest {figures['digest']}"
    )


if __name__ == "__main__":
    main()

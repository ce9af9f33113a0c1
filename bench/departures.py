"""The best time to go (issue 24): does a departure's dose equal what enrichment reports?

For random walks in the shipped central-Helsinki network, with the embedded model downscaled
to street level, each trip is planned at start times spread over the hours (minutes past the
hour drawn at random, so many walks cross the hour), and every route the plan returns is
enriched as `POST /v1/airquality/routes` does (`enrich_route`: each waypoint at its own time,
asked of the real source). The figure is the relative gap between the plan's reported dose
and the enrichment's. The issue's aim: at most 1 %. The same for an hourly CAMS-like
background (one value per cell and UTC hour, as Open-Meteo gives, far apart from hour to
hour) at street level, whose air moves within the hour by the traffic (issue 30: the plan's
dose must be the enrichment endpoint's exactly), with the time a plan takes over each.

Run: `.venv/bin/python -m bench.departures` (not part of `make bench`).
"""

from __future__ import annotations

import asyncio
import random
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import numpy as np

from bench.planning import walk_pairs
from bench.quality import CAMS_LIKE
from cleanair_core.air.pollutants import Concentrations
from cleanair_core.air.quality_source import AirQualitySource, Sample
from cleanair_core.air.street_level import GridCell, street_level_air
from cleanair_core.errors import PlanRejected
from cleanair_core.routes.departures import plan_departures
from cleanair_core.routes.enrichment import enrich_route
from cleanair_core.routes.network import PlanActivityType, StreetNetwork
from cleanair_core.routes.network_air import NetworkAir
from cleanair_core.routes.planner import plan_routes
from cleanair_core.routes.plans import DeparturesRequest, PlanRequest
from cleanair_runtime.composition.bootstrap import DEFAULT_NETWORK_FILE
from cleanair_sources.embedded_model import EmbeddedModel
from cleanair_sources.gazetteer import Gazetteer
from cleanair_sources.osm_import import import_network
from cleanair_sources.street_increments import NetworkIncrements
from cleanair_sources.street_router import LoadedNetworks

WALK = PlanActivityType.WALKING
WALKS = 20
DEPARTURES = 6  # per walk
#: A weekday morning in Helsinki (UTC): the rush hour's air changes fastest.
DAY = datetime(2026, 11, 24, 5, 0, tzinfo=UTC)

#: Each UTC hour's CAMS-like background, as a multiple of `CAMS_LIKE`.
HOUR_FACTORS = (1.0, 1.6, 0.7, 1.3)


class HourlyCell:
    """A CAMS-like background as Open-Meteo answers it: one value per 0.1 degree cell and
    UTC hour, the hour's value at every instant in it, changing from hour to hour."""

    update_interval = 3600

    async def concentrations(self, samples: Sequence[Sample]) -> list[Concentrations]:
        factors = [HOUR_FACTORS[sample.at.hour % len(HOUR_FACTORS)] for sample in samples]
        return [
            {p: None if value is None else value * f for p, value in CAMS_LIKE.items()}
            for f in factors
        ]

    def cell_of(self, lat: float, lon: float) -> GridCell:
        south, west = np.floor(lat * 10) / 10, np.floor(lon * 10) / 10
        return GridCell(float(south), float(west), float(south) + 0.1, float(west) + 0.1)


async def dose_gaps(network: StreetNetwork, air: AirQualitySource) -> dict[str, float]:
    """The relative gaps |plan - enrichment| / enrichment over every route of every plan."""
    networks = LoadedNetworks([network])
    cache = NetworkAir()
    rng = random.Random(24)
    gaps: list[float] = []
    crossing: list[float] = []
    seconds: list[float] = []
    for start, end in walk_pairs(network, WALKS, seed=24):
        for _ in range(DEPARTURES):
            at = DAY + timedelta(hours=rng.randrange(12), seconds=rng.uniform(0, 3600))
            started = time.perf_counter()
            try:
                result = await plan_routes(
                    PlanRequest(start, end, WALK, at), networks, air, None, cache
                )
            except PlanRejected:
                continue
            seconds.append(time.perf_counter() - started)
            for planned in result.routes:
                route = planned.route
                enriched = await enrich_route(air, route.points, route.times, WALK.activity)
                mine, theirs = route.summary.inhaled_dose, enriched.summary.inhaled_dose
                if mine is None or theirs is None or theirs <= 0:
                    continue
                gap = abs(mine - theirs) / theirs
                gaps.append(gap)
                if route.times[-1].hour != route.times[0].hour:
                    crossing.append(gap)
    found = np.array(gaps)
    return {
        "routes": float(found.size),
        "crossing": float(len(crossing)),
        "max": float(found.max()) if found.size else 0.0,
        "p95": float(np.percentile(found, 95)) if found.size else 0.0,
        "median": float(np.median(found)) if found.size else 0.0,
        "max_crossing": max(crossing, default=0.0),
        "over_1pct": float((found > 0.01).mean()) if found.size else 0.0,
        "plan_ms": float(np.median(seconds)) * 1000 if seconds else 0.0,
    }


async def one_window(
    network: StreetNetwork,
    air: AirQualitySource,
    span: timedelta = timedelta(hours=12),
    step: timedelta = timedelta(minutes=30),
) -> dict[str, float]:
    """One trip over a window of departures: how long it takes, what it saves."""
    start, end = walk_pairs(network, 1, seed=7)[0]
    request = DeparturesRequest(start, end, WALK, DAY, DAY + span, step)
    started = time.perf_counter()
    result = await plan_departures(request, LoadedNetworks([network]), air)
    return {
        "departures": float(len(result.departures)),
        "seconds": time.perf_counter() - started,
        "saved_pct": result.dose_saved_pct or 0.0,
        "best_hour": result.best.start_time.hour + result.best.start_time.minute / 60,
    }


async def main() -> None:
    network = import_network(DEFAULT_NETWORK_FILE, "helsinki")
    model = EmbeddedModel(Gazetteer.load())
    air = street_level_air(model, model, NetworkIncrements([network]))
    hourly = HourlyCell()
    sources = {
        "embedded model + street level": air,
        "hourly CAMS-like cell + street level": street_level_air(
            hourly, hourly, NetworkIncrements([network])
        ),
    }
    for name, source in sources.items():
        started = time.perf_counter()
        gaps = await dose_gaps(network, source)
        print(
            f"plan dose against enrichment (central Helsinki, {name}, "
            f"{WALKS} walks x {DEPARTURES} random start times): {gaps['routes']:.0f} routes "
            f"({gaps['crossing']:.0f} crossing an hour); gap median {gaps['median']:.3%}, "
            f"95th percentile {gaps['p95']:.3%}, largest {gaps['max']:.3%} "
            f"(largest of a walk crossing the hour {gaps['max_crossing']:.3%}); "
            f"{gaps['over_1pct']:.1%} of routes over 1 %; a plan {gaps['plan_ms']:.0f} ms "
            f"median ({time.perf_counter() - started:.0f} s)"
        )
    hourly_window = await one_window(network, sources["hourly CAMS-like cell + street level"])
    print(
        f"hourly CAMS-like cell + street level: one trip, {hourly_window['departures']:.0f} "
        f"departures 30 min apart over 12 h: {hourly_window['seconds']:.1f} s"
    )
    window = await one_window(network, air)
    print(
        f"one trip, {window['departures']:.0f} departures 30 min apart over 12 h: "
        f"{window['seconds']:.1f} s; best at {window['best_hour']:.1f} h UTC, "
        f"{window['saved_pct']:.1f} % less dose than the direct route at the earliest"
    )
    widest = await one_window(network, air, timedelta(hours=24), timedelta(minutes=5))
    print(
        f"the widest window, {widest['departures']:.0f} departures 5 min apart over 24 h: "
        f"{widest['seconds']:.1f} s ({widest['seconds'] / widest['departures'] * 1000:.0f} ms "
        "a departure)"
    )


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))

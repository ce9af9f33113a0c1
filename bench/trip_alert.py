"""Timing: trip alerts, core alone (issue 32's bench: 10,000 trip subscriptions beside
100,000 place ones, the whole round in under 60 s on the 2-core machine). Not part of
`make bench`: run `python -m bench.trip_alert`.

10,000 weekday trips over a 20 km square of Helsinki, walked, cycled or run, 1 to 8 km
each on a straight route (`direct_route`: the points a planned route keeps, every 100 m),
all due (a "tomorrow at 21:00" forecast on a Sunday evening). The air comes from the
embedded model as arrays (`fetch_cell_air` of `trip_air_wanted`'s cells). Timed:

- the first evaluation, from no state, with a threshold every trip passes: each decides an
  alert, so each computes its 13 departures' doses (the worst case: every trip told);
- the rounds after it the same evening, from the state saved: the category again, no
  departures (nothing new to tell), the state read and compared.
"""

from __future__ import annotations

import asyncio
import math
import random
import time
import uuid
from datetime import UTC, datetime, timedelta
from datetime import time as wall

from cleanair_core.alerts.evaluation import fetch_cell_air
from cleanair_core.alerts.events import Direction
from cleanair_core.alerts.subscriptions import (
    Audience,
    Forecast,
    StoredState,
    Subscription,
    TargetDay,
    Trip,
)
from cleanair_core.alerts.trip_routes import TripRoute, direct_route
from cleanair_core.alerts.trips import TripAir, decide_trip, trip_air_wanted
from cleanair_core.geo import EARTH_RADIUS_M, Point
from cleanair_core.routes.network import PlanActivityType
from cleanair_sources.embedded_model import EmbeddedModel
from cleanair_sources.gazetteer import Gazetteer

TRIPS = 10_000
CENTRE = Point(60.17, 24.94)
#: Sunday 22 November 2026, 21:07 in Helsinki.
NOW = datetime(2026, 11, 22, 19, 7, tzinfo=UTC)


def trips() -> list[tuple[Subscription, TripRoute]]:
    rng = random.Random(32)
    batch = []
    for n in range(TRIPS):
        start = Point(CENTRE.lat + rng.uniform(-0.09, 0.09), CENTRE.lon + rng.uniform(-0.18, 0.18))
        metres, bearing = rng.uniform(1000, 8000), rng.uniform(0, 2 * math.pi)
        north = math.degrees(metres * math.cos(bearing) / EARTH_RADIUS_M)
        east = math.degrees(
            metres * math.sin(bearing) / (EARTH_RADIUS_M * math.cos(math.radians(start.lat)))
        )
        end = Point(start.lat + north, start.lon + east)
        activity = rng.choice(list(PlanActivityType))
        departure = wall(rng.randrange(6, 10), rng.choice((0, 15, 30, 45)))
        subscription = Subscription(
            id=uuid.UUID(int=n + 1),
            owner=f"user{n}",
            connection_id="c",
            created_at=NOW - timedelta(days=3),
            target=Trip(start, end, activity, departure, frozenset(range(1, 6))),
            index="eu_eaqi_2024",
            threshold=0,  # every trip passes it: every one decides an alert
            direction=Direction.WORSE,
            audience=Audience.GENERAL,
            kind=Forecast(TargetDay.TOMORROW, wall(21, 0)),
            timezone="Europe/Helsinki",
        )
        batch.append((subscription, direct_route(start, end)))
    return batch


async def main() -> None:
    batch = trips()
    model = EmbeddedModel(Gazetteer.load())
    model.concentrations_at(CENTRE, NOW)  # load the gazetteer outside the timing
    points = sum(len(route.points) for _, route in batch)
    started = time.perf_counter()
    cells = trip_air_wanted(batch, NOW)
    air = TripAir(await fetch_cell_air(model, cells, NOW))
    fetched, fetched_cpu = time.perf_counter(), time.process_time()
    decisions = [decide_trip(s, StoredState(0, None), route, air, {}, NOW) for s, route in batch]
    first, first_cpu = time.perf_counter(), time.process_time()
    events = sum(len(d.events) for d in decisions if d is not None)
    later = NOW + timedelta(hours=1)
    again = [
        decide_trip(s, StoredState(1, d.blob), route, air, {}, later)
        for (s, route), d in zip(batch, decisions, strict=True)
        if d is not None
    ]
    done, done_cpu = time.perf_counter(), time.process_time()
    print(
        f"{len(batch)} trips, {points / len(batch):.0f} points a route, {len(cells)} cells: "
        f"air {fetched - started:.2f} s; first evaluation, {events} alerts with their "
        f"departures: {_per_trip(first - fetched, first_cpu - fetched_cpu, len(batch))}; "
        f"rounds after it, {sum(d is not None for d in again)} decisions: "
        f"{_per_trip(done - first, done_cpu - first_cpu, len(batch))}"
    )


def _per_trip(wall: float, cpu: float, trips: int) -> str:
    # The machine is shared: the CPU time is the cost, the wall time what the load made of it.
    return (
        f"{wall:.2f} s wall, {cpu:.2f} s CPU ({wall / trips * 1000:.2f} ms wall, "
        f"{cpu / trips * 1000:.2f} ms CPU a trip)"
    )


if __name__ == "__main__":
    asyncio.run(main())

"""Timing: one hourly alert round of 100,000 place subscriptions over one city, core alone
(issue 32's aim: the whole round in under 60 s on the 2-core machine). Not yet part of
`make bench`: run `python -m bench.alert_round`.

Half the subscriptions are observed, half forecast (due: their sending time has passed),
spread over a 20 km square of Helsinki; each has a stored state from a previous round, so
the round decodes, decides and encodes as it will for real. The air comes from the embedded
model, through `fetch_cell_air` both ways: as a `GriddedAir` (arrays) and as samples.
"""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from datetime import UTC, datetime, timedelta
from datetime import time as wall

from cleanair_core.alerts.alert_states import encode_state
from cleanair_core.alerts.episodes import ObservedState
from cleanair_core.alerts.evaluation import air_wanted, decide, fetch_cell_air
from cleanair_core.alerts.events import Direction
from cleanair_core.alerts.forecasts import ForecastState
from cleanair_core.alerts.subscriptions import (
    Audience,
    Forecast,
    Observed,
    Place,
    StoredState,
    Subscription,
    TargetDay,
)
from cleanair_core.geo import Point
from cleanair_sources.embedded_model import EmbeddedModel
from cleanair_sources.gazetteer import Gazetteer

SUBSCRIPTIONS = 100_000
CENTRE = Point(60.17, 24.94)
NOW = datetime(2026, 11, 24, 20, 7, tzinfo=UTC)


def subscriptions() -> list[tuple[Subscription, StoredState]]:
    rng = random.Random(32)
    batch = []
    for n in range(SUBSCRIPTIONS):
        point = Point(CENTRE.lat + rng.uniform(-0.09, 0.09), CENTRE.lon + rng.uniform(-0.18, 0.18))
        observed = n % 2 == 0
        kind = (
            Observed()
            if observed
            else Forecast(TargetDay.TOMORROW, wall(rng.randrange(0, 21), rng.choice((0, 30))))
        )
        state = (
            ObservedState(last_hour=NOW - timedelta(hours=1, minutes=7))
            if observed
            else (ForecastState())
        )
        subscription = Subscription(
            id=uuid.UUID(int=n + 1),
            owner=f"user{n // 4}",
            connection_id="c",
            created_at=NOW - timedelta(days=3),
            target=Place(point),
            index=None if n % 3 else "eu_eaqi_2024",
            threshold=rng.randrange(1, 4),
            direction=Direction.WORSE,
            audience=Audience.GENERAL,
            kind=kind,
            timezone="Europe/Helsinki",
        )
        batch.append((subscription, StoredState(3, encode_state(state))))
    return batch


async def main() -> None:
    batch = subscriptions()
    model = EmbeddedModel(Gazetteer.load())
    model.concentrations_at(CENTRE, NOW)  # load the gazetteer outside the timing
    for gridded in (True, False):
        started = time.perf_counter()
        cells = air_wanted((s for s, _ in batch), NOW)
        wanted = time.perf_counter()
        source = model if gridded else _Samples(model)
        air = await fetch_cell_air(source, cells, NOW)
        fetched = time.perf_counter()
        decisions = decide(batch, air, dict.fromkeys(cells, "FI"), NOW)
        done = time.perf_counter()
        events = sum(len(d.events) for d in decisions)
        print(
            f"{'gridded' if gridded else 'samples'}: {len(batch)} subscriptions, "
            f"{len(cells)} cells, {len(decisions)} decisions, {events} events: "
            f"due {wanted - started:.2f} s, air {fetched - wanted:.2f} s, "
            f"decide {done - fetched:.2f} s, total {done - started:.2f} s"
        )


class _Samples:
    """The model seen as a plain `AirQualitySource` (samples, not arrays)."""

    def __init__(self, model: EmbeddedModel) -> None:
        self.update_interval = model.update_interval
        self._model = model

    async def concentrations(self, samples):  # type: ignore[no-untyped-def]
        return await self._model.concentrations(samples)


if __name__ == "__main__":
    asyncio.run(main())

"""Fusion asked for many hours at once (a history's page): the same answers as hour by hour,
however many fields the request needs beyond those the fusion keeps."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from cleanair_core.air.fused_air import FusedAir
from cleanair_core.air.fusion import FUSION_PARAMETERS, latest_hours, latest_hours_each
from cleanair_core.air.observations import OBSERVED, Observation, Station
from cleanair_core.air.pollutants import SCORED, Concentrations
from cleanair_core.air.quality_source import Sample
from cleanair_core.air.screening import RecentValues, in_line, in_line_of
from cleanair_core.clock import ManualClock
from cleanair_core.geo import Point
from cleanair_storage.memory import MemoryStore

HOUR = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)
CENTRE = Point(60.17, 24.94)


class FlatAir:
    update_interval = 3600

    async def concentrations(self, samples: Sequence[Sample]) -> list[Concentrations]:
        return [dict.fromkeys(SCORED, 20.0) for _ in samples]


def test_a_request_needing_more_fields_than_are_kept_is_corrected_every_hour_each_time() -> None:
    """80 hours of four pollutants are 320 fields, over the 256 kept: the second request,
    whose new fields push out some it found kept, still corrects every hour (it left some
    hours uncorrected)."""
    store = MemoryStore()
    store.put_stations([Station("t:1", "Kallio", Point(60.171, 24.941))])
    hours = [HOUR - timedelta(hours=k) for k in range(79, -1, -1)]
    store.put_observations(
        [Observation("t:1", p, h, 60.0 + k % 5) for k, h in enumerate(hours) for p in OBSERVED]
    )
    air = FusedAir(FlatAir(), store, clock=ManualClock(HOUR), parameters=FUSION_PARAMETERS)
    for _ in range(2):
        explained = asyncio.run(air.explain_hours(CENTRE, hours))
        assert all(explained_hour[p].corrected for explained_hour in explained for p in OBSERVED)
    one = asyncio.run(air.explain(CENTRE, hours[40]))
    assert one == asyncio.run(air.explain_hours(CENTRE, hours))[40]


@given(
    ends=st.lists(st.integers(min_value=0, max_value=200), max_size=40),
    wanted=st.lists(st.integers(min_value=-10, max_value=210), min_size=1, max_size=20),
)
def test_the_latest_hours_of_many_hours_are_each_hours_own(
    ends: list[int], wanted: list[int]
) -> None:
    rows = sorted(
        (
            Observation(f"t:{k % 3}", OBSERVED[k % len(OBSERVED)], HOUR + timedelta(hours=e), 1.0)
            for k, e in enumerate(ends)
        ),
        key=lambda o: (o.hour_end, o.station_id, o.pollutant.value),
    )
    hours = [HOUR + timedelta(hours=w) for w in wanted]
    each = latest_hours_each(rows, hours)
    for hour in hours:
        assert each[hour] == latest_hours(rows, hour)


@given(
    values=st.lists(
        st.tuples(
            st.integers(min_value=0, max_value=5),  # station
            st.integers(min_value=0, max_value=40),  # hour
            st.sampled_from([1.0, 5.0, 20.0, 400.0]),
        ),
        max_size=80,
        unique_by=lambda v: (v[0], v[1]),
    ),
    at=st.integers(min_value=0, max_value=40),
)
def test_screening_with_indexed_recent_values_is_the_scans(
    values: list[tuple[int, int, float]], at: int
) -> None:
    stations = {
        f"t:{k}": Station(f"t:{k}", f"s{k}", Point(60.17 + 0.01 * k, 24.94)) for k in range(6)
    }
    rows = sorted(
        (Observation(f"t:{k}", OBSERVED[2], HOUR + timedelta(hours=h), v) for k, h, v in values),
        key=lambda o: (o.hour_end, o.station_id),
    )
    hour = [o for o in rows if o.hour_end == HOUR + timedelta(hours=at)]
    assert in_line_of(hour, RecentValues(rows), stations) == in_line(hour, rows, stations)

"""Fusion regressions a review found: each test failed on 8ed4c4c."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from datetime import UTC, datetime

import numpy as np
import pytest

from cleanair_core.air.fused_air import FusedAir
from cleanair_core.air.fusion import FUSION_PARAMETERS, background_error, residual_field
from cleanair_core.air.fusion_fit import leave_one_out
from cleanair_core.air.observations import Observation, Station, StationType
from cleanair_core.air.pollutants import SCORED, Concentrations, Pollutant
from cleanair_core.air.quality_source import Sample
from cleanair_core.geo import Point
from cleanair_storage.memory import MemoryStore

HOUR_END = datetime(2026, 3, 10, 9, 0, tzinfo=UTC)
HELSINKI = Point(60.17, 24.94)
NO2 = FUSION_PARAMETERS[Pollutant.NO2]


def offset(point: Point, north_m: float, east_m: float) -> Point:
    return Point(
        point.lat + north_m / 111_195.0,
        point.lon + east_m / (111_195.0 * math.cos(math.radians(point.lat))),
    )


class Flat:
    update_interval = 3600

    async def concentrations(self, samples: Sequence[Sample]) -> list[Concentrations]:
        return [dict.fromkeys(SCORED, 20.0) for _ in samples]


def served(
    stations: list[Station], observed: list[float], background: list[float], k: int, params: object
) -> float:
    rest = [j for j in range(len(stations)) if j != k]
    field = residual_field(
        [stations[j] for j in rest],
        [observed[j] - background[j] for j in rest],
        params,  # type: ignore[arg-type]
        HOUR_END,
        [background[j] for j in rest],
    )
    p = stations[k].point
    return max(
        0.0,
        background[k]
        + float(field.at(np.array([p.lat]), np.array([p.lon]), np.array([background[k]]))[0]),
    )


def test_leave_one_out_counts_a_neighbours_street_term() -> None:
    """fusion_fit.leave_one_out vs the served field, station 1 on station 0's street (30 m)."""
    stations = [
        Station("t:0", "traffic", HELSINKI, StationType.TRAFFIC),
        Station("t:1", "kerb", offset(HELSINKI, 0, 30)),
        Station("t:2", "b", offset(HELSINKI, 3_000, 1_000)),
        Station("t:3", "b", offset(HELSINKI, -4_000, 2_000)),
    ]
    observed = [55.0, 35.0, 30.0, 22.0]
    background = [20.0, 21.0, 24.0, 26.0]
    fused, _ = leave_one_out(stations, np.array([observed]), np.array([background]), NO2)
    assert fused[0, 1] == pytest.approx(served(stations, observed, background, 1, NO2), rel=1e-6)


@pytest.mark.parametrize("kind", [StationType.TRAFFIC, StationType.INDUSTRIAL])
def test_the_standard_error_does_not_collapse_at_a_traffic_or_industrial_station(
    kind: StationType,
) -> None:
    """One traffic (industrial) station that agrees with the background: its own point's
    standard error was 0.0005 µg/m³ (its street's variance was explained but not counted),
    where a background station's is 4.9 (the background's 16)."""
    store = MemoryStore()
    store.put_stations([Station("t:1", "s", HELSINKI, kind)])
    store.put_observations([Observation("t:1", Pollutant.NO2, HOUR_END, 20.0)])
    source = FusedAir(Flat(), store)
    value = asyncio.run(source.explain(HELSINKI, HOUR_END))[Pollutant.NO2]
    field = source.stations_used(HOUR_END)[Pollutant.NO2]
    share = float(field.unexplained(np.array([HELSINKI.lat]), np.array([HELSINKI.lon]))[0])
    assert share > 1e-6  # the covariance explains no more than the variance (not clipped)
    assert value.standard_error > 0.1 * background_error(NO2, 20.0)

"""Fusion regressions a review found: each test failed on 8ed4c4c."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

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


# -- a second review (after e6d1c8d): each failed before its fix


def ring(count: int, radius_m: float = 8_000.0) -> list[Station]:
    return [
        Station(
            f"r:{i}",
            f"r {i}",
            offset(
                HELSINKI,
                radius_m * math.cos(2 * math.pi * i / count),
                radius_m * math.sin(2 * math.pi * i / count),
            ),
        )
        for i in range(count)
    ]


def week(
    stations: Sequence[Station], hours: int, end: datetime, seed: int = 1
) -> list[Observation]:
    rng = np.random.default_rng(seed)
    return [
        Observation(s.id, Pollutant.NO2, end - timedelta(hours=back), float(v))
        for back in range(hours)
        for s, v in zip(stations, rng.uniform(15.0, 45.0, len(stations)), strict=True)
    ]


class FailingWide(Flat):
    """Answers a handful of samples, fails a fit's hundreds (an upstream timing out)."""

    async def concentrations(self, samples: Sequence[Sample]) -> list[Concentrations]:
        if len(samples) > 50:
            raise RuntimeError("upstream timed out")
        return await super().concentrations(samples)


def test_a_background_unavailable_for_a_fit_keeps_the_fallback_and_answers() -> None:
    stations = ring(6)
    store = MemoryStore()
    store.put_stations(stations)
    store.put_observations(week(stations, 48, HOUR_END))
    source = FusedAir(FailingWide(), store)
    value = asyncio.run(source.explain(HELSINKI, HOUR_END))[Pollutant.NO2]
    assert value.fitted is False  # the fallback fused it
    assert value.corrected is True
    assert source.stations_used(HOUR_END)[Pollutant.NO2].params == NO2


def test_a_reading_is_screened_alike_whichever_hour_was_asked_first() -> None:
    """One station's jump to 1,500 after a day at 20: set aside whether the hour itself or a
    forecast hour two days on is asked first (the screen's history was cut short)."""
    stations = ring(1)
    store = MemoryStore()
    store.put_stations(stations)
    store.put_observations(
        Observation("r:0", Pollutant.NO2, HOUR_END - timedelta(hours=back), 20.0)
        for back in range(1, 25)
    )
    store.put_observations([Observation("r:0", Pollutant.NO2, HOUR_END, 1_500.0)])
    point = stations[0].point
    answers = []
    for first in (HOUR_END, HOUR_END + timedelta(hours=71)):
        source = FusedAir(Flat(), store)
        asyncio.run(source.concentrations([Sample(point, first)]))
        [air] = asyncio.run(source.concentrations([Sample(point, HOUR_END)]))
        answers.append(air[Pollutant.NO2])
    assert answers[0] == answers[1]
    assert answers[0] is not None
    assert answers[0] < 30.0  # the day before's 20, not 1,500


def test_a_fit_is_made_on_the_readings_fusion_keeps() -> None:
    """A reading fusion sets aside (out of line, under the bound) does not steer the fit:
    with it, the fit is the one made without it."""
    stations = ring(8)
    when = HOUR_END - timedelta(hours=30)
    clean = [o for o in week(stations, 60, HOUR_END) if (o.station_id, o.hour_end) != ("r:3", when)]
    found = []
    for rows in (clean, [*clean, Observation("r:3", Pollutant.NO2, when, 4_000.0)]):
        store = MemoryStore()
        store.put_stations(stations)
        store.put_observations(rows)
        source = FusedAir(Flat(), store)
        asyncio.run(source.explain(HELSINKI, HOUR_END))
        found.append(source.stations_used(HOUR_END)[Pollutant.NO2].params)
    assert found[0] == found[1]


def test_a_request_needing_more_fields_than_are_kept_is_fused_throughout() -> None:
    """80 samples at distinct past hours, four pollutants: more fields than the 256 kept;
    every sample is corrected as it would be alone."""
    stations = ring(1)
    store = MemoryStore()
    store.put_stations(stations)
    store.put_observations(
        Observation("r:0", pollutant, HOUR_END - timedelta(hours=back), 60.0)
        for back in range(80)
        for pollutant in (Pollutant.NO2, Pollutant.PM25, Pollutant.PM10, Pollutant.O3)
    )
    point = stations[0].point
    samples = [Sample(point, HOUR_END - timedelta(hours=back)) for back in range(80)]
    together = asyncio.run(FusedAir(Flat(), store).concentrations(samples))
    for sample, air in zip(samples, together, strict=True):
        [alone] = asyncio.run(FusedAir(Flat(), store).concentrations([sample]))
        assert air[Pollutant.NO2] == pytest.approx(alone[Pollutant.NO2], rel=1e-9)


@pytest.mark.parametrize("seed", range(6))
def test_the_leave_one_outs_unexplained_share_is_the_served_one_beside_streets(
    seed: int,
) -> None:
    """Near traffic and industrial stations too: the share the fit calibrates q on is the
    one the service serves there (it counted the held-out station's own street)."""
    rng = np.random.default_rng(seed)
    kinds = [None, StationType.TRAFFIC, StationType.INDUSTRIAL, StationType.BACKGROUND]
    stations = [
        Station(
            f"v:{i}",
            "v",
            offset(HELSINKI, float(rng.uniform(-400, 400)), float(rng.uniform(-400, 400))),
            kinds[int(rng.integers(0, 4))],
        )
        for i in range(6)
    ]
    observed = rng.uniform(5.0, 80.0, (1, 6))
    background = rng.uniform(5.0, 60.0, (1, 6))
    _, left = leave_one_out(stations, observed, background, NO2)
    for k, held in enumerate(stations):
        rest = [j for j in range(6) if j != k]
        field = residual_field(
            [stations[j] for j in rest],
            [float(observed[0, j] - background[0, j]) for j in rest],
            NO2,
            HOUR_END,
            [float(background[0, j]) for j in rest],
        )
        served = field.unexplained(np.array([held.point.lat]), np.array([held.point.lon]))
        assert left[0, k] == pytest.approx(float(served[0]), abs=1e-9)


class HoldsTheHour(Flat):
    """A caching source holding only the air of instants on the hour."""

    def answers_at_once(self, samples: Sequence[Sample]) -> bool:
        return all(sample.at.minute == 0 for sample in samples)


def test_answers_at_once_counts_the_background_at_the_middle_of_the_hour() -> None:
    """A field that judges the background's pattern asks it at the middle of the stations'
    hour: a source that does not hold that is not answering at once."""
    stations = ring(3)
    store = MemoryStore()
    store.put_stations(stations)
    store.put_observations(
        Observation(s.id, Pollutant.NO2, HOUR_END, 40.0 + i) for i, s in enumerate(stations)
    )
    source = FusedAir(HoldsTheHour(), store)
    asked = [Sample(stations[0].point, HOUR_END + timedelta(hours=1))]
    asyncio.run(source.concentrations(asked))  # the fields, computed
    assert source.stations_used(asked[0].at)[Pollutant.NO2].params.background_share != 1.0
    assert source.answers_at_once(asked) is False

"""Fusion: the background corrected by station observations (`cleanair_core.air.fusion`,
`cleanair_core.air.fused_air`), and the leave-one-station-out evaluation."""

from __future__ import annotations

import asyncio
import itertools
import logging
import math
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import TypeVar

import attrs
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cleanair_core.air.fused_air import FusedAir, unfused_of
from cleanair_core.air.fusion import (
    FUSION_PARAMETERS,
    MAX_LEAD,
    FusionParameters,
    observation_hour,
    persistence,
)
from cleanair_core.air.fusion_evaluation import (
    evaluation_rows,
    leave_one_station_out,
    model_statistics,
    rmse_ratios,
)
from cleanair_core.air.gridded_fused_air import GriddedFusedAir, fused_air
from cleanair_core.air.observations import Observation, Station, StationType
from cleanair_core.air.pollutants import SCORED, Concentrations, Pollutant
from cleanair_core.air.quality_source import GriddedAir, Sample
from cleanair_core.air.street_level import STREET_POLLUTANTS, GridCell, StreetLevelAir
from cleanair_core.clock import ManualClock
from cleanair_core.geo import Point
from cleanair_core.metrics import NoMetrics
from cleanair_core.ports import Store
from cleanair_core.routes.network_air import NetworkAir
from cleanair_storage.memory import MemoryStore
from support.networks import grid

HOUR_END = datetime(2026, 3, 10, 9, 0, tzinfo=UTC)
CENTRE = Point(60.17, 24.94)
NO2 = FUSION_PARAMETERS[Pollutant.NO2]
T = TypeVar("T")


class PatternAir:
    """A gridded source: each pollutant `base` plus `slope` per degree of latitude, the same
    at every hour (so the residual at a station is known exactly)."""

    update_interval = 3600

    def __init__(self, base: float = 20.0, slope: float = 0.0) -> None:
        self.base = base
        self.slope = slope
        self.asked = 0

    def value(self, lat: float) -> float:
        return self.base + self.slope * (lat - CENTRE.lat)

    async def concentrations(self, samples: Sequence[Sample]) -> list[Concentrations]:
        self.asked += 1
        return [{p: self.value(s.point.lat) for p in SCORED} for s in samples]

    def air_at_hour(self, lats: np.ndarray, lons: np.ndarray, hour: datetime) -> np.ndarray:
        values = self.base + self.slope * (np.asarray(lats, dtype=np.float64) - CENTRE.lat)
        return np.repeat(values[:, None], len(SCORED), axis=1)


def offset(point: Point, north_m: float, east_m: float) -> Point:
    return Point(
        point.lat + north_m / 111_195.0,
        point.lon + east_m / (111_195.0 * math.cos(math.radians(point.lat))),
    )


def station(index: int, point: Point, kind: StationType | None = None) -> Station:
    return Station(f"test:{index}", f"station {index}", point, kind)


def stored(stations: Sequence[Station], values: Sequence[float], **hour: datetime) -> MemoryStore:
    store = MemoryStore()
    store.put_stations(stations)
    end = hour.get("hour_end", HOUR_END)
    store.put_observations(
        Observation(s.id, Pollutant.NO2, end, value)
        for s, value in zip(stations, values, strict=True)
    )
    return store


def no2_at(source: FusedAir, points: Sequence[Point], at: datetime) -> list[float]:
    airs = asyncio.run(source.concentrations([Sample(p, at) for p in points]))
    return [float(air[Pollutant.NO2] or 0.0) for air in airs]


def test_observation_hour_is_the_hour_that_averages_the_instant() -> None:
    assert observation_hour(HOUR_END) == HOUR_END
    assert observation_hour(HOUR_END - timedelta(minutes=40)) == HOUR_END
    assert observation_hour(HOUR_END + timedelta(seconds=1)) == HOUR_END + timedelta(hours=1)


def test_no_observations_gives_exactly_the_background() -> None:
    background = PatternAir(20.0, 30.0)
    source = GriddedFusedAir(background, MemoryStore())
    points = [CENTRE, offset(CENTRE, 800, -300)]
    samples = [Sample(p, HOUR_END) for p in points]
    assert asyncio.run(source.concentrations(samples)) == asyncio.run(
        background.concentrations(samples)
    )
    lats, lons = np.array([p.lat for p in points]), np.array([p.lon for p in points])
    assert np.array_equal(
        source.air_at_hour(lats, lons, HOUR_END), background.air_at_hour(lats, lons, HOUR_END)
    )


@given(
    residual=st.floats(-40.0, 40.0),
    base=st.floats(5.0, 60.0),
    north=st.floats(-20_000, 20_000),
    kind=st.sampled_from([None, StationType.BACKGROUND, StationType.TRAFFIC]),
)
def test_one_station_is_reproduced_within_its_noise(
    residual: float, base: float, north: float, kind: StationType | None
) -> None:
    where = offset(CENTRE, north, 0.0)
    observed = max(0.0, base + residual)
    source = FusedAir(PatternAir(base), stored([station(1, where, kind)], [observed]))
    [fused] = no2_at(source, [where], HOUR_END)
    site = NO2.traffic_share if kind is StationType.TRAFFIC else 0.0
    shrink = (1.0 + site) / (1.0 + site + NO2.noise_share)  # the noise takes the rest
    assert fused == pytest.approx(max(0.0, base + (observed - base) * shrink), abs=1e-9)
    assert abs(fused - observed) <= NO2.noise_share * abs(observed - base) + 1e-9


@settings(max_examples=60, deadline=None)
@given(
    data=st.lists(
        st.tuples(st.floats(-15_000, 15_000), st.floats(-15_000, 15_000)),
        min_size=2,
        max_size=8,
        unique=True,
    ),
    level=st.floats(-30.0, 30.0),
)
def test_stations_that_agree_are_each_reproduced_within_the_noise(
    data: list[tuple[float, float]], level: float
) -> None:
    stations = [station(i, offset(CENTRE, n, e)) for i, (n, e) in enumerate(data)]
    base = 40.0
    source = FusedAir(PatternAir(base), stored(stations, [base + level] * len(stations)))
    fused = no2_at(source, [s.point for s in stations], HOUR_END)
    for value in fused:
        assert abs(value - (base + level)) <= NO2.noise_share * abs(level) + 1e-6


@settings(max_examples=60, deadline=None)
@given(
    others=st.lists(
        st.tuples(st.floats(-20_000, 20_000), st.floats(-20_000, 20_000), st.floats(0, 80)),
        min_size=0,
        max_size=6,
    ),
    new_value=st.floats(0.0, 150.0),
    bearing=st.floats(0.0, 2 * math.pi),
)
def test_adding_a_station_never_moves_values_far_from_it(
    others: list[tuple[float, float, float]], new_value: float, bearing: float
) -> None:
    """Three regional lengths away from a new station, the field moves by at most a few
    per cent of what the new station disagreed with it."""
    base = 30.0
    existing = [station(i, offset(CENTRE, n, e)) for i, (n, e, _) in enumerate(others)]
    values = [v for _, _, v in others]
    far = 3.0 * NO2.regional_length_m
    added = station(99, offset(CENTRE, far * math.cos(bearing), far * math.sin(bearing)))
    probes = [offset(CENTRE, n, e) for n, e, _ in others] + [CENTRE]
    without = FusedAir(PatternAir(base), stored(existing, values))
    with_new = FusedAir(PatternAir(base), stored([*existing, added], [*values, new_value]))
    before = no2_at(without, probes, HOUR_END)
    [at_new_before] = no2_at(without, [added.point], HOUR_END)
    after = no2_at(with_new, probes, HOUR_END)
    disagreement = abs(new_value - at_new_before)
    for a, b in zip(before, after, strict=True):
        assert abs(a - b) <= 0.06 * disagreement + 1e-9


def test_a_traffic_station_speaks_for_its_street_and_a_background_one_for_its_district() -> None:
    base, excess = 20.0, 30.0
    where = CENTRE
    probes = [offset(where, 0, 25), offset(where, 0, 500), offset(where, 0, 2_000)]
    shares = {}
    for kind in (StationType.TRAFFIC, StationType.BACKGROUND):
        source = FusedAir(PatternAir(base), stored([station(1, where, kind)], [base + excess]))
        shares[kind] = [(v - base) / excess for v in no2_at(source, probes, HOUR_END)]
    traffic, background = shares[StationType.TRAFFIC], shares[StationType.BACKGROUND]
    assert traffic[0] > 0.6  # its own street: most of the excess
    assert traffic[0] - traffic[1] > 0.25  # a block away the street's own part is gone
    assert traffic[1] < 0.6 * background[1]  # where a background station still counts fully
    assert background[1] > 0.8
    assert background[2] > traffic[2]


def test_an_industrial_station_reaches_further_than_a_traffic_one_but_less_than_a_district() -> (
    None
):
    base, excess = 20.0, 30.0
    probe = offset(CENTRE, 0, 200)  # past a street, within a plant's site
    shares = {}
    for kind in (StationType.TRAFFIC, StationType.INDUSTRIAL, StationType.BACKGROUND):
        source = FusedAir(PatternAir(base), stored([station(1, CENTRE, kind)], [base + excess]))
        shares[kind] = (no2_at(source, [probe], HOUR_END)[0] - base) / excess
    assert shares[StationType.INDUSTRIAL] > shares[StationType.TRAFFIC] + 0.15
    assert shares[StationType.INDUSTRIAL] < shares[StationType.BACKGROUND] - 0.1


def test_the_correction_fades_into_the_forecast() -> None:
    source = FusedAir(PatternAir(20.0), stored([station(1, CENTRE)], [50.0]))
    leads = [0, 1, 6, 24, 48, 71, 72, 100]
    values = [no2_at(source, [CENTRE], HOUR_END + timedelta(hours=h))[0] for h in leads]
    assert values[0] == pytest.approx(20.0 + 30.0 / (1.0 + NO2.noise_share))
    assert all(a >= b for a, b in itertools.pairwise(values))
    assert values[-2] == values[-1] == 20.0  # MAX_LEAD on: the background
    assert persistence(NO2, timedelta(0)) == 1.0
    assert persistence(NO2, -timedelta(minutes=30)) == 1.0
    assert persistence(NO2, MAX_LEAD) == 0.0


@pytest.mark.parametrize("hours", [1, 12, 24, 48])
def test_the_persistence_is_an_exponential_tapered_to_the_longest_lead(hours: int) -> None:
    expected = math.exp(-hours / NO2.persistence_hours) * (1.0 - hours / 72.0)
    assert persistence(NO2, timedelta(hours=hours)) == pytest.approx(expected, rel=1e-12)


def test_observations_after_the_sample_hour_are_not_used() -> None:
    store = stored([station(1, CENTRE)], [80.0], hour_end=HOUR_END + timedelta(hours=2))
    source = FusedAir(PatternAir(20.0), store)
    assert no2_at(source, [CENTRE], HOUR_END) == [20.0]


def test_fused_values_are_never_negative_and_pm10_holds_pm25() -> None:
    store = MemoryStore()
    store.put_stations([station(1, CENTRE)])
    store.put_observations(
        [
            Observation("test:1", Pollutant.NO2, HOUR_END, 0.0),
            Observation("test:1", Pollutant.PM25, HOUR_END, 90.0),
            Observation("test:1", Pollutant.PM10, HOUR_END, 1.0),
        ]
    )
    source = GriddedFusedAir(PatternAir(20.0), store)
    [air] = asyncio.run(source.concentrations([Sample(offset(CENTRE, 3_000, 0), HOUR_END)]))
    no2, pm25, pm10 = air[Pollutant.NO2], air[Pollutant.PM25], air[Pollutant.PM10]
    assert no2 is not None
    assert no2 >= 0.0
    assert pm25 is not None
    assert pm10 is not None
    assert pm10 >= pm25
    probe = offset(CENTRE, 3_000, 0)
    [row] = source.air_at_hour(np.array([probe.lat]), np.array([probe.lon]), HOUR_END)
    assert row[SCORED.index(Pollutant.PM10)] >= row[SCORED.index(Pollutant.PM25)] > 20.0


@settings(max_examples=40, deadline=None)
@given(
    values=st.lists(st.floats(0.0, 120.0), min_size=1, max_size=5),
    minutes=st.integers(-120, 24 * 60),
)
def test_the_array_path_equals_the_sample_path(values: list[float], minutes: int) -> None:
    stations = [station(i, offset(CENTRE, 900.0 * i, -400.0 * i)) for i in range(len(values))]
    source = GriddedFusedAir(PatternAir(25.0, 40.0), stored(stations, values))
    points = [offset(CENTRE, n, e) for n in (-2_000, 0, 1_500) for e in (-1_000, 700)]
    at = HOUR_END + timedelta(minutes=minutes)
    by_sample = no2_at(source, points, at)
    lats, lons = np.array([p.lat for p in points]), np.array([p.lon for p in points])
    by_array = source.air_at_hour(lats, lons, at)[:, SCORED.index(Pollutant.NO2)]
    assert np.allclose(by_array, by_sample, rtol=1e-12, atol=1e-9)


class NorthUnknownAir(PatternAir):
    """NO2 unknown north of `edge` (a source whose area ends there)."""

    edge = CENTRE.lat + 0.05

    async def concentrations(self, samples: Sequence[Sample]) -> list[Concentrations]:
        airs = await super().concentrations(samples)
        for air, sample in zip(airs, samples, strict=True):
            if sample.point.lat > self.edge:
                air[Pollutant.NO2] = None
        return airs

    def air_at_hour(self, lats: np.ndarray, lons: np.ndarray, hour: datetime) -> np.ndarray:
        air = super().air_at_hour(lats, lons, hour)
        air[np.asarray(lats) > self.edge, SCORED.index(Pollutant.NO2)] = np.nan
        return air


def test_a_station_where_the_background_is_unknown_is_left_out_and_unknown_stays_unknown() -> None:
    known, beyond = station(1, CENTRE), station(2, offset(CENTRE, 10_000, 0))
    source = GriddedFusedAir(NorthUnknownAir(20.0), stored([known, beyond], [50.0, 90.0]))
    alone = FusedAir(PatternAir(20.0), stored([known], [50.0]))
    probes = [offset(CENTRE, -2_000, 0), offset(CENTRE, 3_000, 1_000)]
    expected = no2_at(alone, probes, HOUR_END)
    assert no2_at(source, probes, HOUR_END) == pytest.approx(expected, rel=1e-12)
    lats, lons = np.array([p.lat for p in probes]), np.array([p.lon for p in probes])
    by_array = source.air_at_hour(lats, lons, HOUR_END)[:, SCORED.index(Pollutant.NO2)]
    assert by_array == pytest.approx(expected, rel=1e-12)
    [air] = asyncio.run(source.concentrations([Sample(beyond.point, HOUR_END)]))
    assert air[Pollutant.NO2] is None
    [row] = source.air_at_hour(np.array([beyond.point.lat]), np.array([beyond.point.lon]), HOUR_END)
    assert np.isnan(row[SCORED.index(Pollutant.NO2)])


class RampAir(PatternAir):
    """20 µg/m³ at HOUR_END, rising 10 µg/m³ an hour: when the background is asked shows."""

    def at(self, when: datetime) -> float:
        return 20.0 + 10.0 * (when - HOUR_END) / timedelta(hours=1)

    async def concentrations(self, samples: Sequence[Sample]) -> list[Concentrations]:
        return [{p: self.at(s.at) for p in SCORED} for s in samples]

    def air_at_hour(self, lats: np.ndarray, lons: np.ndarray, hour: datetime) -> np.ndarray:
        return np.full((np.asarray(lats).size, len(SCORED)), self.at(hour))


@pytest.mark.parametrize("gridded", [False, True])
def test_a_stations_residual_is_against_the_background_in_the_middle_of_its_hour(
    gridded: bool,
) -> None:
    store = stored([station(1, CENTRE)], [50.0])
    source = (GriddedFusedAir if gridded else FusedAir)(RampAir(), store)
    residual = 50.0 - 15.0  # the background at 08:30 for the hour ending 09:00
    expected = 20.0 + residual / (1.0 + NO2.noise_share)
    if isinstance(source, GriddedFusedAir):
        [row] = source.air_at_hour(np.array([CENTRE.lat]), np.array([CENTRE.lon]), HOUR_END)
        assert row[SCORED.index(Pollutant.NO2)] == pytest.approx(expected)
    [value] = no2_at(source, [CENTRE], HOUR_END)
    assert value == pytest.approx(expected)


def test_observations_older_than_the_longest_lead_are_not_used() -> None:
    metrics = CountedHours()
    source = FusedAir(PatternAir(20.0), stored([station(1, CENTRE)], [50.0]), metrics=metrics)
    late = HOUR_END + MAX_LEAD + timedelta(hours=1)
    assert no2_at(source, [CENTRE], late) == [20.0]
    assert (Pollutant.NO2.value, False) in metrics.hours
    assert source.stations_used(late) == {}


def test_new_observations_are_used_without_a_new_source() -> None:
    clock = ManualClock(HOUR_END)
    store = MemoryStore()
    store.put_stations([station(1, CENTRE)])
    source = FusedAir(PatternAir(20.0), store, clock=clock)
    assert no2_at(source, [CENTRE], HOUR_END) == [20.0]
    store.put_observations([Observation("test:1", Pollutant.NO2, HOUR_END, 60.0)])
    assert no2_at(source, [CENTRE], HOUR_END) == [20.0]  # read at most once a second
    clock.advance(seconds=1)
    assert no2_at(source, [CENTRE], HOUR_END)[0] > 55.0


def test_fields_are_computed_once_per_hour_and_version() -> None:
    background = PatternAir(20.0)
    source = FusedAir(background, stored([station(1, CENTRE)], [50.0]))
    no2_at(source, [CENTRE], HOUR_END)
    asked = background.asked
    no2_at(source, [CENTRE], HOUR_END - timedelta(minutes=10))
    # The samples and the background at the middle of the field's hour (the pattern the
    # fallback keeps half of), not the stations again.
    assert background.asked == asked + 2


def test_the_hours_kept_are_bounded_and_a_forgotten_hour_is_read_again() -> None:
    """A server that is asked a new hour every hour for months, with no new observations
    (no version change), keeps a bounded number of hours, not every one it was asked."""
    source = FusedAir(PatternAir(20.0), stored([station(1, CENTRE)], [50.0]))
    first = no2_at(source, [CENTRE], HOUR_END)
    assert source.stations_used(HOUR_END)
    for hours in range(1, 400):
        no2_at(source, [CENTRE], HOUR_END + timedelta(hours=hours))
    assert source.stations_used(HOUR_END) == {}  # forgotten
    assert no2_at(source, [CENTRE], HOUR_END) == first  # and read again when asked


def test_many_points_and_stations_are_corrected_in_bounded_memory() -> None:
    """A whole network's nodes against an imported country's stations: the points-by-
    stations matrices are built a slice of points at a time, not at once (32 MB here)."""
    import tracemalloc

    rng = np.random.default_rng(11)
    stations = [
        station(i, offset(CENTRE, rng.uniform(-50_000, 50_000), rng.uniform(-50_000, 50_000)))
        for i in range(400)
    ]
    source = GriddedFusedAir(PatternAir(20.0), stored(stations, list(rng.uniform(0, 80, 400))))
    lats = CENTRE.lat + rng.uniform(-0.3, 0.3, 10_000)
    lons = CENTRE.lon + rng.uniform(-0.5, 0.5, 10_000)
    source.air_at_hour(lats[:1], lons[:1], HOUR_END)  # the field, computed once
    tracemalloc.start()
    try:
        whole = source.air_at_hour(lats, lons, HOUR_END)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 12_000_000
    some = source.air_at_hour(lats[:50], lons[:50], HOUR_END)
    assert np.allclose(whole[:50], some, rtol=1e-12)


def test_fused_air_is_gridded_exactly_when_its_source_is() -> None:
    class Remote:
        update_interval = 3600

        async def concentrations(self, samples: Sequence[Sample]) -> list[Concentrations]:
            return [{} for _ in samples]

    assert isinstance(fused_air(PatternAir(), MemoryStore()), GriddedAir)
    remote = fused_air(Remote(), MemoryStore())
    assert not isinstance(remote, GriddedAir)
    assert unfused_of(remote).__class__ is Remote


# -- leave one station out


def smooth_field(hours: int, points: Sequence[Point], seed: int) -> np.ndarray:
    """A regional level that changes by the hour and a gradient across the area."""
    rng = np.random.default_rng(seed)
    level = 40.0 + 20.0 * np.sin(np.arange(hours) / 5.0) + rng.normal(0, 5, hours)
    slope = rng.normal(0, 1.0, hours)  # µg/m³ per km northwards
    north = np.array([(p.lat - CENTRE.lat) * 111.195 for p in points])
    field: np.ndarray = level[:, None] + slope[:, None] * north[None, :]
    return field


def grid_stations(count: int) -> list[Station]:
    rng = np.random.default_rng(7)
    return [
        station(i, offset(CENTRE, rng.uniform(-20_000, 20_000), rng.uniform(-20_000, 20_000)))
        for i in range(count)
    ]


def test_with_a_background_of_no_skill_fusion_does_no_worse_than_the_stations_alone() -> None:
    stations = grid_stations(10)
    truth = smooth_field(300, [s.point for s in stations], seed=1)
    observed = truth + np.random.default_rng(2).normal(0, 2.0, truth.shape)
    background = np.full_like(observed, 25.0)  # one number everywhere, every hour
    predictions = leave_one_station_out(stations, observed, background, NO2)
    ratios = rmse_ratios(evaluation_rows(stations, observed, predictions))
    assert ratios["fused/idw"] <= 1.0
    assert ratios["fused/background"] < 0.5


def test_with_a_background_that_has_skill_fusion_gains_over_the_stations_alone() -> None:
    stations = grid_stations(10)
    points = [s.point for s in stations]
    truth = smooth_field(300, points, seed=3)
    local = np.random.default_rng(4).normal(0, 8.0, (1, len(stations)))  # what IDW cannot see
    truth = truth + local
    observed = truth + np.random.default_rng(5).normal(0, 2.0, truth.shape)
    background = 0.6 * truth + 10.0  # biased, but where it is high, the air is
    predictions = leave_one_station_out(stations, observed, background, NO2)
    ratios = rmse_ratios(evaluation_rows(stations, observed, predictions))
    assert ratios["fused/idw"] < 0.8


def test_leave_one_out_matches_solving_without_the_station() -> None:
    """The one-inverse shortcut gives what fusing from the other stations gives."""
    stations = [
        station(0, CENTRE, StationType.TRAFFIC),
        station(1, offset(CENTRE, 3_000, 1_000)),
        station(2, offset(CENTRE, -2_000, 4_000), StationType.INDUSTRIAL),
        station(3, offset(CENTRE, 6_000, -5_000)),
        station(4, offset(CENTRE, 0, 30)),  # within the traffic station's street
    ]
    observed = np.array([[55.0, 30.0, 41.0, 22.0, 35.0]])
    background = np.array([[20.0, 20.0, 20.0, 20.0, 20.0]])
    predictions = leave_one_station_out(stations, observed, background, NO2)
    for k, left_out in enumerate(stations):
        rest = [s for s in stations if s is not left_out]
        values = [float(v) for j, v in enumerate(observed[0]) if j != k]
        source = FusedAir(PatternAir(20.0), stored(rest, values))
        [expected] = no2_at(source, [left_out.point], HOUR_END)
        # Each projects around its own stations' centre: distances agree to ~1e-6.
        assert predictions["fused"][0, k] == pytest.approx(expected, rel=1e-5)


def test_leave_one_out_is_never_negative_as_the_served_field_is_not() -> None:
    """A neighbour far below its background would pull the prediction under zero: the
    evaluation scores what the service serves, max(0, ...)."""
    stations = [station(0, CENTRE), station(1, offset(CENTRE, 500, 0))]
    observed = np.array([[5.0, 0.0]])
    background = np.array([[10.0, 100.0]])
    fused = leave_one_station_out(stations, observed, background, NO2)["fused"]
    assert fused[0, 0] == 0.0
    assert np.all(fused >= 0.0)


def test_model_statistics_follow_openair() -> None:
    stats = model_statistics(np.array([2.0, 4.0, 9.0, np.nan]), np.array([1.0, 4.0, 3.0, 5.0]))
    assert stats.n == 3
    assert stats.mean_bias == pytest.approx((1.0 + 0.0 + 6.0) / 3)
    assert stats.rmse == pytest.approx(math.sqrt((1.0 + 0.0 + 36.0) / 3))
    assert stats.fac2 == pytest.approx(2 / 3)  # 9 against 3 is outside a factor of two
    assert stats.r == pytest.approx(float(np.corrcoef([2, 4, 9], [1, 4, 3])[0, 1]))
    empty = model_statistics(np.array([np.nan]), np.array([1.0]))
    assert empty.n == 0
    assert math.isnan(empty.rmse)


def test_parameters_are_sane() -> None:
    for params in FUSION_PARAMETERS.values():
        assert isinstance(params, FusionParameters)
        assert params.street_length_m < params.district_length_m < params.regional_length_m
        assert 0.0 < params.regional_share < 1.0
        assert params.noise_share > 0.0
    assert attrs.has(FusionParameters)


def test_a_repeated_hour_within_the_second_calls_the_store_not_at_all() -> None:
    calls: list[str] = []

    async def recording(work: Callable[[], T], /) -> T:
        calls.append("store")
        return work()

    clock = ManualClock(HOUR_END)
    store = stored([station(1, CENTRE)], [50.0])
    source = FusedAir(PatternAir(20.0), store, store_calls=recording, clock=clock)
    no2_at(source, [CENTRE], HOUR_END)
    # The version, then the day's fit's week (the hour's observations are read and screened
    # with the CPU work, off the loop too in a server).
    assert calls == ["store"] * 2
    no2_at(source, [offset(CENTRE, 100, 100)], HOUR_END - timedelta(minutes=5))
    assert calls == ["store"] * 2
    clock.advance(seconds=1)
    no2_at(source, [CENTRE], HOUR_END)
    assert calls == ["store"] * 3  # the version again; nothing new to read, the fit kept


def test_a_plans_node_air_is_fused() -> None:
    """The planner asks `NetworkAir`, which asks the source's arrays: fused ones."""
    network = grid(3, 3)
    near = Point(float(network.node_lat[4]), float(network.node_lon[4]))
    store = stored([station(1, near)], [90.0])
    nodes = np.arange(network.node_count, dtype=np.intp)
    hour = HOUR_END - timedelta(hours=1)  # a plan's hour starts where the observation's ends
    air = asyncio.run(
        NetworkAir().at_nodes(
            network,
            GriddedFusedAir(PatternAir(20.0), store),
            nodes,
            [HOUR_END, hour],
            np.array([0] * 5 + [1] * 4, dtype=np.intp),
        )
    )
    no2 = air[:, SCORED.index(Pollutant.NO2)]
    assert no2[4] == pytest.approx(20.0 + 70.0 / (1.0 + NO2.noise_share))
    assert all(value > 80.0 for value in no2[:5])  # a few hundred metres: the same district
    assert np.all(no2[5:] == 20.0)  # the hour before the observation: the background


def test_every_store_fuses_alike(store: Store) -> None:
    """Fusion reads through the port: the same observations give the same air on memory,
    SQLite and PostgreSQL, and a later write is seen by the next version check."""
    clock = ManualClock(HOUR_END)
    stations = [station(1, CENTRE), station(2, offset(CENTRE, 2_000, 1_000), StationType.TRAFFIC)]
    store.put_stations(stations)
    store.put_observations(
        [
            Observation("test:1", Pollutant.NO2, HOUR_END, 50.0),
            Observation("test:2", Pollutant.NO2, HOUR_END, 70.0),
        ]
    )
    source = GriddedFusedAir(PatternAir(20.0), store, clock=clock)
    probes = [CENTRE, offset(CENTRE, 1_000, 500), offset(CENTRE, -3_000, 0)]
    expected = no2_at(
        GriddedFusedAir(PatternAir(20.0), stored(stations, [50.0, 70.0])), probes, HOUR_END
    )
    assert no2_at(source, probes, HOUR_END) == pytest.approx(expected, rel=1e-12)
    store.put_observations([Observation("test:1", Pollutant.NO2, HOUR_END, 20.0)])
    clock.advance(seconds=1)
    assert no2_at(source, [CENTRE], HOUR_END)[0] < expected[0] - 20.0


class CountedHours(NoMetrics):
    def __init__(self) -> None:
        self.hours: list[tuple[str, bool]] = []

    def air_hour(self, pollutant: str, *, fused: bool) -> None:
        self.hours.append((pollutant, fused))


def test_each_hour_is_counted_fused_or_not_and_a_loss_of_stations_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="cleanair.fusion")
    metrics = CountedHours()
    clock = ManualClock(HOUR_END)
    store = stored([station(1, CENTRE)], [50.0])
    source = FusedAir(PatternAir(20.0), store, clock=clock, metrics=metrics)
    no2_at(source, [CENTRE], HOUR_END)
    assert sorted(metrics.hours) == sorted(
        [(p.value, p is Pollutant.NO2) for p in FUSION_PARAMETERS]
    )
    no2_at(source, [CENTRE], HOUR_END + timedelta(hours=1))  # another hour, still fused
    assert caplog.text.count("air is fused with station observations") == 1  # once a change
    store.delete_observations_before(HOUR_END + timedelta(hours=1))  # an outage's effect
    clock.advance(seconds=1)
    metrics.hours.clear()
    assert no2_at(source, [CENTRE], HOUR_END) == [20.0]
    assert (Pollutant.NO2.value, False) in metrics.hours
    assert "no station observations within 72 h" in caplog.text


class RemotePatternAir(PatternAir):
    """A `PatternAir` standing for a remote source that holds the air north of `held_from`
    (degrees of latitude) and would fetch the rest."""

    def __init__(self, held_from: float) -> None:
        super().__init__(20.0)
        self.held_from = held_from

    def answers_at_once(self, samples: Sequence[Sample]) -> bool:
        return all(sample.point.lat >= self.held_from for sample in samples)


class NoRoads:
    """Street increments of no network: the street level is the background."""

    def at(self, lats: np.ndarray, lons: np.ndarray) -> np.ndarray:
        return np.full((np.asarray(lats).size, len(STREET_POLLUTANTS)), np.nan)

    def cell_mean(self, cell: GridCell) -> None:
        return None


class OneDegreeCells:
    def cell_of(self, lat: float, lon: float) -> GridCell:
        return GridCell(math.floor(lat), math.floor(lon), math.floor(lat) + 1, math.floor(lon) + 1)


def test_the_served_air_answers_at_once_only_with_its_background_held_and_its_fields_at_hand() -> (
    None
):
    # A score's charge is made once answered when the air would wait on no upstream: the
    # background's own (held), and the fields of its hour (computed from the background at
    # the stations, which a remote background may have to fetch).
    clock = ManualClock(HOUR_END)
    background = RemotePatternAir(held_from=CENTRE.lat - 1.0)
    street = StreetLevelAir(background, OneDegreeCells(), NoRoads())
    source = FusedAir(street, stored([station(1, CENTRE)], [50.0]), clock=clock)
    here = [Sample(CENTRE, HOUR_END)]
    south = [Sample(offset(CENTRE, -300_000.0, 0.0), HOUR_END)]
    assert street.answers_at_once(here)
    assert not street.answers_at_once(south)
    assert not source.answers_at_once(here)  # the observations were never read
    no2_at(source, [CENTRE], HOUR_END)
    assert source.answers_at_once(here)
    assert not source.answers_at_once(south)
    assert not source.answers_at_once([Sample(CENTRE, HOUR_END + timedelta(hours=1))])
    clock.advance(2)  # the observations' version is due to be read again
    assert not source.answers_at_once(here)

"""Issue 30's fusion, held to what it promises: no observations give exactly the background
and its error, a station's influence ends at its support, a station's own hour is reproduced
within its noise, an absurd reading moves nothing beyond its support, the unexplained share
and standard error behave, provenance per point matches the weights and the value, and the
parameters are fitted from the deployment's own observations (per pollutant and day) where
there are enough of them and fall back where there are not."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta

import attrs
import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cleanair_core.air import fused_air as fused_air_module
from cleanair_core.air.fused_air import FusedAir, FusedValue, fit_day
from cleanair_core.air.fusion import (
    FUSION_PARAMETERS,
    HOUR,
    MAX_LEAD,
    FusionParameters,
    background_error,
    interval90,
    persistence,
    residual_field,
    station_distances,
)
from cleanair_core.air.fusion_fit import (
    MIN_HOURS,
    MIN_STATIONS,
    FusionFit,
    fit_parameters,
    leave_one_out,
)
from cleanair_core.air.gridded_fused_air import GriddedFusedAir
from cleanair_core.air.observations import Observation, Station, StationType
from cleanair_core.air.pollutants import SCORED, Concentrations, Pollutant
from cleanair_core.air.quality_source import Sample
from cleanair_core.clock import ManualClock
from cleanair_core.geo import EARTH_RADIUS_M, Point
from cleanair_storage.memory import MemoryStore

FloatArray = npt.NDArray[np.float64]

HOUR_END = datetime(2026, 3, 10, 9, 0, tzinfo=UTC)
HELSINKI = Point(60.17, 24.94)
TALLINN = Point(59.437, 24.745)
BEIJING = Point(39.929, 116.417)
SEOUL = Point(37.57, 126.98)
SHANGHAI = Point(31.23, 121.47)
#: The pollutants fusion has parameters for (SO2 is never corrected).
FUSED = tuple(FUSION_PARAMETERS)
NO2 = FUSION_PARAMETERS[Pollutant.NO2]
#: The issue's thresholds and reach, written out here so that a change of the constants
#: shows: a station's weight is reported from 1 %, a value corrected above 0.1 %, and a
#: station's correction ends three regional lengths away.
REPORTED = 0.01
CORRECTED = 0.001
RANGES = 3.0


def support_m(params: FusionParameters) -> float:
    return RANGES * params.regional_length_m


WIDEST = max(support_m(params) for params in FUSION_PARAMETERS.values())


class PatternAir:
    """A gridded source: every pollutant `base` plus `slope` per degree of latitude north of
    Helsinki, the same at every hour (so the residual at a station is known exactly)."""

    update_interval = 3600

    def __init__(self, base: float = 20.0, slope: float = 0.0) -> None:
        self.base = base
        self.slope = slope

    def value(self, lat: float) -> float:
        return self.base + self.slope * (lat - HELSINKI.lat)

    async def concentrations(self, samples: Sequence[Sample]) -> list[Concentrations]:
        return [{p: self.value(s.point.lat) for p in SCORED} for s in samples]

    def air_at_hour(self, lats: FloatArray, lons: FloatArray, hour: datetime) -> FloatArray:
        values = self.base + self.slope * (np.asarray(lats, dtype=np.float64) - HELSINKI.lat)
        out: FloatArray = np.repeat(values[:, None], len(SCORED), axis=1)
        return out


def offset(point: Point, north_m: float, east_m: float) -> Point:
    return Point(
        point.lat + north_m / 111_195.0,
        point.lon + east_m / (111_195.0 * math.cos(math.radians(point.lat))),
    )


def bearing_point(point: Point, distance_m: float, bearing: float) -> Point:
    """The point `distance_m` from `point` along the great circle leaving it at `bearing`
    (radians clockwise from north)."""
    angle = distance_m / EARTH_RADIUS_M
    lat1, lon1 = math.radians(point.lat), math.radians(point.lon)
    lat2 = math.asin(
        math.sin(lat1) * math.cos(angle) + math.cos(lat1) * math.sin(angle) * math.cos(bearing)
    )
    lon2 = lon1 + math.atan2(
        math.sin(bearing) * math.sin(angle) * math.cos(lat1),
        math.cos(angle) - math.sin(lat1) * math.sin(lat2),
    )
    return Point(math.degrees(lat2), (math.degrees(lon2) + 540.0) % 360.0 - 180.0)


def station(index: int, point: Point, kind: StationType | None = None) -> Station:
    return Station(f"test:{index}", f"station {index}", point, kind)


def stored(
    stations: Sequence[Station],
    values: Mapping[Pollutant, Sequence[float]],
    hour_end: datetime = HOUR_END,
) -> MemoryStore:
    """A store holding `stations` and, per pollutant, one value each for the hour ending at
    `hour_end`."""
    store = MemoryStore()
    store.put_stations(stations)
    store.put_observations(
        Observation(s.id, pollutant, hour_end, value)
        for pollutant, column in values.items()
        for s, value in zip(stations, column, strict=True)
    )
    return store


def fused_at(source: FusedAir, points: Sequence[Point], at: datetime) -> list[Concentrations]:
    return asyncio.run(source.concentrations([Sample(p, at) for p in points]))


def explained(source: FusedAir, point: Point, at: datetime) -> dict[Pollutant, FusedValue]:
    return asyncio.run(source.explain(point, at))


def one_point(point: Point) -> tuple[FloatArray, FloatArray]:
    return np.array([point.lat]), np.array([point.lon])


def nearest_m(point: Point, stations: Sequence[Station]) -> float:
    lat, lon = one_point(point)
    d = station_distances(
        lat,
        lon,
        np.array([s.point.lat for s in stations]),
        np.array([s.point.lon for s in stations]),
    )
    return float(d.min())


def assert_is_the_background(value: FusedValue, background: float, pollutant: Pollutant) -> None:
    """What an unfused value says: exactly the background, its error, no station."""
    assert value.value == background
    assert value.unfused == background
    assert value.standard_error == background_error(FUSION_PARAMETERS.get(pollutant), background)
    assert (value.low, value.high) == interval90(background, value.standard_error)
    assert value.stations == ()
    assert value.corrected is False


# -- 1. no observations: exactly the background, with the background's error

HISTORIES = ("empty", "stations only", "too old", "in the future")


@settings(max_examples=60, deadline=None)
@given(
    base=st.floats(5.0, 80.0),
    slope=st.floats(-0.5, 0.5),
    north=st.floats(-200_000, 200_000),
    east=st.floats(-200_000, 200_000),
    minutes=st.integers(-120, 3 * 24 * 60),
    history=st.sampled_from(HISTORIES),
)
def test_with_no_usable_observation_the_value_and_its_error_are_the_backgrounds(
    base: float, slope: float, north: float, east: float, minutes: int, history: str
) -> None:
    point = offset(HELSINKI, north, east)
    at = HOUR_END + timedelta(minutes=minutes)
    nearby = [station(i, offset(point, 300.0 * i, -200.0 * i)) for i in range(3)]
    floor = at.replace(minute=0, second=0, microsecond=0)
    hour = floor if floor == at else floor + HOUR  # the end of the hour that averages `at`
    if history == "empty":
        store = MemoryStore()
    elif history == "stations only":
        store = stored(nearby, {})
    else:
        # Observations beyond the longest lead, or of an hour that has not ended yet.
        end = hour - MAX_LEAD - HOUR if history == "too old" else hour + HOUR
        store = stored(nearby, {p: [base + 50.0] * 3 for p in FUSED}, end)
    background = PatternAir(base, slope)
    source = GriddedFusedAir(background, store)
    expected = background.value(point.lat)
    [air] = fused_at(source, [point], at)
    assert air == dict.fromkeys(SCORED, expected)
    values = explained(source, point, at)
    assert set(values) == set(SCORED)
    for pollutant, value in values.items():
        assert_is_the_background(value, expected, pollutant)
        assert value.fitted is False


# -- 2. bounded influence


def network_strategy(
    kinds: Sequence[StationType | None] = (None, StationType.BACKGROUND, StationType.TRAFFIC),
) -> st.SearchStrategy[list[tuple[float, float, StationType | None, float]]]:
    """Stations within 25 km of Helsinki (north, east, type) with their residuals."""
    return st.lists(
        st.tuples(
            st.floats(-25_000, 25_000),
            st.floats(-25_000, 25_000),
            st.sampled_from(list(kinds)),
            st.floats(-300.0, 300.0),
        ),
        min_size=1,
        max_size=12,
        unique_by=lambda row: (round(row[0]), round(row[1])),
    )


#: A point this far from Helsinki is at least that much less 36 km from every station.
CLUSTER_RADIUS_M = 36_000.0


@settings(max_examples=80, deadline=None)
@given(
    network=network_strategy((None, StationType.BACKGROUND, StationType.TRAFFIC, None)),
    pollutant=st.sampled_from(FUSED),
    skill=st.sampled_from([0.0, 0.5, 1.0]),
    bearing=st.floats(0.0, 2 * math.pi),
    beyond=st.floats(1.0, 4.0),
    seed=st.integers(0, 1_000),
)
def test_beyond_every_stations_support_the_residual_weights_and_share_are_exactly_nothing(
    network: list[tuple[float, float, StationType | None, float]],
    pollutant: Pollutant,
    skill: float,
    bearing: float,
    beyond: float,
    seed: int,
) -> None:
    params = attrs.evolve(FUSION_PARAMETERS[pollutant], background_share=skill)
    assert params.support_m == support_m(params)
    stations = [station(i, offset(HELSINKI, n, e), k) for i, (n, e, k, _) in enumerate(network)]
    residuals = [r for *_, r in network]
    backgrounds = list(np.random.default_rng(seed).uniform(5.0, 90.0, len(stations)))
    field = residual_field(stations, residuals, params, HOUR_END, backgrounds)
    point = bearing_point(HELSINKI, beyond * support_m(params) + CLUSTER_RADIUS_M, bearing)
    assert nearest_m(point, stations) >= support_m(params)
    lat, lon = one_point(point)
    here = np.array([backgrounds[0] * 1.7])  # any background there
    assert field.at(lat, lon, here)[0] == 0.0
    assert np.all(field.weights(lat, lon) == 0.0)
    assert field.unexplained(lat, lon)[0] == 1.0


@settings(max_examples=80, deadline=None)
@given(
    network=network_strategy(),
    pollutant=st.sampled_from(FUSED),
    bearing=st.floats(0.0, 2 * math.pi),
)
def test_at_nine_tenths_of_the_support_a_point_moves_by_at_most_one_percent_of_the_residuals(
    network: list[tuple[float, float, StationType | None, float]],
    pollutant: Pollutant,
    bearing: float,
) -> None:
    params = FUSION_PARAMETERS[pollutant]
    stations = [station(i, offset(HELSINKI, n, e), k) for i, (n, e, k, _) in enumerate(network)]
    residuals = [r for *_, r in network]
    field = residual_field(stations, residuals, params, HOUR_END)
    point = bearing_point(HELSINKI, 0.9 * support_m(params) + CLUSTER_RADIUS_M, bearing)
    assert nearest_m(point, stations) >= 0.9 * support_m(params)
    moved = abs(float(field.at(*one_point(point))[0]))
    assert moved <= 0.01 * max(abs(r) for r in residuals)


@settings(max_examples=40, deadline=None)
@given(
    network=network_strategy(),
    bearing=st.floats(0.0, 2 * math.pi),
    base=st.floats(5.0, 60.0),
)
def test_the_served_air_beyond_every_stations_support_is_exactly_the_background(
    network: list[tuple[float, float, StationType | None, float]], bearing: float, base: float
) -> None:
    stations = [station(i, offset(HELSINKI, n, e), k) for i, (n, e, k, _) in enumerate(network)]
    observed = [max(0.0, base + r) for *_, r in network]
    background = PatternAir(base, 0.3)
    source = GriddedFusedAir(background, stored(stations, dict.fromkeys(FUSED, observed)))
    point = bearing_point(HELSINKI, WIDEST + CLUSTER_RADIUS_M, bearing)
    expected = background.value(point.lat)
    [air] = fused_at(source, [point], HOUR_END)
    assert air == dict.fromkeys(SCORED, expected)  # a 0.0 % change
    [row] = source.air_at_hour(*one_point(point), HOUR_END)
    assert np.all(row == expected)
    for pollutant, value in explained(source, point, HOUR_END).items():
        assert_is_the_background(value, expected, pollutant)


# -- 3. a station's own hour


@settings(max_examples=80, deadline=None)
@given(
    base=st.floats(5.0, 80.0),
    slope=st.floats(-0.5, 0.5),
    north=st.floats(-100_000, 100_000),
    east=st.floats(-100_000, 100_000),
    observed=st.lists(st.floats(0.0, 400.0), min_size=len(FUSED), max_size=len(FUSED)),
    kind=st.sampled_from([None, StationType.BACKGROUND]),
)
def test_a_background_stations_own_hour_is_reproduced_within_its_noise(
    base: float,
    slope: float,
    north: float,
    east: float,
    observed: list[float],
    kind: StationType | None,
) -> None:
    where = offset(HELSINKI, north, east)
    values = dict(zip(FUSED, observed, strict=True))
    # PM10 holds PM2.5: a station measures at least as much of the one as of the other.
    values[Pollutant.PM10] = max(values[Pollutant.PM10], values[Pollutant.PM25])
    background = PatternAir(base, slope)
    source = FusedAir(
        background, stored([station(1, where, kind)], {p: [v] for p, v in values.items()})
    )
    [air] = fused_at(source, [where], HOUR_END)
    unfused = background.value(where.lat)
    for pollutant, observation in values.items():
        noise = FUSION_PARAMETERS[pollutant].noise_share
        fused = air[pollutant]
        assert fused is not None
        residual = observation - unfused
        assert abs(fused - observation) <= noise / (1.0 + noise) * abs(residual) + 1e-9
        assert fused == pytest.approx(unfused + residual / (1.0 + noise), abs=1e-9)


# -- 4. one absurd station


@settings(max_examples=25, deadline=None)
@given(
    north=st.floats(-30_000, 30_000),
    east=st.floats(-30_000, 30_000),
    absurd=st.sampled_from([1e6, 1e9, 1e300]),
    bearing=st.floats(0.0, 2 * math.pi),
    reach=st.floats(1.0, 10.0),
    ordinary=st.lists(st.floats(0.0, 200.0), min_size=0, max_size=5),
)
def test_one_absurd_station_moves_nothing_beyond_its_support(
    north: float,
    east: float,
    absurd: float,
    bearing: float,
    reach: float,
    ordinary: list[float],
) -> None:
    """A station in Beijing reporting an absurd value, among ordinary ones: Helsinki, Seoul,
    Shanghai and any point beyond the support keep exactly the background."""
    stations = [station(0, offset(BEIJING, north, east))] + [
        station(i + 1, offset(BEIJING, -5_000.0 * (i + 1), 4_000.0 * i))
        for i in range(len(ordinary))
    ]
    values = [absurd, *ordinary]
    background = PatternAir(40.0, 0.5)
    source = GriddedFusedAir(background, stored(stations, dict.fromkeys(FUSED, values)))
    anywhere = bearing_point(BEIJING, reach * WIDEST + 60_000.0, bearing)
    points = [HELSINKI, SEOUL, SHANGHAI, anywhere]
    assert all(nearest_m(p, stations) >= WIDEST for p in points)
    airs = fused_at(source, points, HOUR_END)
    for point, air in zip(points, airs, strict=True):
        expected = background.value(point.lat)
        assert air == dict.fromkeys(SCORED, expected)
        for pollutant, value in explained(source, point, HOUR_END).items():
            assert_is_the_background(value, expected, pollutant)
    lats = np.array([p.lat for p in points])
    lons = np.array([p.lon for p in points])
    assert np.array_equal(
        source.air_at_hour(lats, lons, HOUR_END), background.air_at_hour(lats, lons, HOUR_END)
    )


# -- 5. the share left unexplained, and the standard error


@settings(max_examples=60, deadline=None)
@given(
    network=network_strategy((None, StationType.BACKGROUND, StationType.TRAFFIC)),
    pollutant=st.sampled_from(FUSED),
    skill=st.sampled_from([0.0, 0.5, 1.0]),
    probes=st.lists(
        st.tuples(st.floats(-600_000, 600_000), st.floats(-600_000, 600_000)),
        min_size=1,
        max_size=8,
    ),
    seed=st.integers(0, 1_000),
)
def test_the_unexplained_share_is_within_zero_and_one_and_one_beyond_the_support(
    network: list[tuple[float, float, StationType | None, float]],
    pollutant: Pollutant,
    skill: float,
    probes: list[tuple[float, float]],
    seed: int,
) -> None:
    params = attrs.evolve(FUSION_PARAMETERS[pollutant], background_share=skill)
    stations = [station(i, offset(HELSINKI, n, e), k) for i, (n, e, k, _) in enumerate(network)]
    rng = np.random.default_rng(seed)
    backgrounds = list(rng.uniform(5.0, 90.0, len(stations)))
    field = residual_field(stations, [r for *_, r in network], params, HOUR_END, backgrounds)
    points = [offset(HELSINKI, n, e) for n, e in probes] + [s.point for s in stations]
    lats = np.array([p.lat for p in points])
    lons = np.array([p.lon for p in points])
    left = field.unexplained(lats, lons)
    assert np.all(left > 0.0)
    assert np.all(left <= 1.0)
    for point, share in zip(points, left.tolist(), strict=True):
        nearest = nearest_m(point, stations)
        if nearest >= support_m(params):
            assert share == 1.0
        elif nearest < 0.9 * support_m(params):  # (at the very edge, 1 - 1e-20 is 1.0)
            assert share < 1.0


@settings(max_examples=60, deadline=None)
@given(
    pollutant=st.sampled_from(FUSED),
    near=st.floats(0.0, 0.9),
    further=st.floats(0.001, 0.999),
    bearing=st.floats(0.0, 2 * math.pi),
)
def test_less_is_left_unexplained_near_a_station_than_further_from_it(
    pollutant: Pollutant, near: float, further: float, bearing: float
) -> None:
    params = FUSION_PARAMETERS[pollutant]
    field = residual_field([station(1, HELSINKI)], [30.0], params, HOUR_END)
    d1 = near * support_m(params)
    d2 = d1 + max(1_000.0, further * (support_m(params) - d1 - 1_000.0))
    shares = [
        float(field.unexplained(*one_point(bearing_point(HELSINKI, d, bearing)))[0])
        for d in (d1, d2)
    ]
    assert shares[0] < shares[1] <= 1.0


@settings(max_examples=40, deadline=None)
@given(
    pollutant=st.sampled_from(FUSED),
    base=st.floats(5.0, 80.0),
    residual=st.floats(-5.0, 200.0),
    kind=st.sampled_from([None, StationType.BACKGROUND]),
)
def test_the_standard_error_at_a_station_is_smaller_than_the_backgrounds(
    pollutant: Pollutant, base: float, residual: float, kind: StationType | None
) -> None:
    params = FUSION_PARAMETERS[pollutant]
    where = offset(HELSINKI, 2_000.0, -1_000.0)
    store = stored([station(1, where, kind)], {pollutant: [base + residual]})
    source = FusedAir(PatternAir(base), store)
    value = explained(source, where, HOUR_END)[pollutant]
    assert value.standard_error < background_error(params, value.value)
    assert value.low <= value.value <= value.high
    assert (value.low, value.high) == interval90(value.value, value.standard_error)
    far = bearing_point(where, support_m(params) + 1_000.0, 1.0)
    assert explained(source, far, HOUR_END)[pollutant].standard_error == background_error(
        params, base
    )


def test_a_station_that_agrees_with_the_background_narrows_its_error_there() -> None:
    where = HELSINKI
    source = FusedAir(PatternAir(30.0), stored([station(1, where)], {Pollutant.NO2: [30.0]}))
    value = explained(source, where, HOUR_END)[Pollutant.NO2]
    assert value.value == value.unfused == 30.0
    assert value.corrected is False
    assert [s.id for s in value.stations] == ["test:1"]
    assert value.standard_error < 0.5 * background_error(NO2, 30.0)


# -- 6. provenance over a lattice


def two_clusters() -> tuple[list[Station], dict[Pollutant, list[float]]]:
    """Five stations around Helsinki (one traffic), four around Tallinn, one in Beijing, and
    their NO2 and PM2.5 (the Tallinn ones under the background, the others over it)."""
    helsinki = [
        station(1, HELSINKI),
        station(2, offset(HELSINKI, 4_000, 3_000)),
        station(3, offset(HELSINKI, -2_000, 8_000), StationType.TRAFFIC),
        station(4, offset(HELSINKI, 9_000, -6_000)),
        station(5, offset(HELSINKI, 1_000, 20_000)),
    ]
    tallinn = [
        station(11, TALLINN),
        station(12, offset(TALLINN, 3_000, -4_000)),
        station(13, offset(TALLINN, -5_000, 2_000)),
        station(14, offset(TALLINN, 500, 600)),
    ]
    stations = [*helsinki, *tallinn, station(21, BEIJING)]
    values = {
        Pollutant.NO2: [55.0, 48.0, 90.0, 40.0, 35.0, 12.0, 9.0, 14.0, 30.0, 120.0],
        Pollutant.PM25: [18.0, 16.0, 25.0, 15.0, 14.0, 6.0, 5.0, 7.0, 12.0, 90.0],
    }
    return stations, values


def lattice() -> list[Point]:
    """Points near each cluster, between them (and beyond either, up to ~350 km), and far."""
    near = [
        offset(c, n, e) for c in (HELSINKI, TALLINN) for n in (-6e3, 0, 5e3) for e in (-7e3, 2e3)
    ]
    between = [
        Point(TALLINN.lat + f * (HELSINKI.lat - TALLINN.lat), 24.85 + 1.5 * (f - 0.5))
        for f in np.linspace(-3.0, 4.0, 29).tolist()
    ]
    far = [SEOUL, SHANGHAI, offset(BEIJING, 100_000, 0), Point(59.33, 18.07), Point(56.95, 24.1)]
    return near + between + far


@pytest.mark.parametrize("lead_hours", [0, 2, 30])
def test_provenance_lists_exactly_the_stations_of_1_percent_and_corrected_iff_it_moved(
    lead_hours: int,
) -> None:
    stations, values = two_clusters()
    background = PatternAir(25.0, 0.4)
    source = FusedAir(background, stored(stations, values))
    at = HOUR_END + timedelta(hours=lead_hours)
    points = lattice()
    airs = fused_at(source, points, at)
    mismatches: list[str] = []
    listed = moved = quiet = 0
    for point, air in zip(points, airs, strict=True):
        answers = explained(source, point, at)
        fields = source.stations_used(at)
        unfused = background.value(point.lat)
        for pollutant in values:
            field = fields[pollutant]
            fade = persistence(field.params, at - field.hour_end)
            weights = field.weights(*one_point(point))[0] * fade
            expected = {
                sid: w
                for sid, w in zip(field.stations, weights.tolist(), strict=True)
                if abs(w) >= REPORTED
            }
            value = air[pollutant]
            assert value is not None
            answer = answers[pollutant]
            reported = {s.id: s.weight for s in answer.stations}
            if reported.keys() != expected.keys():
                mismatches.append(f"{point} {pollutant}: {sorted(reported)} != {sorted(expected)}")
            elif any(abs(reported[k] - expected[k]) > 1e-9 for k in expected):
                mismatches.append(f"{point} {pollutant}: weights {reported} != {expected}")
            changed = abs(value - unfused) > CORRECTED * abs(unfused)
            if answer.corrected != changed:
                mismatches.append(f"{point} {pollutant}: corrected {answer.corrected}")
            if answer.value != pytest.approx(value, rel=1e-12) or answer.unfused != unfused:
                mismatches.append(f"{point} {pollutant}: {answer.value} != {value}")
            listed += bool(reported)
            moved += changed
            quiet += not changed
    assert mismatches == []
    # The lattice reaches where stations speak and where they do not.
    assert listed > 0
    assert moved > 0
    assert quiet > 0


def test_the_reported_stations_are_the_heaviest_first_with_their_distance_and_hour() -> None:
    stations, values = two_clusters()
    source = FusedAir(PatternAir(25.0), stored(stations, values))
    point = offset(HELSINKI, 1_500, 2_500)
    used = explained(source, point, HOUR_END)[Pollutant.NO2].stations
    assert len(used) >= 2
    assert [abs(s.weight) for s in used] == sorted((abs(s.weight) for s in used), reverse=True)
    by_id = {s.id: s for s in stations}
    for reported in used:
        assert reported.name == by_id[reported.id].name
        assert reported.last_hour_end == HOUR_END
        assert reported.distance_m == pytest.approx(nearest_m(point, [by_id[reported.id]]))
    assert all(s.id != "test:21" for s in used)  # Beijing speaks for nothing here


# -- 7. the fit


def scattered(count: int, seed: int = 7, spread_m: float = 20_000.0) -> list[Station]:
    rng = np.random.default_rng(seed)
    return [
        station(
            i, offset(HELSINKI, rng.uniform(-spread_m, spread_m), rng.uniform(-spread_m, spread_m))
        )
        for i in range(count)
    ]


def smooth_field(hours: int, stations: Sequence[Station], seed: int) -> FloatArray:
    """A regional level that changes by the hour and a gradient across the area."""
    rng = np.random.default_rng(seed)
    level = 40.0 + 20.0 * np.sin(np.arange(hours) / 5.0) + rng.normal(0, 5, hours)
    slope = rng.normal(0, 1.0, hours)  # µg/m³ per km northwards
    north = np.array([(s.point.lat - HELSINKI.lat) * 111.195 for s in stations])
    field: FloatArray = level[:, None] + slope[:, None] * north[None, :]
    return field


def rmse(predicted: FloatArray, observed: FloatArray) -> float:
    known = ~(np.isnan(predicted) | np.isnan(observed))
    return float(np.sqrt(np.mean((predicted[known] - observed[known]) ** 2)))


def smooth_data(hours: int, count: int, seed: int) -> tuple[list[Station], FloatArray, FloatArray]:
    stations = scattered(count)
    truth = smooth_field(hours, stations, seed)
    observed = truth + np.random.default_rng(seed + 1).normal(0, 2.0, truth.shape)
    background = np.full_like(observed, 25.0)
    return stations, observed, background


@pytest.mark.parametrize(
    ("count", "hours"),
    [(MIN_STATIONS - 1, 48), (10, MIN_HOURS - 1), (1, 200), (10, 0)],
)
def test_too_few_stations_or_hours_keep_the_fallback(count: int, hours: int) -> None:
    stations, observed, background = smooth_data(hours, count, seed=1)
    fit = fit_parameters(stations, observed, background, NO2)
    assert fit.fitted is False
    assert fit.parameters == NO2


def test_hours_with_fewer_than_three_stations_do_not_count_towards_a_fit() -> None:
    stations, observed, background = smooth_data(MIN_HOURS + 10, 6, seed=2)
    observed[:11, 2:] = np.nan  # 11 hours with two stations: MIN_HOURS - 1 hours are left
    fit = fit_parameters(stations, observed, background, NO2)
    assert (fit.fitted, fit.parameters, fit.hours) == (False, NO2, MIN_HOURS - 1)


def test_just_enough_stations_and_hours_are_fitted() -> None:
    stations, observed, background = smooth_data(MIN_HOURS, MIN_STATIONS, seed=3)
    fit = fit_parameters(stations, observed, background, NO2)
    assert fit.fitted is True
    assert (fit.stations, fit.hours) == (MIN_STATIONS, MIN_HOURS)


def test_a_fit_on_a_smooth_field_does_no_worse_than_the_fallback_on_the_same_data() -> None:
    stations, observed, background = smooth_data(48, 10, seed=4)
    fit = fit_parameters(stations, observed, background, NO2)
    assert fit.fitted is True
    assert (fit.stations, fit.hours) == (10, 48)
    fallback, _ = leave_one_out(stations, observed, background, NO2)
    chosen, _ = leave_one_out(stations, observed, background, fit.parameters)
    assert fit.rmse == pytest.approx(rmse(chosen, observed), rel=1e-9)
    assert fit.rmse <= rmse(fallback, observed)
    assert 0.0 < fit.coverage <= 1.0
    assert fit.parameters.regional_length_m <= 150_000.0


#: A traffic and an industrial station among background ones, each site 15 km or more from
#: every other station (so no site term reaches another station: see the report on
#: `leave_one_out` for a station within another's street).
LOO_STATIONS = [
    station(0, HELSINKI, StationType.TRAFFIC),
    station(1, offset(HELSINKI, 15_000, 0)),
    station(2, offset(HELSINKI, 0, 15_000), StationType.INDUSTRIAL),
    station(3, offset(HELSINKI, -14_000, -6_000)),
    station(4, offset(HELSINKI, 20_000, 20_000)),
    station(5, offset(HELSINKI, 40_000, 25_000), StationType.BACKGROUND),
]
LOO_OBSERVED = np.array(
    [
        [55.0, 30.0, 41.0, 22.0, 35.0, 18.0],
        [60.0, np.nan, 44.0, 25.0, 38.0, 21.0],  # a station missing in an hour
        [12.0, 30.0, np.nan, np.nan, np.nan, 9.0],  # two stations alone
    ]
)
LOO_BACKGROUND = np.array(
    [
        [20.0, 24.0, 18.0, 26.0, 21.0, 15.0],
        [22.0, 25.0, 19.0, 27.0, 23.0, 16.0],
        [10.0, 12.0, 11.0, 13.0, 12.0, 8.0],
    ]
)


def served_without(
    k: int, t: int, params: FusionParameters, stations: Sequence[Station] = LOO_STATIONS
) -> tuple[float, float]:
    """Station k's value in hour t as the service serves it from the other stations of that
    hour, and the share left unexplained there."""
    rest = [
        j
        for j in range(len(stations))
        if j != k and not (np.isnan(LOO_OBSERVED[t, j]) or np.isnan(LOO_BACKGROUND[t, j]))
    ]
    here = np.array([LOO_BACKGROUND[t, k]])
    field = residual_field(
        [stations[j] for j in rest],
        [float(LOO_OBSERVED[t, j] - LOO_BACKGROUND[t, j]) for j in rest],
        params,
        HOUR_END,
        [float(LOO_BACKGROUND[t, j]) for j in rest],
    )
    lat, lon = one_point(stations[k].point)
    value = max(0.0, float(LOO_BACKGROUND[t, k] + field.at(lat, lon, here)[0]))
    return value, float(field.unexplained(lat, lon)[0])


@pytest.mark.parametrize("pollutant", FUSED)
def test_leave_one_out_matches_serving_without_the_station(pollutant: Pollutant) -> None:
    """The one-inverse shortcut gives what the service gives from the other stations (the
    share left too, at a station without a site term of its own)."""
    params = FUSION_PARAMETERS[pollutant]
    fused, left = leave_one_out(LOO_STATIONS, LOO_OBSERVED, LOO_BACKGROUND, params)
    for t, k in np.ndindex(LOO_OBSERVED.shape):
        if np.isnan(LOO_OBSERVED[t, k]):
            assert np.isnan(fused[t, k])
            continue
        value, share = served_without(k, t, params)
        assert fused[t, k] == pytest.approx(value, rel=1e-9, abs=1e-9)
        if LOO_STATIONS[k].station_type in (None, StationType.BACKGROUND):
            assert left[t, k] == pytest.approx(share, rel=1e-9, abs=1e-12)


def test_a_station_alone_in_its_hour_is_predicted_as_the_background() -> None:
    observed = np.array([[50.0, np.nan, np.nan], [50.0, 60.0, np.nan]])
    background = np.array([[20.0, 20.0, 20.0], [20.0, 20.0, 20.0]])
    fused, left = leave_one_out(LOO_STATIONS[:3], observed, background, NO2)
    assert fused[0, 0] == 20.0
    assert left[0, 0] == 1.0
    assert fused[1, 0] > 20.0
    assert left[1, 0] < 1.0


def patterned_data(
    hours: int, seed: int, skill: float
) -> tuple[list[Station], FloatArray, FloatArray]:
    """Truth = a smooth field + `skill` x the background's anomaly (its departure from the
    hour's mean over the stations), the background a rough pattern new every hour: with
    skill 1 the background's pattern is right, with 0 it is noise."""
    stations = scattered(10)
    rng = np.random.default_rng(seed)
    background = 30.0 + rng.normal(0.0, 8.0, (hours, len(stations)))
    anomaly = background - background.mean(axis=1, keepdims=True)
    truth = smooth_field(hours, stations, seed + 1) + skill * anomaly
    observed = truth + rng.normal(0.0, 1.0, truth.shape)
    return stations, observed, background


@pytest.mark.parametrize("seed", [10, 11, 12])
def test_where_the_backgrounds_pattern_is_noise_a_fit_drops_it_and_it_holds_out(
    seed: int,
) -> None:
    stations, observed, background = patterned_data(48, seed, skill=0.0)
    fit = fit_parameters(stations, observed, background, NO2)
    assert fit.fitted is True
    assert fit.parameters.background_share < 1.0
    # On other hours (held out from the fit), dropping the pattern beats keeping it.
    _, held_out, held_background = patterned_data(48, seed + 100, skill=0.0)
    fitted, _ = leave_one_out(stations, held_out, held_background, fit.parameters)
    kept, _ = leave_one_out(
        stations, held_out, held_background, attrs.evolve(fit.parameters, background_share=1.0)
    )
    assert rmse(fitted, held_out) < 0.8 * rmse(kept, held_out)


@pytest.mark.parametrize("seed", [10, 11, 12])
def test_where_the_backgrounds_pattern_is_right_a_fit_keeps_it_and_it_holds_out(
    seed: int,
) -> None:
    stations, observed, background = patterned_data(48, seed, skill=1.0)
    fit = fit_parameters(stations, observed, background, NO2)
    assert fit.fitted is True
    assert fit.parameters.background_share > 0.5
    _, held_out, held_background = patterned_data(48, seed + 100, skill=1.0)
    fitted, _ = leave_one_out(stations, held_out, held_background, fit.parameters)
    dropped, _ = leave_one_out(
        stations, held_out, held_background, attrs.evolve(fit.parameters, background_share=0.0)
    )
    assert rmse(fitted, held_out) < 0.8 * rmse(dropped, held_out)


# -- 8. FusedAir fits per pollutant and day

DAY = fit_day(HOUR_END)


def week_of(stations: Sequence[Station], hours: int, before: datetime) -> list[Observation]:
    """NO2 of `stations` for `hours` hours ending at `before`: a smooth field."""
    values = smooth_field(hours, stations, seed=21)
    ends = [before - HOUR * (hours - 1 - t) for t in range(hours)]
    return [
        Observation(s.id, Pollutant.NO2, end, max(0.0, float(values[t, j])))
        for t, end in enumerate(ends)
        for j, s in enumerate(stations)
    ]


class CountedFits:
    """`fit_parameters`, counted: what each call was given and gave."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, FusionParameters, FusionFit]] = []

    def __call__(
        self,
        stations: Sequence[Station],
        observed: FloatArray,
        background: FloatArray,
        fallback: FusionParameters,
    ) -> FusionFit:
        fit = fit_parameters(stations, observed, background, fallback)
        self.calls.append((len(stations), fallback, fit))
        return fit


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> CountedFits:
    fits = CountedFits()
    monkeypatch.setattr(fused_air_module, "fit_parameters", fits)
    return fits


def test_enough_observations_in_the_week_before_fit_the_day(counted: CountedFits) -> None:
    stations = scattered(6)
    store = MemoryStore()
    store.put_stations(stations)
    store.put_observations(week_of(stations, 30, DAY))  # the 30 hours up to midnight
    store.put_observations(Observation(s.id, Pollutant.NO2, HOUR_END, 60.0) for s in stations)
    source = FusedAir(PatternAir(25.0), store)
    values = explained(source, HELSINKI, HOUR_END)
    assert values[Pollutant.NO2].fitted is True
    assert values[Pollutant.PM25].fitted is False  # no PM2.5 observed: no field, no fit
    [(count, fallback, fit)] = counted.calls
    # The 30 hours up to the day and the day's own hour: the week ending with the day.
    assert (count, fallback, fit.fitted, fit.stations, fit.hours) == (6, NO2, True, 6, 31)
    assert source.stations_used(HOUR_END)[Pollutant.NO2].params == fit.parameters


def test_the_days_own_hours_are_fitted_on_and_those_after_it_are_not(
    counted: CountedFits,
) -> None:
    """The fit for a day sees the week ending with it: a whole day of its own hours fits it;
    hours of the next day do not count."""
    stations = scattered(6)
    store = MemoryStore()
    store.put_stations(stations)
    late = DAY + timedelta(hours=24)  # the day's last hour ends at the next midnight
    store.put_observations(week_of(stations, 24, late))  # all 24 hours of the day
    store.put_observations(week_of(stations, 30, late + timedelta(hours=30)))  # the next day
    source = FusedAir(PatternAir(25.0), store)
    assert fit_day(late) == fit_day(late - HOUR * 23) == DAY
    assert explained(source, HELSINKI, late)[Pollutant.NO2].fitted is True
    [(_, _, fit)] = counted.calls
    assert fit.hours == 24


def test_one_station_is_not_fitted(counted: CountedFits) -> None:
    one = scattered(1)
    store = MemoryStore()
    store.put_stations(one)
    store.put_observations(week_of(one, 100, DAY))
    store.put_observations([Observation("test:0", Pollutant.NO2, HOUR_END, 60.0)])
    source = FusedAir(PatternAir(25.0), store)
    value = explained(source, one[0].point, HOUR_END)[Pollutant.NO2]
    assert value.fitted is False
    assert value.corrected is True  # the fallback fuses all the same
    assert counted.calls == []  # too few to try
    assert source.stations_used(HOUR_END)[Pollutant.NO2].params == NO2


def test_a_day_is_fitted_once_whatever_is_asked_and_written(counted: CountedFits) -> None:
    clock = ManualClock(HOUR_END)
    stations = scattered(6)
    store = MemoryStore()
    store.put_stations(stations)
    store.put_observations(week_of(stations, 60, DAY + timedelta(days=1)))
    source = FusedAir(PatternAir(25.0), store, clock=clock)
    for minutes in (0, -30, 45, 120, 600):
        explained(source, HELSINKI, HOUR_END + timedelta(minutes=minutes))
    assert len(counted.calls) == 1
    # New observations (a new version) of the same day refit it, once.
    store.put_observations(Observation(s.id, Pollutant.NO2, HOUR_END, 90.0) for s in stations)
    clock.advance(seconds=1)
    for minutes in (0, -30, 45):
        assert explained(source, HELSINKI, HOUR_END + timedelta(minutes=minutes))[
            Pollutant.NO2
        ].fitted
    assert len(counted.calls) == 2
    # The next day's hours are fitted on their own week, once.
    tomorrow = DAY + timedelta(days=1, hours=5)
    store.put_observations(Observation(s.id, Pollutant.NO2, tomorrow, 30.0) for s in stations)
    clock.advance(seconds=1)
    for minutes in (0, -50, 30):
        explained(source, HELSINKI, tomorrow + timedelta(minutes=minutes))
    assert len(counted.calls) == 3
    assert all(fit.fitted for *_, fit in counted.calls)


def test_given_parameters_are_used_as_they_are(counted: CountedFits) -> None:
    stations = scattered(6)
    store = MemoryStore()
    store.put_stations(stations)
    store.put_observations(week_of(stations, 60, DAY + timedelta(days=1)))
    mine = {p: attrs.evolve(params, noise_share=0.5) for p, params in FUSION_PARAMETERS.items()}
    source = FusedAir(PatternAir(25.0), store, parameters=mine)
    assert explained(source, HELSINKI, HOUR_END)[Pollutant.NO2].fitted is False
    assert counted.calls == []
    assert source.stations_used(HOUR_END)[Pollutant.NO2].params == mine[Pollutant.NO2]


def test_fit_day_is_the_utc_day_the_hour_starts_in() -> None:
    midnight = datetime(2026, 3, 10, tzinfo=UTC)
    assert fit_day(midnight) == midnight - timedelta(days=1)  # the hour 23:00-24:00
    assert fit_day(midnight + HOUR) == midnight
    assert fit_day(midnight + timedelta(hours=24)) == midnight

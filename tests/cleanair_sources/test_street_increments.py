"""Traffic increments from street networks' roads, and street-level air over a background."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import TypeVar

import numpy as np
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from cleanair_core.air.pollutants import SCORED, Concentrations, Pollutant
from cleanair_core.air.quality_source import GriddedAir, Sample
from cleanair_core.air.street_level import (
    STREET_POLLUTANTS,
    TRAFFIC_EFFECTS,
    GridCell,
    GriddedStreetLevelAir,
    StreetLevelAir,
    TrafficEffect,
    road_decay,
    straight_road_integral,
    street_level_air,
    traffic_factor,
)
from cleanair_core.geo import EARTH_RADIUS_M, Point, distance_m
from cleanair_core.routes.network import Access, RoadClass, StreetNetwork
from cleanair_sources import street_increments
from cleanair_sources.embedded_model import EmbeddedModel
from cleanair_sources.gazetteer import Gazetteer
from cleanair_sources.osm_import import HELSINKI_EXTRACT, import_network
from cleanair_sources.street_increments import CELL_M, NetworkIncrements

T = TypeVar("T")
M_PER_DEG = EARTH_RADIUS_M * math.pi / 180.0
LAT0, LON0 = 60.0, 24.0
M_PER_DEG_LON = M_PER_DEG * math.cos(math.radians(LAT0))
NO2 = STREET_POLLUTANTS.index(Pollutant.NO2)
PM25 = STREET_POLLUTANTS.index(Pollutant.PM25)

#: A road as ((north m, east m), (north m, east m), vehicles a day), metres from (LAT0, LON0).
Road = tuple[tuple[float, float], tuple[float, float], float]


def at_metres(north: float, east: float) -> tuple[float, float]:
    return LAT0 + north / M_PER_DEG, LON0 + east / M_PER_DEG_LON


def network_of(roads: Sequence[Road], extent_m: float = 3000.0) -> StreetNetwork:
    """One edge per road, plus a traffic-free footpath square `extent_m` wide around them, so
    the network's box covers the places the tests look at."""
    corners = ((0.0, 0.0), (0.0, extent_m), (extent_m, extent_m), (extent_m, 0.0))
    paths = [(corners[i], corners[(i + 1) % 4], 0.0) for i in range(4)]
    lats, lons, frm, to, length, traffic = [], [], [], [], [], []
    for a, b, vehicles in [*roads, *paths]:
        for north, east in (a, b):
            lat, lon = at_metres(north, east)
            lats.append(lat)
            lons.append(lon)
        frm.append(len(lats) - 2)
        to.append(len(lats) - 1)
        length.append(distance_m(Point(lats[-2], lons[-2]), Point(lats[-1], lons[-1])))
        traffic.append(vehicles)
    return StreetNetwork(
        name="test",
        node_lat=np.array(lats),
        node_lon=np.array(lons),
        edge_from=np.array(frm, dtype=np.int32),
        edge_to=np.array(to, dtype=np.int32),
        edge_length=np.array(length),
        edge_class=np.array(
            [RoadClass.ARTERIAL if v else RoadClass.PATH for v in traffic], dtype=np.uint8
        ),
        edge_access=np.full(len(frm), Access.FOOT, dtype=np.uint8),
        edge_traffic=np.array(traffic, dtype=np.float64),
    )


def increments_at(
    increments: NetworkIncrements, points: Sequence[tuple[float, float]]
) -> np.ndarray:
    """Increments at points given in metres (north, east)."""
    lat_lon = np.array([at_metres(n, e) for n, e in points])
    return increments.at(lat_lon[:, 0], lat_lon[:, 1])


#: A straight north-south road 3 km long through the middle of the square.
STRAIGHT: Road = ((0.0, 1500.0), (3000.0, 1500.0), 10_000.0)


def test_a_long_straight_road_of_ten_thousand_vehicles_gives_each_kerb_increment() -> None:
    [on_road] = increments_at(NetworkIncrements([network_of([STRAIGHT])]), [(1500.0, 1500.0)])
    for effect, value in zip(TRAFFIC_EFFECTS, on_road, strict=True):
        assert value == pytest.approx(effect.per_10k_vehicles, rel=0.05)


def test_the_increment_falls_with_distance_to_nothing_beyond_the_reach() -> None:
    increments = NetworkIncrements([network_of([STRAIGHT])])
    offsets = np.arange(0.0, 1200.0, 5.0)
    values = increments_at(increments, [(1500.0, 1500.0 + d) for d in offsets])
    for index, effect in enumerate(TRAFFIC_EFFECTS):
        magnitude = np.abs(values[:, index])
        assert np.all(np.diff(magnitude) <= 1e-6 * magnitude[0])
        beyond = offsets > effect.reach_m + 2 * CELL_M
        assert np.all(magnitude[beyond] <= 1e-6 * magnitude[0])
        assert magnitude[offsets == 100.0][0] < 0.8 * magnitude[0]


def test_points_outside_every_network_get_no_increment() -> None:
    increments = NetworkIncrements([network_of([STRAIGHT])])
    values = increments_at(increments, [(-100.0, 1500.0), (1500.0, 3100.0), (1500.0, 1500.0)])
    assert np.isnan(values[:2]).all()
    assert not np.isnan(values[2]).any()
    assert increments.cell_mean(GridCell(10.0, 10.0, 10.1, 10.1)) is None
    assert np.isnan(increments.at(np.array([math.nan]), np.array([LON0]))).all()


roads = st.lists(
    st.tuples(
        st.tuples(st.floats(200, 2800), st.floats(200, 2800)),
        st.tuples(st.floats(200, 2800), st.floats(200, 2800)),
        st.floats(100, 40_000),
    ).filter(lambda r: math.dist(r[0], r[1]) > 20),
    min_size=1,
    max_size=4,
)
places = st.lists(st.tuples(st.floats(0, 3000), st.floats(0, 3000)), min_size=1, max_size=8)


@settings(max_examples=25, deadline=None)
@given(roads, st.data(), places, st.floats(1.1, 10.0))
def test_more_traffic_on_a_road_never_lowers_the_increment_near_it(
    layout: list[Road], data: st.DataObject, points: list[tuple[float, float]], factor: float
) -> None:
    busier = data.draw(st.integers(0, len(layout) - 1))
    raised = [(a, b, v * factor if i == busier else v) for i, (a, b, v) in enumerate(layout)]
    before = increments_at(NetworkIncrements([network_of(layout)]), points)
    after = increments_at(NetworkIncrements([network_of(raised)]), points)
    for index, effect in enumerate(TRAFFIC_EFFECTS):
        sign = 1.0 if effect.per_10k_vehicles > 0 else -1.0
        assert np.all(sign * (after[:, index] - before[:, index]) >= -1e-4)


@settings(max_examples=25, deadline=None)
@given(st.floats(0.0, math.pi), st.floats(100, 40_000))
def test_the_increment_never_rises_moving_straight_away_from_a_road(
    angle: float, vehicles: float
) -> None:
    half = 1400.0
    direction = np.array([math.cos(angle), math.sin(angle)])
    normal = np.array([-direction[1], direction[0]])
    centre = np.array([1500.0, 1500.0])
    a, b = centre - half * direction, centre + half * direction
    road: Road = ((a[0], a[1]), (b[0], b[1]), vehicles)
    increments = NetworkIncrements([network_of([road], extent_m=3000.0)])
    away = [tuple(centre + d * normal) for d in np.arange(0.0, 700.0, 7.0)]
    values = np.abs(increments_at(increments, away))
    tolerance = 0.02 * values[0] + 1e-6  # the raster's interpolation ripple, 2 % of the kerb
    assert np.all(np.diff(values, axis=0) <= tolerance)


class ConstantBackground:
    """One value per cell of `size` degrees, the same in all: a CAMS-like uniform field."""

    update_interval = 3600

    def __init__(self, values: Concentrations, size: float) -> None:
        self.values, self.size = values, size

    async def concentrations(self, samples: Sequence[Sample]) -> list[Concentrations]:
        return [dict(self.values) for _ in samples]

    def cell_of(self, lat: float, lon: float) -> GridCell:
        south, west = math.floor(lat / self.size), math.floor(lon / self.size)
        return GridCell(
            south * self.size, west * self.size, (south + 1) * self.size, (west + 1) * self.size
        )


#: High enough that no cap comes into play (the cell's mean is never more than
#: `MAX_LOCAL_SHARE` of it, nothing reaches zero) and PM10 far enough above PM2.5 that "PM10
#: contains PM2.5" never lifts it: the averaging is then exact, for every pollutant.
HIGH: Concentrations = {
    Pollutant.PM25: 400.0,
    Pollutant.PM10: 800.0,
    Pollutant.NO2: 500.0,
    Pollutant.O3: 500.0,
    Pollutant.SO2: 300.0,
}


def cell_area_m2(cell: GridCell) -> float:
    return (
        (cell.north - cell.south)
        * M_PER_DEG
        * (cell.east - cell.west)
        * M_PER_DEG
        * math.cos(math.radians((cell.south + cell.north) / 2.0))
    )


@settings(max_examples=10, deadline=None)
@given(roads, st.sampled_from([0.01, 0.02, 0.1]), st.integers(0, 23))
def test_street_level_values_average_back_to_the_background_over_each_whole_cell(
    layout: list[Road], size: float, hour: int
) -> None:
    """No double counting: the covered part's values, weighted by its share of the cell's
    area, and the rest of the cell at its quiet remainder average to the cell's value."""
    network = network_of(layout)
    background = ConstantBackground(HIGH, size)
    increments = NetworkIncrements([network])
    air = StreetLevelAir(background, background, increments)
    south, west, north, east = network.bounds
    rng = np.random.default_rng(7)
    lats, lons = rng.uniform(south, north, 8000), rng.uniform(west, east, 8000)
    at = datetime(2026, 11, 24, hour, tzinfo=UTC)
    answers = asyncio.run(
        air.concentrations([Sample(Point(a, o), at) for a, o in zip(lats, lons, strict=True)])
    )
    cells: dict[GridCell, list[int]] = {}
    for index, (a, o) in enumerate(zip(lats, lons, strict=True)):
        cells.setdefault(background.cell_of(a, o), []).append(index)
    checked = 0
    for cell, members in cells.items():
        if len(members) < 500:
            continue
        # The share from the geometry alone, not from the adapter.
        overlap = (
            (min(cell.north, north) - max(cell.south, south))
            * M_PER_DEG
            * (min(cell.east, east) - max(cell.west, west))
            * M_PER_DEG
            * math.cos(math.radians((south + north) / 2.0))
        )
        share = min(overlap / cell_area_m2(cell), 1.0)
        cover = increments.cell_cover(cell)
        mean = increments.cell_mean(cell)
        assert cover is not None
        assert mean is not None
        assert cover.share == pytest.approx(share, rel=1e-3)
        g = traffic_factor(float(lons[members].mean()), at)
        for index, pollutant in enumerate(STREET_POLLUTANTS):
            level = HIGH[pollutant]
            assert level is not None
            values = np.array([answers[m][pollutant] for m in members], dtype=np.float64)
            spread = float(values.max() - values.min())
            rest = level + g * (cover.remainder[index] - mean[index])
            whole = share * float(values.mean()) + (1.0 - share) * rest
            # Ozone falls near roads: its values average back too (the cell's mean is negative).
            # A cell with no traffic near any point has no spread: float sums of thousands of
            # values still differ from the level by a few parts in 1e7 of it.
            tolerance = 0.05 * spread * share + 1e-6 * max(1.0, abs(level))
            assert abs(whole - level) <= tolerance, (pollutant, whole, level)
            checked += 1
    event("cells checked", payload=checked // len(STREET_POLLUTANTS))


def test_a_quiet_street_in_a_large_cell_keeps_the_cells_value() -> None:
    """A network covering a small part of its cell: the rest is as quiet as its quiet
    streets, so there the values stay at the background and the busy road stands above it."""
    network = network_of([STRAIGHT])
    background = ConstantBackground(HIGH, 0.1)
    increments = NetworkIncrements([network])
    cell = background.cell_of(*at_metres(1500.0, 1500.0))
    cover = increments.cell_cover(cell)
    assert cover is not None
    assert 0.05 < cover.share < 0.3
    air = StreetLevelAir(background, background, increments)
    at = datetime(2026, 11, 24, 15, tzinfo=UTC)
    kerb, quiet = asyncio.run(
        air.concentrations(
            [
                Sample(Point(*at_metres(1500.0, 1500.0)), at),
                Sample(Point(*at_metres(200.0, 200.0)), at),
            ]
        )
    )
    level = HIGH[Pollutant.NO2]
    assert level is not None
    g = traffic_factor(LON0, at)
    # Over the covered part alone (the old rule) the quiet corner lost g times the network's
    # mean; over the whole cell it loses a share of the mean's excess over the quiet remainder.
    assert quiet[Pollutant.NO2] == pytest.approx(
        level - g * cover.share * cover.covered_mean[NO2], rel=1e-4
    )
    assert level - quiet[Pollutant.NO2] < 0.5 * g * cover.covered_mean[NO2]  # type: ignore[operator]
    assert kerb[Pollutant.NO2] > level + 0.8 * g * TRAFFIC_EFFECTS[NO2].per_10k_vehicles  # type: ignore[operator]


# -- the full street-level value beside a road whose traffic rises -----------------------------
#
# Raising road r's traffic by ΔV adds a_p·ΔV/10,000·k_r(x) to the local increment at x and
# a_p·ΔV/10,000·(mean of k_r over x's cell) to the cell's mean, which is subtracted: the
# street-level value at x rises if and only if k_r(x) exceeds k_r's mean over the cell (the
# caps only help: a capped mean no longer grows). "Near the road" is where that is sure, from
# the model alone, not from the raster: beside the middle half of the road (at least a quarter
# of its length on each side) k_r(x) is at least `_beside`, and the mean over a covered part of
# area A is at most (metres of road within reach of the cell) x (the plane integral of one
# metre of road) / A, whatever the cell's shape (as if all of that road's spread fell inside
# the cell). Farther away the value may fall, and far from every road it must: the cell's mean
# rises, the local increment does not. Beside a 2.6 km road through a 3 km network, NO2 starts
# to fall about 240 m from it in one CAMS cell (0.1 degree), about 120 m in the embedded
# model's 0.01 degree cells.

#: How much farther the raster may put a road than it is, as seen from a point: each road piece
#: is added at its nearest raster point (half a cell diagonal away at most) and a point is read
#: from the four raster points around it (a cell diagonal away at most).
RASTER_SLACK_M = 1.5 * math.sqrt(2.0) * CELL_M


def _plane_integral(effect: TrafficEffect) -> float:
    """What one metre of a road adds to the sum of its spread over the whole plane, per unit of
    the kerb increment of a long road of the same traffic (m²/m)."""
    r = np.arange(0.0, effect.reach_m + 0.25, 0.25)
    plane = float(np.trapezoid(2.0 * math.pi * r * road_decay(r, effect), r))
    return plane / straight_road_integral(effect)


def _beside(effect: TrafficEffect, length: float, distance: float) -> float:
    """At least what a straight road of `length` adds, per unit of its long-road kerb increment,
    `distance` from its middle half: a quarter of its length on each side, every piece seen
    `RASTER_SLACK_M` farther than it is."""
    s = np.arange(0.0, length / 4.0 + 0.25, 0.25)
    seen = np.hypot(distance + RASTER_SLACK_M, s)
    return 2.0 * float(np.trapezoid(road_decay(seen, effect), s)) / straight_road_integral(effect)


def near_distance(
    effect: TrafficEffect,
    length: float,
    reaching: float,
    covered_m2: float,
    share: float,
    remainder_rise: float,
) -> float:
    """How far from the middle half of a road of `length` its local rise surely exceeds the
    rise of the whole cell's mean: `share` of the cell is networked, its raster points stand
    for at least `covered_m2`, `reaching` metres of the road are within reach of the cell, and
    the rest of the cell's quiet remainder rises by `remainder_rise` (per unit of the road's
    long-road kerb rise, weighted by the rest's share); -1: nowhere."""
    covered_rise = reaching * _plane_integral(effect) / covered_m2 if covered_m2 > 0 else math.inf
    cell_rise = share * covered_rise + remainder_rise
    if _beside(effect, length, 0.0) < cell_rise:
        return -1.0
    low, high = 0.0, effect.reach_m
    for _ in range(30):
        middle = (low + high) / 2.0
        low, high = (
            (middle, high) if _beside(effect, length, middle) >= cell_rise else (low, middle)
        )
    return low


def length_within(start: np.ndarray, end: np.ndarray, box: tuple[float, ...]) -> float:
    """Metres of the segment start-end (north, east) inside `box` (south, west, north, east)."""
    south, west, north, east = box
    span = end - start
    first, last = 0.0, 1.0
    for p, q in (
        (-span[0], start[0] - south),
        (span[0], north - start[0]),
        (-span[1], start[1] - west),
        (span[1], east - start[1]),
    ):
        if p == 0.0:
            if q < 0.0:
                return 0.0
        elif p < 0.0:
            first = max(first, q / p)
        else:
            last = min(last, q / p)
    return max(last - first, 0.0) * float(np.hypot(*span))


def cell_box_m(cell: GridCell, margin: float) -> tuple[float, float, float, float]:
    """`cell` in metres (south, west, north, east) from (LAT0, LON0), widened by `margin`."""
    return (
        (cell.south - LAT0) * M_PER_DEG - margin,
        (cell.west - LON0) * M_PER_DEG_LON - margin,
        (cell.north - LAT0) * M_PER_DEG + margin,
        (cell.east - LON0) * M_PER_DEG_LON + margin,
    )


def covered_m2(cell: GridCell, bounds: tuple[float, float, float, float]) -> float:
    """At most the area the raster points of a network inside `cell` stand for: a rectangle H x
    W metres holds at least (H/step - 1)(W/step - 1) raster points."""
    south, west, north, east = bounds
    m_per_deg_lon = M_PER_DEG * math.cos(math.radians((south + north) / 2.0))
    height = (min(cell.north, north) - max(cell.south, south)) * M_PER_DEG
    width = (min(cell.east, east) - max(cell.west, west)) * m_per_deg_lon
    return max(height - CELL_M, 0.0) * max(width - CELL_M, 0.0)


#: CAMS-like backgrounds, low enough that the caps come into play (a cell's mean is at most
#: `MAX_LOCAL_SHARE` of its value, a value never below zero, PM10 at least PM2.5).
cams_values = st.builds(
    lambda pm25, coarse, no2, o3: {
        Pollutant.PM25: pm25,
        Pollutant.PM10: pm25 + coarse,
        Pollutant.NO2: no2,
        Pollutant.O3: o3,
        Pollutant.SO2: 1.0,
    },
    st.floats(1.0, 25.0),
    st.floats(0.0, 30.0),
    st.floats(2.0, 60.0),
    st.floats(5.0, 90.0),
)


@settings(max_examples=40, deadline=None)
@given(
    roads,
    st.data(),
    st.sampled_from([0.01, 0.02, 0.1]),
    st.integers(0, 23),
    cams_values,
    st.floats(1.1, 10.0),
)
def test_more_traffic_on_a_road_never_worsens_the_street_level_air_near_it(
    layout: list[Road],
    data: st.DataObject,
    size: float,
    hour: int,
    values: Concentrations,
    factor: float,
) -> None:
    busier = data.draw(st.integers(0, len(layout) - 1), label="busier")
    raised = [(a, b, v * factor if i == busier else v) for i, (a, b, v) in enumerate(layout)]
    start, end = np.array(layout[busier][0]), np.array(layout[busier][1])
    length = float(np.hypot(*(end - start)))
    across = np.array([start[1] - end[1], end[0] - start[0]]) / length
    bounds = network_of(layout).bounds
    background = ConstantBackground(values, size)
    networks = [NetworkIncrements([network_of(roads)]) for roads in (layout, raised)]

    def near(north: float, east: float) -> dict[Pollutant, float]:
        """How far from the road each pollutant is surely "near" at the cell of this place."""
        cell = background.cell_of(*at_metres(north, east))
        covered = covered_m2(cell, bounds)
        was, now = (increments.cell_cover(cell) for increments in networks)
        assert was is not None
        assert now is not None
        kerb_rise = layout[busier][2] * (factor - 1.0) / 10_000.0
        reach = {
            # Only the road within reach of the cell (a raster cell more: the snapping) adds
            # to its mean. The quiet remainder is read from the increments: it is a quantile
            # of the field, which no bound from the model alone follows.
            e.pollutant: near_distance(
                e,
                length,
                length_within(start, end, cell_box_m(cell, e.reach_m + CELL_M)),
                covered,
                was.share,
                max(0.0, (1.0 - was.share) * (now.remainder[i] - was.remainder[i]))
                / (e.per_10k_vehicles * kerb_rise),
            )
            for i, e in enumerate(TRAFFIC_EFFECTS)
        }
        # PM10 contains PM2.5: where PM2.5 falls it may carry PM10 down with it.
        reach[Pollutant.PM10] = min(reach[Pollutant.PM10], reach[Pollutant.PM25])
        return reach

    # Places beside the road's middle half, out to the widest "near" at the road's middle.
    middle = (start + end) / 2.0
    widest = max(0.0, *near(*middle).values())
    placements = data.draw(
        st.lists(st.tuples(st.floats(0.25, 0.75), st.floats(-1.0, 1.0)), min_size=1, max_size=8),
        label="placements",
    )
    places = [start + t * (end - start) + u * widest * across for t, u in placements]
    at = datetime(2026, 11, 24, hour, tzinfo=UTC)
    samples = [Sample(Point(*at_metres(n, e)), at) for n, e in places]
    airs = [StreetLevelAir(background, background, increments) for increments in networks]
    before, after = (asyncio.run(air.concentrations(samples)) for air in airs)
    checked = 0
    for place, (_, u), was, now in zip(places, placements, before, after, strict=True):
        away, reach = abs(u) * widest, near(*place)
        for effect in TRAFFIC_EFFECTS:
            if reach[effect.pollutant] < 0.0 or away > reach[effect.pollutant]:
                continue
            sign = 1.0 if effect.per_10k_vehicles > 0 else -1.0  # traffic titrates ozone
            rise = sign * (now[effect.pollutant] - was[effect.pollutant])  # type: ignore[operator]
            assert rise >= -1e-4, (effect.pollutant, away, was, now)
            checked += 1
    event("places x pollutants checked", payload=min(checked, 10))


def test_a_very_large_network_is_kept_within_the_raster_bound() -> None:
    network = network_of([STRAIGHT], extent_m=60_000.0)
    increments = NetworkIncrements([network], max_cells=40_000)
    assert increments.memory_bytes <= 40_000 * len(TRAFFIC_EFFECTS) * 4
    fine = NetworkIncrements([network_of([STRAIGHT])])
    assert fine.memory_bytes > 0


# -- central Helsinki: a busy kerb and a quiet block inside one CAMS cell ------------------------


@pytest.fixture(scope="module")
def helsinki() -> StreetNetwork:
    return import_network(HELSINKI_EXTRACT, "helsinki")


def _metres(network: StreetNetwork, lat: np.ndarray, lon: np.ndarray) -> np.ndarray:
    m_lon = M_PER_DEG * math.cos(math.radians(float(network.node_lat.mean())))
    return np.stack((lat * M_PER_DEG, lon * m_lon), axis=-1)


def distance_to_edges(network: StreetNetwork, edges: np.ndarray, point: Point) -> float:
    """Metres from `point` to the nearest of `edges` (a local flat projection)."""
    a = _metres(
        network,
        network.node_lat[network.edge_from[edges]],
        network.node_lon[network.edge_from[edges]],
    )
    b = _metres(
        network, network.node_lat[network.edge_to[edges]], network.node_lon[network.edge_to[edges]]
    )
    p = _metres(network, np.array(point.lat), np.array(point.lon))
    span = b - a
    t = np.clip(np.einsum("ij,ij->i", p - a, span) / np.maximum((span**2).sum(1), 1e-9), 0, 1)
    return float(np.sqrt(((a + t[:, None] * span - p) ** 2).sum(1)).min())


def test_in_one_cams_cell_a_busy_kerb_and_a_quiet_block_differ_as_studies_report(
    helsinki: StreetNetwork,
) -> None:
    busy_classes = (RoadClass.COLLECTOR, RoadClass.ARTERIAL, RoadClass.MOTORWAY)
    busy = np.flatnonzero(np.isin(helsinki.edge_class, busy_classes))
    # The busy kerb: the middle of the edge of the busiest road.
    kerb_edge = int(busy[np.argmax(helsinki.edge_traffic[busy])])
    a, b = (
        helsinki.node(int(helsinki.edge_from[kerb_edge])),
        helsinki.node(int(helsinki.edge_to[kerb_edge])),
    )
    kerb = Point((a.lat + b.lat) / 2, (a.lon + b.lon) / 2)
    # The quiet block: a street node 200 m (or just over) from any collector or busier road.
    rng = np.random.default_rng(3)
    candidates = [helsinki.node(int(i)) for i in rng.choice(helsinki.node_count, 600, False)]
    distances = {p: distance_to_edges(helsinki, busy, p) for p in candidates}
    far = min((p for p in candidates if distances[p] >= 200.0), key=distances.__getitem__)
    assert distances[far] < 260.0
    cams: Concentrations = {
        Pollutant.PM25: 6.0,
        Pollutant.PM10: 11.0,
        Pollutant.NO2: 18.0,
        Pollutant.O3: 45.0,
    }
    background = ConstantBackground(cams, 0.1)
    assert background.cell_of(kerb.lat, kerb.lon) == background.cell_of(far.lat, far.lon)
    air = StreetLevelAir(background, background, NetworkIncrements([helsinki]))
    weekday_noon = datetime(2026, 11, 24, 10, 30, tzinfo=UTC)  # 12:10 local solar time
    at_kerb, in_block = asyncio.run(
        air.concentrations([Sample(kerb, weekday_noon), Sample(far, weekday_noon)])
    )
    # NO2: street / background contrasts of 1.09-3.16 across 36 European areas (Cyrys 2012).
    ratio = at_kerb[Pollutant.NO2] / in_block[Pollutant.NO2]  # type: ignore[operator]
    assert 1.1 <= ratio <= 3.2
    # PM mass (PM2.5 and PM10): "only about 10-30% higher" at the most exposed sites than at
    # the least exposed (Janssen et al. 2008, HEPMEAP), far below NO2's contrast.
    for pm in (Pollutant.PM25, Pollutant.PM10):
        assert 1.1 <= at_kerb[pm] / in_block[pm] <= 1.3, pm  # type: ignore[operator]
    assert at_kerb[Pollutant.O3] < in_block[Pollutant.O3]  # type: ignore[operator]


def test_gridded_street_level_air_answers_as_sample_by_sample(helsinki: StreetNetwork) -> None:
    """Over the embedded model, a plan's array answers (`air_at_hour`) are the values the
    sample-by-sample path gives, inside the network and outside it."""
    model = EmbeddedModel(Gazetteer.load())
    air = street_level_air(model, model, NetworkIncrements([helsinki]))
    assert isinstance(air, GriddedStreetLevelAir)
    rng = np.random.default_rng(5)
    nodes = rng.choice(helsinki.node_count, 400, replace=False)
    lats = np.concatenate([helsinki.node_lat[nodes], [60.5, 61.0]])  # two points outside
    lons = np.concatenate([helsinki.node_lon[nodes], [25.5, 24.0]])
    at = datetime(2026, 11, 24, 7, tzinfo=UTC)
    arrays = air.air_at_hour(lats, lons, at)
    samples = [Sample(Point(a, o), at) for a, o in zip(lats.tolist(), lons.tolist(), strict=True)]
    answers = asyncio.run(air.concentrations(samples))
    for row, answer in enumerate(answers):
        assert arrays[row].tolist() == pytest.approx([answer[p] for p in SCORED], rel=1e-12)


def test_a_background_that_waits_on_the_network_is_downscaled_sample_by_sample() -> None:
    background = ConstantBackground({Pollutant.NO2: 18.0}, 0.1)
    air = street_level_air(background, background, NetworkIncrements([]))
    assert not isinstance(air, GriddedAir)


def test_a_large_batch_is_downscaled_on_the_offload_a_score_right_here() -> None:
    """A plan's thousands of nodes over a background that answers samples (Open-Meteo) are
    downscaled on the offload, off the event loop; a score's one sample is not worth a hop.
    The values are the same either way."""
    network = network_of([((1500.0, 0.0), (1500.0, 3000.0), 20_000.0)])
    background = ConstantBackground(HIGH, 0.1)
    offloaded: list[int] = []

    async def recording(work: Callable[[], T], /) -> T:
        offloaded.append(1)
        return work()

    air = StreetLevelAir(background, background, NetworkIncrements([network]), recording)
    here = StreetLevelAir(background, background, NetworkIncrements([network]))
    south, west, north, east = network.bounds
    at = datetime(2026, 11, 24, 8, tzinfo=UTC)
    many = [
        Sample(Point(south + (north - south) * k / 999, west + (east - west) * k / 999), at)
        for k in range(1000)
    ]
    answers = asyncio.run(air.concentrations(many))
    assert answers == asyncio.run(here.concentrations(many))
    assert len({answer[Pollutant.NO2] for answer in answers}) > 100  # downscaled, not flat
    assert offloaded == [1]
    asyncio.run(air.concentrations(many[:1]))
    assert offloaded == [1]


@pytest.mark.parametrize(("shape", "size"), [((37, 53), 7), ((120, 91), 41), ((5, 6), 11)])
def test_the_fft_convolution_is_scipys_same_mode(shape: tuple[int, int], size: int) -> None:
    """NumPy's FFT in place of `scipy.signal.fftconvolve` (seconds of import at every
    start): the same field, to round-off."""
    from scipy.signal import fftconvolve

    rng = np.random.default_rng(7)
    image, kernel = rng.random(shape), rng.random((size, size))
    expected = fftconvolve(image, kernel, mode="same")
    assert np.allclose(street_increments._convolve_same(image, kernel), expected, atol=1e-10)


def test_fft_sizes_are_smooth_and_least() -> None:
    def smooth(n: int) -> bool:
        for factor in (2, 3, 5):
            while n % factor == 0:
                n //= factor
        return n == 1

    for n in range(1, 400):
        size = street_increments._smooth_size(n)
        assert size >= n
        assert smooth(size)
        assert not any(smooth(m) for m in range(n, size))

"""Proximity to heavy traffic from a street network: near roads 1, far from them 0."""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import UTC, datetime

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cleanair_core.air.pollutants import Pollutant
from cleanair_core.geo import EARTH_RADIUS_M, Point, distance_m
from cleanair_core.ports import NearRoadIncrement
from cleanair_core.routes.network import Access, RoadClass, StreetNetwork
from cleanair_sources.embedded_model import EmbeddedModel
from cleanair_sources.gazetteer import Gazetteer
from cleanair_sources.near_road import DECAY_M, REACH_M, NetworkNearRoad, proximity
from cleanair_sources.osm_import import HELSINKI_EXTRACT, import_network

M_PER_DEG_LAT = EARTH_RADIUS_M * math.pi / 180.0

M_PER_DEG_LON = M_PER_DEG_LAT * math.cos(math.radians(60.0))

#: Roads along meridians (great circles, so a point at a road's longitude is on it): an arterial
#: along 24.0 E from 60.00 to 60.02 N (about 2.2 km) in four edges, a footpath 2 km east of it
#: and a collector 5 km east.
ARTERIAL_LON = 24.0
PATH_LON = 24.0 + 2_000.0 / M_PER_DEG_LON
COLLECTOR_LON = 24.0 + 5_000.0 / M_PER_DEG_LON

Segment = tuple[tuple[float, float], tuple[float, float], RoadClass]


def network_of(segments: Sequence[Segment]) -> StreetNetwork:
    """A network with one edge per segment ((lat, lon) -> (lat, lon), class)."""
    points: list[tuple[float, float]] = []
    index: dict[tuple[float, float], int] = {}
    frm, to, length, classes = [], [], [], []
    for a, b, road_class in segments:
        for p in (a, b):
            if p not in index:
                index[p] = len(points)
                points.append(p)
        frm.append(index[a])
        to.append(index[b])
        length.append(distance_m(Point(*a), Point(*b)))
        classes.append(road_class)
    return StreetNetwork(
        name="test",
        node_lat=np.array([p[0] for p in points], dtype=np.float64),
        node_lon=np.array([p[1] for p in points], dtype=np.float64),
        edge_from=np.array(frm, dtype=np.int32),
        edge_to=np.array(to, dtype=np.int32),
        edge_length=np.array(length, dtype=np.float64),
        edge_class=np.array(classes, dtype=np.uint8),
        edge_access=np.full(len(frm), Access.FOOT | Access.BIKE, dtype=np.uint8),
    )


def line(lon: float, lat0: float, lat1: float, pieces: int, road_class: RoadClass) -> list[Segment]:
    """A road along the meridian `lon` from `lat0` to `lat1`, in `pieces` edges."""
    lats = np.linspace(lat0, lat1, pieces + 1)
    return [((lats[k], lon), (lats[k + 1], lon), road_class) for k in range(pieces)]


TOWN = network_of(
    [
        *line(ARTERIAL_LON, 60.0, 60.02, 4, RoadClass.ARTERIAL),
        *line(PATH_LON, 60.0, 60.02, 4, RoadClass.PATH),
        *line(COLLECTOR_LON, 60.0, 60.02, 4, RoadClass.COLLECTOR),
    ]
)


@pytest.fixture(scope="module")
def near() -> NetworkNearRoad:
    return NetworkNearRoad(TOWN)


def east_of(lon: float, metres: float, lat: float = 60.013) -> Point:
    """The point `metres` east of the meridian `lon` (west when negative) at `lat`."""
    return Point(lat, lon + metres / (M_PER_DEG_LAT * math.cos(math.radians(lat))))


def test_it_is_a_near_road_increment(near: NetworkNearRoad) -> None:
    hook: NearRoadIncrement = near
    assert isinstance(hook(Point(60.01, ARTERIAL_LON)), float)


def test_on_an_arterial_it_is_one(near: NetworkNearRoad) -> None:
    # Mid-edge, on a node, and half-way between two points sampled along an edge (<= 20 m
    # apart). Edges are straight chords, which sag below the ground by length² / 8R (6 mm for
    # these 556 m edges): 1 within 1e-3 (6 cm).
    for lat in (60.013, 60.01, 60.0001, 60.00009):
        assert near(Point(lat, ARTERIAL_LON)) == pytest.approx(1.0, abs=1e-3)


def test_it_falls_with_distance_from_the_road(near: NetworkNearRoad) -> None:
    at_30 = near(east_of(ARTERIAL_LON, 30.0))
    at_100 = near(east_of(ARTERIAL_LON, 100.0))
    assert at_30 == pytest.approx(proximity(np.array([30.0]))[0], rel=1e-4)
    assert at_100 == pytest.approx(proximity(np.array([100.0]))[0], rel=1e-4)
    assert 0.5 < at_30 < 0.7  # about exp(-30 / 60)
    assert 0.1 < at_100 < 0.2
    assert near(east_of(ARTERIAL_LON, -30.0)) == pytest.approx(at_30, rel=1e-6)  # both sides


def test_300_m_away_it_is_zero(near: NetworkNearRoad) -> None:
    assert near(east_of(ARTERIAL_LON, 300.0)) == 0.0
    assert near(east_of(ARTERIAL_LON, -300.0)) == 0.0
    assert near(Point(60.02 + 300.0 / M_PER_DEG_LAT, ARTERIAL_LON)) == 0.0  # past its end


def test_beyond_the_end_of_a_road_it_is_the_distance_to_the_end(near: NetworkNearRoad) -> None:
    beyond = Point(60.02 + 50.0 / M_PER_DEG_LAT, ARTERIAL_LON + 0.0003)
    d = distance_m(beyond, Point(60.02, ARTERIAL_LON))
    assert near(beyond) == pytest.approx(proximity(np.array([d]))[0], rel=1e-4)


def test_a_footpath_far_from_roads_is_zero(near: NetworkNearRoad) -> None:
    assert near(Point(60.01, PATH_LON)) == 0.0


def test_a_collector_counts_half(near: NetworkNearRoad) -> None:
    assert near(Point(60.013, COLLECTOR_LON)) == pytest.approx(0.5, abs=1e-3)
    for metres in (10.0, 30.0, 80.0, 200.0):
        assert near(east_of(COLLECTOR_LON, metres)) == pytest.approx(
            0.5 * near(east_of(ARTERIAL_LON, metres)), rel=1e-4
        )


def test_the_busiest_nearby_road_wins() -> None:
    # A local street 100 m east of an arterial.
    local_lon = 24.0 + 100.0 / M_PER_DEG_LON
    network = network_of(
        [
            *line(24.0, 60.0, 60.02, 2, RoadClass.ARTERIAL),
            *line(local_lon, 60.0, 60.02, 2, RoadClass.LOCAL),
        ]
    )
    near = NetworkNearRoad(network)

    def f(d: float) -> float:
        return float(proximity(np.array([d]))[0])

    # On the local street: max(0.15, f(100 m)); 50 m beyond it: max(0.15 f(50 m), f(150 m)).
    assert near(Point(60.013, local_lon)) == pytest.approx(max(0.15, f(100.0)), rel=1e-3)
    assert near(east_of(24.0, 150.0)) == pytest.approx(max(0.15 * f(50.0), f(150.0)), rel=1e-3)
    assert near(east_of(24.0, 40.0)) == pytest.approx(f(40.0), rel=1e-3)


def test_points_outside_the_network_are_zero(near: NetworkNearRoad) -> None:
    for point in (Point(0.0, 0.0), Point(-60.0, -156.0), Point(90.0, 0.0), Point(60.01, 25.0)):
        assert near(point) == 0.0
    assert near.many(np.array([0.0, -60.0]), np.array([0.0, -156.0])).tolist() == [0.0, 0.0]


def test_a_network_without_roads_is_zero_everywhere() -> None:
    paths_only = NetworkNearRoad(network_of(line(24.0, 60.0, 60.02, 2, RoadClass.PATH)))
    assert paths_only(Point(60.01, 24.0)) == 0.0
    assert paths_only.many(np.array([60.01]), np.array([24.0])).tolist() == [0.0]
    assert NetworkNearRoad(network_of([]))(Point(60.01, 24.0)) == 0.0


def test_the_proximity_curve() -> None:
    d = np.array([0.0, DECAY_M, REACH_M - 1e-9, REACH_M, 1e6, np.inf, np.nan])
    f = proximity(d)
    assert f[0] == 1.0
    assert f[1] == pytest.approx(math.exp(-1.0), abs=0.02)
    assert f[2] == pytest.approx(0.0, abs=1e-9)
    assert f[3:].tolist() == [0.0, 0.0, 0.0, 0.0]


@settings(max_examples=200, deadline=None)
@given(
    d1=st.floats(0.0, 400.0),
    d2=st.floats(0.0, 400.0),
    lat=st.floats(59.99, 60.03),
    side=st.sampled_from([1.0, -1.0]),
)
def test_it_never_grows_with_distance(
    near: NetworkNearRoad, d1: float, d2: float, lat: float, side: float
) -> None:
    nearer, farther = sorted((d1, d2))
    a = near(east_of(ARTERIAL_LON, side * nearer, lat))
    b = near(east_of(ARTERIAL_LON, side * farther, lat))
    assert 0.0 <= b <= a + 1e-12  # up to rounding (~1e-9 m in Earth-centred coordinates)
    assert a <= 1.0
    if 60.0 <= lat <= 60.02 and farther < REACH_M - 1.0 and farther - nearer > 0.01:
        assert b < a  # strictly, beside the road and within its reach


@settings(max_examples=50, deadline=None)
@given(
    st.lists(st.tuples(st.floats(59.99, 60.03), st.floats(23.99, 24.1)), min_size=1, max_size=40)
)
def test_many_equals_one_by_one(near: NetworkNearRoad, points: list[tuple[float, float]]) -> None:
    lats = np.array([p[0] for p in points])
    lons = np.array([p[1] for p in points])
    together = near.many(lats, lons)
    one_by_one = [near(Point(lat, lon)) for lat, lon in points]
    # Equal up to rounding: Earth-centred coordinates (~6.4e6 m) carry ~1e-9 m of it.
    assert together.tolist() == pytest.approx(one_by_one, abs=1e-9)


def brute_force(network: StreetNetwork, lat: float, lon: float) -> float:
    """max over all edges of weight · f(distance to the edge's chord), edge by edge."""

    def xyz(la: float, lo: float) -> np.ndarray:
        phi, lam = math.radians(la), math.radians(lo)
        return EARTH_RADIUS_M * np.array(
            [math.cos(phi) * math.cos(lam), math.cos(phi) * math.sin(lam), math.sin(phi)]
        )

    weights = {0: 0.0, 1: 0.15, 2: 0.5, 3: 1.0, 4: 1.0}
    p = xyz(lat, lon)
    best = 0.0
    for k in range(network.edge_count):
        start = network.node(int(network.edge_from[k]))
        end = network.node(int(network.edge_to[k]))
        a, b = xyz(start.lat, start.lon), xyz(end.lat, end.lon)
        t = min(max(float(np.dot(p - a, b - a) / np.dot(b - a, b - a)), 0.0), 1.0)
        d = float(np.linalg.norm(p - (a + t * (b - a))))
        best = max(best, weights[int(network.edge_class[k])] * float(proximity(np.array([d]))[0]))
    return best


def test_it_matches_a_brute_force_search() -> None:
    rng = np.random.default_rng(11)
    segments: list[Segment] = []
    for _ in range(80):  # random streets up to ~400 m long in a 1.5 km square
        lat, lon = 60.0 + rng.uniform(0, 0.0135), 24.0 + rng.uniform(0, 0.027)
        end = (lat + rng.uniform(-0.0025, 0.0025), lon + rng.uniform(-0.005, 0.005))
        segments.append(((lat, lon), end, RoadClass(int(rng.integers(0, 5)))))
    network = network_of(segments)
    near = NetworkNearRoad(network)
    lats = 60.0 + rng.uniform(-0.003, 0.0165, 400)
    lons = 24.0 + rng.uniform(-0.006, 0.033, 400)
    expected = [brute_force(network, la, lo) for la, lo in zip(lats, lons, strict=True)]
    assert near.many(lats, lons).tolist() == pytest.approx(expected, abs=1e-9)
    one_by_one = [near(Point(la, lo)) for la, lo in zip(lats, lons, strict=True)]
    assert one_by_one == pytest.approx(expected, abs=1e-9)
    assert 0.0 < float(np.mean(np.array(expected) > 0.0)) < 1.0


def test_many_keeps_the_shape_and_ignores_non_finite_points(near: NetworkNearRoad) -> None:
    lats = np.array([[60.01, np.nan], [60.01, 60.01]])
    lons = np.array([[ARTERIAL_LON, ARTERIAL_LON], [COLLECTOR_LON, np.inf]])
    values = near.many(lats, lons)
    assert values.shape == (2, 2)
    assert values.ravel().tolist() == pytest.approx([1.0, 0.0, 0.5, 0.0], abs=1e-3)
    with pytest.raises(ValueError, match="same shape"):
        near.many(np.zeros(2), np.zeros(3))


def test_a_network_across_the_antimeridian() -> None:
    network = network_of([((0.0, 179.999), (0.0, -179.999), RoadClass.ARTERIAL)])
    near = NetworkNearRoad(network)
    # The edge is a 220 m chord across the antimeridian: on it, 1; far away, 0.
    assert near(Point(0.0, 180.0)) == pytest.approx(1.0, abs=1e-4)
    assert near(Point(0.0, -180.0)) == pytest.approx(1.0, abs=1e-4)
    assert near(Point(0.0, 0.0)) == 0.0


# --- with the embedded model on the shipped Helsinki network -------------------------------------


@pytest.fixture(scope="module")
def gazetteer() -> Gazetteer:
    return Gazetteer.load()


@pytest.fixture(scope="module")
def helsinki() -> StreetNetwork:
    return import_network(HELSINKI_EXTRACT, "helsinki")


def test_helsinki_primary_roads_raise_no2_against_300_m_away(
    gazetteer: Gazetteer, helsinki: StreetNetwork
) -> None:
    near = NetworkNearRoad(helsinki)
    with_roads = EmbeddedModel(gazetteer, near_road=near)
    without = EmbeddedModel(gazetteer)
    at = datetime(2025, 1, 15, 7, 0, tzinfo=UTC)  # 09:00 in Helsinki: the morning rush
    # The longest primary-road edge, at its middle.
    primary = np.flatnonzero(helsinki.edge_class == RoadClass.ARTERIAL)
    k = primary[np.argmax(helsinki.edge_length[primary])]
    a, b = helsinki.node(int(helsinki.edge_from[k])), helsinki.node(int(helsinki.edge_to[k]))
    on_road = Point((a.lat + b.lat) / 2, (a.lon + b.lon) / 2)
    # Of the points 300 m away in eight directions, the one farthest from traffic.
    around = [
        Point(
            on_road.lat + 300.0 * math.cos(bearing) / M_PER_DEG_LAT,
            on_road.lon
            + 300.0 * math.sin(bearing) / (M_PER_DEG_LAT * math.cos(math.radians(on_road.lat))),
        )
        for bearing in np.radians(np.arange(0, 360, 45))
    ]
    away = min(around, key=near)
    assert near(on_road) > 0.95
    assert near(away) < 0.5
    no2_on = with_roads.concentrations_at(on_road, at)[Pollutant.NO2]
    no2_away = with_roads.concentrations_at(away, at)[Pollutant.NO2]
    assert no2_on is not None
    assert no2_away is not None
    assert no2_on > no2_away
    # And the difference is the road's: without the network the two points are much closer.
    plain_on = without.concentrations_at(on_road, at)[Pollutant.NO2]
    plain_away = without.concentrations_at(away, at)[Pollutant.NO2]
    assert plain_on is not None
    assert plain_away is not None
    assert no2_on - plain_on > 10.0 * abs(no2_away - plain_away)
    print(
        f"NO2 on a primary road {no2_on:.1f} µg/m³ (near-road {near(on_road):.2f}), "
        f"300 m away {no2_away:.1f} µg/m³ (near-road {near(away):.2f}); "
        f"without the network {plain_on:.1f} and {plain_away:.1f}"
    )


def test_helsinki_near_road_values(helsinki: StreetNetwork) -> None:
    near = NetworkNearRoad(helsinki)
    south, west, north, east = helsinki.bounds
    rng = np.random.default_rng(3)
    values = near.many(rng.uniform(south, north, 5_000), rng.uniform(west, east, 5_000))
    assert np.all((values >= 0.0) & (values <= 1.0))
    # A city centre: most places are near some traffic, few are at an arterial's kerb.
    assert 0.01 < float(np.mean(values > 0.9)) < 0.3
    assert float(np.mean(values > 0.0)) > 0.9

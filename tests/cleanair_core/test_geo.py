"""Great-circle distances: one formula, for one pair of points and for arrays of them."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cleanair_core.geo import EARTH_RADIUS_M, Point, distance_m, distances_m

points = st.builds(
    Point,
    st.floats(-90.0, 90.0, allow_nan=False),
    st.floats(-180.0, 180.0, allow_nan=False),
)


def tolerance_m(distance: float) -> float:
    """How far the vectorised and scalar results may differ.

    NumPy's sine and cosine may differ from the math module's in the last bit. That moves a
    result by a few parts in 1e16, except near the antipodes, where arcsin is steep and one
    bit of the haversine moves the distance by up to 2R·sqrt(ε) (about 0.2 m).
    """
    if distance < 19_000_000.0:
        return 1e-12 * distance + 1e-9
    return 2 * EARTH_RADIUS_M * math.sqrt(8 * np.finfo(np.float64).eps)


@given(st.lists(st.tuples(points, points), min_size=1, max_size=20))
def test_the_vectorised_distances_are_the_scalar_ones(pairs: list[tuple[Point, Point]]) -> None:
    lat1 = np.array([a.lat for a, _ in pairs])
    lon1 = np.array([a.lon for a, _ in pairs])
    lat2 = np.array([b.lat for _, b in pairs])
    lon2 = np.array([b.lon for _, b in pairs])
    vectorised = distances_m(lat1, lon1, lat2, lon2)
    assert vectorised.shape == (len(pairs),)
    for (a, b), got in zip(pairs, vectorised, strict=True):
        expected = distance_m(a, b)
        assert abs(got - expected) <= tolerance_m(expected)


@given(points, st.lists(points, min_size=1, max_size=20))
def test_one_point_against_many_broadcasts(origin: Point, others: list[Point]) -> None:
    lat = np.array([p.lat for p in others])
    lon = np.array([p.lon for p in others])
    vectorised = distances_m(origin.lat, origin.lon, lat, lon)
    for other, got in zip(others, vectorised, strict=True):
        expected = distance_m(origin, other)
        assert abs(got - expected) <= tolerance_m(expected)


def test_known_distances() -> None:
    equator_quarter = math.pi / 2 * EARTH_RADIUS_M
    assert distance_m(Point(0, 0), Point(0, 90)) == pytest.approx(equator_quarter, rel=1e-15)
    assert distance_m(Point(90, 0), Point(-90, 0)) == pytest.approx(2 * equator_quarter)
    assert distance_m(Point(60.17, 24.94), Point(60.17, 24.94)) == 0.0
    vectorised = distances_m(np.array([0.0, 90.0]), np.array([0.0, 0.0]), 0.0, 90.0)
    assert vectorised == pytest.approx([equator_quarter, equator_quarter], rel=1e-15)

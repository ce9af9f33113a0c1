"""Reading OpenAQ-archive files: rows to stations and observations, refusals by reason."""

from __future__ import annotations

import csv
import gzip
import io
import math
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import TextIO, cast

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cleanair_core.air.observations import AreaType, Observation, Station, StationType
from cleanair_core.air.pollutants import Pollutant
from cleanair_core.air.units import MOLAR_MASS, MOLAR_VOLUME_25C
from cleanair_core.errors import OperatorError
from cleanair_core.geo import Point
from cleanair_sources.openaq_archive import (
    ArchiveFileError,
    ArchiveParser,
    ArchiveTally,
    Ignored,
    Reason,
    check_readable,
    hour_end,
    parse_locations,
    read_archive,
    read_locations,
    to_micrograms,
)
from cleanair_sources.text_files import MAX_LINE_CHARS, bounded_lines

HEADER = "location_id,sensors_id,location,datetime,lat,lon,parameter,units,value"
ROW = "2178,1,Kallio,2024-01-01T01:00:00+02:00,60.18,24.95,pm25,µg/m³,5.5"
END = datetime(2023, 12, 31, 23, tzinfo=UTC)


def parse(
    text: str, parser: ArchiveParser | None = None, name: str = "a.csv"
) -> tuple[list[Station | Observation], ArchiveTally]:
    parser = ArchiveParser() if parser is None else parser
    items = list(parser.parse(name, io.StringIO(text, newline="")))
    return items, parser.tally


def rows(*lines: str) -> str:
    return "\n".join([HEADER, *lines]) + "\n"


def observations(items: Iterable[Station | Observation]) -> list[Observation]:
    return [item for item in items if isinstance(item, Observation)]


# -- rows that pass -------------------------------------------------------------------------


def test_a_row_gives_its_station_then_its_observation() -> None:
    items, tally = parse(rows(ROW))
    assert items == [
        Station("openaq:2178", "Kallio", Point(60.18, 24.95)),
        Observation("openaq:2178", Pollutant.PM25, END, 5.5),
    ]
    assert (tally.rows, tally.accepted, tally.rejected_total) == (1, 1, 0)


def test_a_station_comes_once_across_files_of_one_import() -> None:
    parser = ArchiveParser()
    first, _ = parse(rows(ROW), parser)
    second, _ = parse(rows(ROW.replace("pm25", "pm10")), parser, "b.csv")
    assert [type(item) for item in first + second] == [Station, Observation, Observation]


@pytest.mark.parametrize("unit", ["µg/m³", "ug/m3", "µg/m3", "UG/M3", "μg/m³", " µg/m³ "])
def test_micrograms_are_taken_as_they_are(unit: str) -> None:
    assert to_micrograms(Pollutant.PM10, 12.5, unit) == 12.5


def test_ppb_and_ppm_convert_at_25_degrees() -> None:
    assert to_micrograms(Pollutant.NO2, 1.0, "ppb") == pytest.approx(1.8816, abs=1e-4)
    assert to_micrograms(Pollutant.O3, 1.0, "ppb") == pytest.approx(1.9631, abs=1e-4)
    assert to_micrograms(Pollutant.O3, 0.04, "ppm") == pytest.approx(78.52, abs=0.01)


@given(
    st.sampled_from([Pollutant.NO2, Pollutant.O3]),
    st.floats(min_value=0, max_value=1e6, allow_nan=False),
)
def test_ppm_is_a_thousand_ppb_and_ppb_scales_by_molar_mass(
    pollutant: Pollutant, ppb: float
) -> None:
    micrograms = to_micrograms(pollutant, ppb, "ppb")
    assert micrograms is not None
    assert micrograms == pytest.approx(ppb * MOLAR_MASS[pollutant] / MOLAR_VOLUME_25C)
    ppm = to_micrograms(pollutant, ppb / 1000, "ppm")
    assert ppm is not None
    assert math.isclose(ppm, micrograms, rel_tol=1e-12, abs_tol=1e-12)


@pytest.mark.parametrize("pollutant", [Pollutant.PM25, Pollutant.PM10])
def test_particles_in_ppb_are_an_unknown_unit(pollutant: Pollutant) -> None:
    assert to_micrograms(pollutant, 1.0, "ppb") is None
    assert to_micrograms(pollutant, 1.0, "ppm") is None
    assert to_micrograms(Pollutant.NO2, 1.0, "mg/m3") is None


_OFFSETS = st.integers(min_value=-14 * 4, max_value=14 * 4).map(
    lambda quarters: timezone(timedelta(minutes=15 * quarters))
)


@given(
    location=st.integers(min_value=1, max_value=10**12),
    hour=st.integers(min_value=20 * 8766, max_value=120 * 8766).map(
        lambda hours: datetime(1970, 1, 1, tzinfo=UTC) + timedelta(hours=hours)
    ),
    offset=_OFFSETS,
    lat=st.floats(min_value=-90, max_value=90, allow_nan=False),
    lon=st.floats(min_value=-180, max_value=180, allow_nan=False),
    parameter=st.sampled_from(["pm25", "pm10", "no2", "o3"]),
    value=st.floats(min_value=0, max_value=1e5, allow_nan=False),
    name=st.text(st.characters(blacklist_categories=["Cs"]), max_size=30),
)
def test_a_valid_row_round_trips(
    location: int,
    hour: datetime,
    offset: timezone,
    lat: float,
    lon: float,
    parameter: str,
    value: float,
    name: str,
) -> None:
    local = hour.astimezone(offset).isoformat()
    out = io.StringIO(newline="")
    csv.writer(out).writerows(
        [
            HEADER.split(","),
            [
                str(location),
                "9",
                name,
                local,
                repr(lat),
                repr(lon),
                parameter,
                "ug/m3",
                repr(value),
            ],
        ]
    )
    items, tally = parse(out.getvalue())
    assert tally.rejected_total == 0, tally.rejected
    station, observation = items
    assert isinstance(station, Station)
    assert station.id == f"openaq:{location}"
    assert station.point == Point(lat, lon)
    assert station.name == (name.strip() or station.id)
    assert observation == Observation(station.id, Pollutant(parameter), hour, value)


def test_hour_end_wants_an_offset_and_the_hour() -> None:
    assert hour_end("2024-01-01T01:00:00+02:00") == END
    assert hour_end("2024-01-01T00:00:00Z") == datetime(2024, 1, 1, tzinfo=UTC)
    assert hour_end("2024-01-01T01:00:00") is Reason.NAIVE_TIME
    assert hour_end("2024-01-01") is Reason.NAIVE_TIME
    assert hour_end("2024-01-01T01:30:00+00:00") is Reason.NOT_ON_THE_HOUR
    assert hour_end("2024-01-01T01:00:00+05:30") is Reason.NOT_ON_THE_HOUR
    assert hour_end("2024-01-01T01:00:01+00:00") is Reason.NOT_ON_THE_HOUR
    assert hour_end("yesterday") is Reason.BAD_TIME
    assert hour_end("0001-01-01T00:00:00+01:00") is Reason.BAD_TIME


# -- rows that do not -----------------------------------------------------------------------


def test_each_bad_row_is_counted_by_its_reason_and_line() -> None:
    bad = [
        (ROW.replace("5.5", "five"), Reason.BAD_NUMBER),
        (ROW.replace("5.5", "nan"), Reason.BAD_NUMBER),
        (ROW.replace("5.5", "1_0"), Reason.BAD_NUMBER),
        (ROW.replace("5.5", "-999"), Reason.NEGATIVE_VALUE),
        (ROW.replace("2024-01-01T01:00:00+02:00", "soon"), Reason.BAD_TIME),
        (ROW.replace("+02:00", ""), Reason.NAIVE_TIME),
        (ROW.replace("01:00:00+", "01:15:00+"), Reason.NOT_ON_THE_HOUR),
        (ROW.replace("µg/m³", "ppb"), Reason.UNKNOWN_UNIT),
        (ROW.replace("5.5", ""), Reason.MISSING_FIELD),
        (ROW.replace("2178,", ",", 1), Reason.MISSING_FIELD),
        (ROW.replace("2178,", "x2178,", 1), Reason.BAD_LOCATION_ID),
        (ROW.replace("60.18", "91"), Reason.OUT_OF_RANGE),
        (ROW.replace("24.95", "-181"), Reason.OUT_OF_RANGE),
        (ROW.replace("60.18", "north"), Reason.BAD_NUMBER),
        ("2178,1,Kallio", Reason.WRONG_FIELD_COUNT),
        ('2178,1,"Kal"lio,x', Reason.WRONG_FIELD_COUNT),
    ]
    items, tally = parse(rows(ROW, *(line for line, _ in bad)))
    assert len(observations(items)) == 1
    expected: dict[Reason, int] = {}
    for _, reason in bad:
        expected[reason] = expected.get(reason, 0) + 1
    assert dict(tally.rejected) == expected
    assert [(e.file, e.line) for e in tally.first_errors] == [("a.csv", n) for n in range(3, 13)]
    assert [e.reason for e in tally.first_errors] == [reason for _, reason in bad[:10]]


def test_a_rejection_never_repeats_a_cell() -> None:
    secret = "\x1b[2Jsecret"
    _, tally = parse(rows(ROW.replace("5.5", secret), ROW.replace("Kallio", secret)))
    assert all(secret not in str(error) for error in tally.first_errors)


def test_other_parameters_are_ignored_and_counted() -> None:
    items, tally = parse(rows(ROW.replace("pm25", "co"), ROW.replace("pm25", "so2"), ROW))
    assert len(observations(items)) == 1
    assert tally.ignored == {Ignored.OTHER_PARAMETER: 2}
    assert tally.rejected_total == 0


def test_a_repeated_row_passes_and_a_conflicting_one_is_refused() -> None:
    items, tally = parse(rows(ROW, ROW, ROW.replace("5.5", "6.5")))
    assert observations(items) == [Observation("openaq:2178", Pollutant.PM25, END, 5.5)]
    assert tally.ignored == {Ignored.REPEATED_ROW: 1}
    assert tally.rejected == {Reason.CONFLICTING_DUPLICATE: 1}


def test_the_same_hour_written_in_another_offset_is_the_same_row() -> None:
    utc = ROW.replace("2024-01-01T01:00:00+02:00", "2023-12-31T23:00:00Z")
    _, tally = parse(rows(ROW, utc.replace("5.5", "7")))
    assert tally.rejected == {Reason.CONFLICTING_DUPLICATE: 1}


def test_one_location_in_two_places_is_refused() -> None:
    nearby = ROW.replace("60.18", "60.18004")  # a different rounding, 4 m away
    items, tally = parse(rows(ROW, nearby.replace("pm25", "pm10"), ROW.replace("60.18", "60.3")))
    assert len(observations(items)) == 2
    assert tally.rejected == {Reason.CONFLICTING_COORDINATES: 1}


def test_location_ids_are_whole_numbers_in_one_spelling() -> None:
    items, _ = parse(rows(ROW.replace("2178,", "002178,", 1)))
    assert items[0] == Station("openaq:2178", "Kallio", Point(60.18, 24.95))
    _, tally = parse(rows(ROW.replace("2178,", "٣,", 1), ROW.replace("2178,", "-1,", 1)))
    assert tally.rejected == {Reason.BAD_LOCATION_ID: 2}


# -- headers and text -----------------------------------------------------------------------


def test_a_file_without_its_header_is_refused_without_echoing_it() -> None:
    with pytest.raises(ArchiveFileError, match="header") as caught:
        parse(ROW + "\n")
    assert "Kallio" not in str(caught.value)
    with pytest.raises(ArchiveFileError, match="missing units"):
        parse(HEADER.replace(",units", "") + "\n")
    with pytest.raises(ArchiveFileError, match="empty"):
        parse("")
    with pytest.raises(ArchiveFileError, match="twice"):
        parse(HEADER + ",value\n")


def test_header_case_order_and_extra_columns_do_not_matter() -> None:
    header = "VALUE,units,parameter,lon,lat,datetime,location,sensors_id,location_id,extra"
    row = "5.5,µg/m³,pm25,24.95,60.18,2024-01-01T01:00:00+02:00,Kallio,1,2178,whatever"
    items, _ = parse(f"{header}\n{row}\n")
    assert observations(items) == [Observation("openaq:2178", Pollutant.PM25, END, 5.5)]


def test_bom_crlf_and_blank_lines_are_read() -> None:
    items, tally = parse("\ufeff" + HEADER + "\r\n" + ROW + "\r\n\r\n")
    assert len(observations(items)) == 1
    assert tally.rows == 1


def test_progress_is_reported_as_rows_are_read() -> None:
    heard: list[int] = []
    parser = ArchiveParser(on_progress=lambda t: heard.append(t.rows), progress_every=2)
    parse(rows(*[ROW.replace("2178", str(n)) for n in range(1, 6)]), parser)
    assert heard == [2, 4]


# -- locations ------------------------------------------------------------------------------

LOCATIONS = "location_id,location,lat,lon,station_type,area_type\n"


def test_locations_name_and_type_the_stations() -> None:
    tally = ArchiveTally()
    known = parse_locations(
        "l.csv",
        io.StringIO(LOCATIONS + "2178,Helsinki Kallio 2,60.18,24.95,Background,urban\n"),
        tally,
    )
    items, _ = parse(rows(ROW), ArchiveParser(known, tally))
    assert items[0] == Station(
        "openaq:2178",
        "Helsinki Kallio 2",
        Point(60.18, 24.95),
        StationType.BACKGROUND,
        AreaType.URBAN,
    )


def test_a_row_far_from_its_listed_location_is_refused() -> None:
    tally = ArchiveTally()
    known = parse_locations("l.csv", io.StringIO(LOCATIONS + "2178,K,60.5,24.95,,\n"), tally)
    items, tally = parse(rows(ROW), ArchiveParser(known, tally))
    assert items == []
    assert tally.rejected == {Reason.CONFLICTING_COORDINATES: 1}


def test_bad_location_rows_are_refused_and_the_types_may_be_left_out() -> None:
    tally = ArchiveTally()
    text = (
        LOCATIONS
        + "1,A,60,24,,\n"
        + "2,B,60,24,roadside,\n"
        + "3,C,60,24,,downtown\n"
        + "4,D,,24,,\n"
        + "5,E,95,24,,\n"
        + "1,A,61,24,,\n"
    )
    known = parse_locations("l.csv", io.StringIO(text), tally)
    assert list(known) == ["1"]
    assert known["1"].station_type is None
    assert tally.rejected == {
        Reason.BAD_STATION_TYPE: 1,
        Reason.BAD_AREA_TYPE: 1,
        Reason.MISSING_FIELD: 1,
        Reason.OUT_OF_RANGE: 1,
        Reason.CONFLICTING_COORDINATES: 1,
    }
    minimal = parse_locations(
        "m.csv", io.StringIO("location_id,location,lat,lon\n7,G,1,2\n"), tally
    )
    assert minimal["7"].point == Point(1, 2)


# -- files ----------------------------------------------------------------------------------


def test_gzip_is_told_by_its_first_bytes_not_its_name(tmp_path: Path) -> None:
    plain = tmp_path / "day.csv.gz"  # named gzip, but plain text
    plain.write_text(rows(ROW), encoding="utf-8")
    packed = tmp_path / "day.csv"  # named plain, but gzip
    packed.write_bytes(
        gzip.compress(rows(ROW.replace("pm25", "no2").replace("µg/m³", "ppb")).encode())
    )
    parser = ArchiveParser()
    items = list(read_archive([plain, packed], parser))
    assert [o.pollutant for o in observations(items)] == [Pollutant.PM25, Pollutant.NO2]
    assert [(f.name, f.rows, f.accepted) for f in parser.tally.files] == [
        (str(plain), 1, 1),
        (str(packed), 1, 1),
    ]


def test_a_truncated_gzip_file_is_an_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "cut.csv.gz"
    whole = gzip.compress(rows(*[ROW.replace("2178", str(n)) for n in range(1, 2000)]).encode())
    path.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(ArchiveFileError, match="truncated or corrupt") as caught:
        list(read_archive([path], ArchiveParser()))
    assert str(path) in str(caught.value)


def test_a_file_that_is_not_utf8_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "latin.csv"
    path.write_bytes(rows(ROW).encode("latin-1"))
    with pytest.raises(ArchiveFileError, match="not UTF-8"):
        list(read_archive([path], ArchiveParser()))


def test_missing_and_unreadable_files_are_found_before_reading(tmp_path: Path) -> None:
    good = tmp_path / "good.csv"
    good.write_text(rows(ROW))
    with pytest.raises(ArchiveFileError, match="no such file"):
        check_readable([good, tmp_path / "nope.csv"])
    with pytest.raises(ArchiveFileError, match="folder"):
        check_readable([tmp_path])
    check_readable([good])
    with pytest.raises(ArchiveFileError, match="no such file"):
        read_locations(tmp_path / "nope.csv", ArchiveTally())


def test_a_value_overflowing_in_micrograms_is_refused_alone() -> None:
    """1e306 ppm is a finite number, but not once converted (x 1,882 for NO2): that row is
    refused by its reason, as a NaN row is, and the rows around it are read."""
    gas = ROW.replace("pm25", "no2")
    items, tally = parse(
        rows(
            gas.replace("µg/m³,5.5", "ppm,1e306"),
            gas.replace("2178", "2179").replace("µg/m³,5.5", "ppb,20"),
            gas.replace("2178", "2180").replace("5.5", "nan"),
        )
    )
    assert [o.station_id for o in observations(items)] == ["openaq:2179"]
    assert tally.rejected == {Reason.NOT_FINITE_IN_MICROGRAMS: 1, Reason.BAD_NUMBER: 1}
    assert [(e.line, e.reason) for e in tally.first_errors] == [
        (2, Reason.NOT_FINITE_IN_MICROGRAMS),
        (4, Reason.BAD_NUMBER),
    ]


class _Recording:
    """A text handle that notes how much each `readline` asks for."""

    def __init__(self, text: str) -> None:
        self.text = io.StringIO(text, newline="")
        self.asked: list[int] = []

    def readline(self, size: int = -1, /) -> str:
        self.asked.append(size)
        return self.text.readline(size)


def test_a_line_longer_than_the_bound_is_refused_by_number_unread() -> None:
    handle = _Recording(rows(ROW, "x" * (50 * MAX_LINE_CHARS), ROW))
    lines = bounded_lines("big.csv", cast(TextIO, handle), "row")
    assert next(lines) == HEADER + "\n"
    assert next(lines) == ROW + "\n"
    with pytest.raises(OperatorError, match=r"big\.csv, line 3: longer than 4,096 characters"):
        next(lines)
    assert all(0 < size <= MAX_LINE_CHARS + 2 for size in handle.asked)
    assert handle.text.tell() <= len((rows(ROW) + "x" * (MAX_LINE_CHARS + 2)).encode())


@pytest.mark.parametrize("end", ["\n", "\r\n", "\r", ""])
def test_a_line_of_exactly_the_bound_is_read_whatever_its_line_break(end: str) -> None:
    line = "y" * MAX_LINE_CHARS + end
    after = ["z\n"] if end else []  # a line without its break ends the file
    text = "".join([line, *after])
    assert list(bounded_lines("a.csv", io.StringIO(text, newline=""), "row")) == [line, *after]
    with pytest.raises(OperatorError, match="line 1"):
        list(bounded_lines("a.csv", io.StringIO("y" + line, newline=""), "row"))


def test_an_overlong_line_in_a_gzip_file_stops_it_by_line_number(tmp_path: Path) -> None:
    path = tmp_path / "one-line.csv.gz"
    path.write_bytes(gzip.compress((rows(ROW) + "9" * 1_000_000 + "\n").encode()))
    with pytest.raises(ArchiveFileError, match="line 3: longer than") as caught:
        list(read_archive([path], ArchiveParser()))
    assert str(path) in str(caught.value)


def test_devices_and_pipes_are_refused_before_reading(tmp_path: Path) -> None:
    import os

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # opening it to probe would block until a writer came
    for path in (Path("/dev/zero"), fifo):
        with pytest.raises(ArchiveFileError, match="not a regular file"):
            check_readable([path])
        with pytest.raises(ArchiveFileError, match="not a regular file"):
            list(read_archive([path], ArchiveParser()))
        with pytest.raises(ArchiveFileError, match="not a regular file"):
            read_locations(path, ArchiveTally())

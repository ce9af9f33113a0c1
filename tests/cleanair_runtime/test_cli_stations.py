"""`cleanair stations import|list|prune` over a SQLite file: in process through `main`, and
as the installed command in its own process."""

from __future__ import annotations

import gzip
import json
import math
import os
import subprocess
import sys
import zlib
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from cleanair_core import CleanAir, ManualClock, Policy, TokenKeys, generate_key
from cleanair_core.air.observations import Observation, Station
from cleanair_core.air.pollutants import Pollutant
from cleanair_core.geo import Point
from cleanair_runtime import cli
from cleanair_runtime.cli import stations
from cleanair_runtime.cli.spool import Spool
from cleanair_runtime.cli.stations import _Progress
from cleanair_storage.sqlite import SqliteStore

CLI = Path(sys.executable).parent / "cleanair"
HEADER = "location_id,sensors_id,location,datetime,lat,lon,parameter,units,value"


def row(
    location: int, hour: int, value: float, parameter: str = "pm25", units: str = "ug/m3"
) -> str:
    """A row of `location` at 60.1+location/1000, 24.9 for hour `hour` of 2024-01-01 (+02:00)."""
    when = datetime(2024, 1, 1, tzinfo=UTC) + timedelta(hours=hour)
    return (
        f"{location},{location * 10},Station {location},"
        f"{when.astimezone(timezone(timedelta(hours=2))).isoformat()},"
        f"{60.1 + location / 1000},24.9,{parameter},{units},{value}"
    )


def archive(tmp_path: Path, name: str, *lines: str, packed: bool = True) -> Path:
    text = "\n".join([HEADER, *lines]) + "\n"
    path = tmp_path / name
    if packed:
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text, encoding="utf-8")
    return path


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    status = cli.main(argv)
    out, err = capsys.readouterr()
    return status, out, err


def stored(database: Path) -> list[tuple[str, int]]:
    store = SqliteStore(database)
    try:
        return [(s.station.id, s.observations) for s in store.station_summaries()]
    finally:
        store.close()


def test_import_then_list(
    database: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    day = archive(
        tmp_path,
        "location-1-20240101.csv.gz",
        row(1, 0, 5.5),
        row(1, 1, 6.5),
        row(1, 1, 20, "no2", "ppb"),
        row(1, 2, 1, "co", "ppm"),
        row(2, 0, -999),
        row(2, 1, 7.0).replace("ug/m3", "furlongs"),
    )
    locations = tmp_path / "locations.csv"
    locations.write_text(
        "location_id,location,lat,lon,station_type,area_type\n"
        "1,Kallio 2,60.101,24.9,traffic,urban\n"
    )
    status, out, err = run(["stations", "import", str(day), "--locations", str(locations)], capsys)
    assert status == 0, err
    assert out == (
        "imported 1 stations; observations: 3 added, 0 replaced, 0 unchanged; "
        "held back 0 (over the pollutant's upper bound: 0, hour in the future: 0); "
        "rows: 6 read, 2 rejected, 1 ignored\n"
    )
    assert "cleanair: rejected 1 rows: negative value\n" in err
    assert "cleanair: rejected 1 rows: unknown unit\n" in err
    assert "cleanair: ignored 1 rows: parameter not stored\n" in err
    assert f"cleanair: {day}, line 6: negative value\n" in err
    assert "furlongs" not in err
    assert "-999" not in err

    status, out, _ = run(["stations", "list"], capsys)
    assert status == 0
    assert out.splitlines() == [
        "id\tname\tlat\tlon\ttype\tarea\tobservations\tfirst hour end\tlast hour end",
        "openaq:1\tKallio 2\t60.10100\t24.90000\ttraffic\turban\t3\t"
        "2024-01-01T00:00:00+00:00\t2024-01-01T01:00:00+00:00",
    ]
    status, out, _ = run(["stations", "list", "--json"], capsys)
    assert json.loads(out) == [
        {
            "id": "openaq:1",
            "name": "Kallio 2",
            "lat": 60.101,
            "lon": 24.9,
            "station_type": "traffic",
            "area_type": "urban",
            "observations": 3,
            "first_hour_end": "2024-01-01T00:00:00+00:00",
            "last_hour_end": "2024-01-01T01:00:00+00:00",
        }
    ]


def test_list_orders_station_ids_by_their_numbers(
    database: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Stored and read back in text order (openaq:1, openaq:10, openaq:100, openaq:2), the
    ids are listed as an operator counts."""
    day = archive(tmp_path, "a.csv", *(row(n, 0, 1.0) for n in (10, 2, 100, 1, 11)), packed=False)
    assert run(["stations", "import", str(day)], capsys)[0] == 0
    expected = ["openaq:1", "openaq:2", "openaq:10", "openaq:11", "openaq:100"]
    status, out, _ = run(["stations", "list"], capsys)
    assert status == 0
    assert [line.split("\t")[0] for line in out.splitlines()[1:]] == expected
    status, out, _ = run(["stations", "list", "--json"], capsys)
    assert [s["id"] for s in json.loads(out)] == expected


def test_importing_again_changes_nothing(
    database: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    day = archive(tmp_path, "a.csv", row(1, 0, 5.5), row(2, 0, 6.5), packed=False)
    assert run(["stations", "import", str(day)], capsys)[0] == 0
    status, out, _ = run(["stations", "import", str(day)], capsys)
    assert status == 0
    assert "observations: 0 added, 0 replaced, 2 unchanged" in out
    changed = archive(tmp_path, "b.csv", row(1, 0, 9.5))
    assert (
        "observations: 0 added, 1 replaced, 0 unchanged"
        in run(["stations", "import", str(changed)], capsys)[1]
    )
    assert stored(database) == [("openaq:1", 1), ("openaq:2", 1)]


def test_a_file_without_a_valid_row_fails_but_the_others_are_imported(
    database: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = archive(tmp_path, "good.csv.gz", row(1, 0, 5.5))
    bad = archive(tmp_path, "bad.csv.gz", row(2, 0, -1), row(2, 1, -2))
    header_only = archive(tmp_path, "empty.csv.gz")
    status, out, err = run(["stations", "import", str(good), str(bad), str(header_only)], capsys)
    assert status == 1
    assert "1 added" in out
    assert f"cleanair: {bad} has no valid row\n" in err
    assert f"cleanair: {header_only} has no valid row\n" in err
    assert "cleanair: rejected 2 rows: negative value\n" in err
    assert stored(database) == [("openaq:1", 1)]


@pytest.mark.parametrize(
    "problem",
    ["missing", "truncated", "no header", "locations missing", "device", "overlong line"],
)
def test_a_file_that_cannot_be_read_imports_nothing(
    database: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], problem: str
) -> None:
    good = archive(tmp_path, "good.csv.gz", row(1, 0, 5.5))
    argv = ["stations", "import", str(good)]
    if problem == "missing":
        argv.append(str(tmp_path / "nope.csv.gz"))
        message = f"no such file: {tmp_path / 'nope.csv.gz'}"
    elif problem == "truncated":
        whole = gzip.compress(
            ("\n".join([HEADER, *(row(3, h, 1.0) for h in range(3000))])).encode()
        )
        cut = tmp_path / "cut.csv.gz"
        cut.write_bytes(whole[: len(whole) - 100])
        argv.append(str(cut))
        message = f"{cut}: the gzip data is truncated or corrupt"
    elif problem == "no header":
        headless = tmp_path / "headless.csv"
        headless.write_text(row(4, 0, 1.0) + "\n")
        argv.append(str(headless))
        message = f"{headless} is not an OpenAQ archive file"
    elif problem == "device":  # passes a readability check, and never ends
        argv.append("/dev/zero")
        message = "/dev/zero is not a regular file"
    elif problem == "overlong line":
        long = archive(tmp_path, "long.csv.gz", row(2, 0, 1.0), "7" * 100_000, row(2, 1, 1.0))
        argv.append(str(long))
        message = f"{long}, line 3: longer than 4,096 characters"
    else:
        argv += ["--locations", str(tmp_path / "locations.csv")]
        message = "no such file"
    status, out, err = run(argv, capsys)
    assert (status, out) == (2, "")
    assert message in err
    assert "nothing was imported" in err
    assert stored(database) == []


def _import_peak(path: Path, database: Path) -> tuple[int, str, int]:
    """The installed command's exit status, stderr and peak resident memory (kB) importing
    `path`. The peak counts what the test process held when it started the command (Linux
    keeps the high-water mark across fork and exec), so only a difference of two peaks
    measures the import."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLEANAIR_")}
    env["CLEANAIR_DATABASE"] = str(database)
    with (path.parent / "err").open("w+") as err:
        child = subprocess.Popen(
            [str(CLI), "stations", "import", str(path)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
        _, status, usage = os.wait4(child.pid, 0)  # this child's own peak, not all children's
        err.seek(0)
        return os.waitstatus_to_exitcode(status), err.read(), usage.ru_maxrss


def test_a_single_line_of_200_mb_is_refused_in_bounded_memory(tmp_path: Path) -> None:
    """A 200 KB gzip holding one 200 MB line: the installed command names the line and
    stops, its peak memory the same as a small file's, not the line's."""
    packer = zlib.compressobj(wbits=31)  # gzip, written a MB at a time
    chunks = [packer.compress((HEADER + "\n").encode())]
    chunks += [packer.compress(b"9" * (1 << 20)) for _ in range(200)]
    big = tmp_path / "big" / "one-line.csv.gz"
    big.parent.mkdir()
    big.write_bytes(b"".join([*chunks, packer.compress(b"\n"), packer.flush()]))
    small = tmp_path / "small" / "short-line.csv.gz"
    small.parent.mkdir()
    small.write_bytes(gzip.compress((HEADER + "\n" + "9" * 100 + "\n").encode()))

    _, _, small_peak = _import_peak(small, tmp_path / "var" / "small.db")
    status, message, big_peak = _import_peak(big, tmp_path / "var" / "big.db")
    assert status == 2, message
    assert f"{big}, line 2: longer than 4,096 characters" in message
    assert "nothing was imported" in message
    assert big_peak - small_peak < 100 * 1024  # kB: the line alone is 200 MB as text


def test_a_value_overflowing_on_conversion_is_refused_and_the_rest_imported(
    database: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    day = archive(
        tmp_path,
        "a.csv.gz",
        row(1, 0, 5.5),
        row(1, 0, 1e306, "no2", "ppm"),  # finite in ppm, infinite in µg/m³
        row(1, 1, float("nan")),
        row(1, 1, 20, "no2", "ppb"),
    )
    status, out, err = run(["stations", "import", str(day)], capsys)
    assert status == 0, err
    assert "2 added" in out
    assert "rows: 4 read, 2 rejected" in out
    assert "cleanair: rejected 1 rows: value too large once converted to µg/m³\n" in err
    assert "cleanair: rejected 1 rows: bad number\n" in err
    assert stored(database) == [("openaq:1", 2)]


def test_a_failure_while_writing_leaves_the_database_as_it_was(database: Path) -> None:
    store = SqliteStore(database)
    try:
        core = CleanAir(store, TokenKeys(generate_key()), Policy(), ManualClock())
        kallio = Station("openaq:1", "Kallio", Point(60.1, 24.9))
        hour = datetime(2024, 1, 1, tzinfo=UTC)

        def failing() -> Iterator[Station | Observation]:
            yield kallio
            for h in range(50):
                yield Observation(kallio.id, Pollutant.PM25, hour + timedelta(hours=h), 1.0)
            raise OSError("the disk went away")

        version = store.observations_version()
        with pytest.raises(OSError, match="disk"):
            core.import_observations(failing(), chunk_size=10)
        assert store.list_stations() == []
        assert store.observations_version() == version
    finally:
        store.close()


def test_progress_goes_to_stderr(
    database: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(stations, "PROGRESS_EVERY_ROWS", 1_000)
    monkeypatch.setattr(stations, "IMPORT_BATCH_SIZE", 1_000)
    day = archive(tmp_path, "big.csv.gz", *(row(1 + h % 5, h // 5, 1.0) for h in range(2_500)))
    status, out, err = run(["stations", "import", str(day)], capsys)
    assert status == 0
    assert "2500 added" in out
    assert "cleanair: 1000 rows read, 1000 accepted, 0 rejected\n" in err
    assert "cleanair: 2000 rows read, 2000 accepted, 0 rejected\n" in err
    assert "cleanair: 2000 of 2500 observations written\n" in err


def test_progress_is_due_every_n_rows_or_every_second() -> None:
    now = [0.0]
    progress = _Progress(every_rows=100, every_seconds=1.0, clock=lambda: now[0])
    assert [progress.due(rows) for rows in (50, 99, 100, 150, 199, 230)] == [
        False,
        False,
        True,
        False,
        False,
        True,
    ]
    now[0] = 0.5
    assert not progress.due(250)
    now[0] = 1.5  # slow rows: a second since the last line
    assert progress.due(260)
    assert not progress.due(270)


def test_the_spool_gives_back_what_it_was_given_in_order() -> None:
    with Spool[int]() as spool:
        spool.extend(range(5_000))
        assert list(spool) == list(range(5_000))
        assert list(spool) == list(range(5_000))  # read again from the start
        assert spool.count == 5_000


def test_prune_applies_the_retention(
    database: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # 2024-01-01 is over 400 days before any day these tests run on.
    day = archive(tmp_path, "a.csv.gz", row(1, 0, 5.5), row(1, 1, 6.5))
    assert run(["stations", "import", str(day)], capsys)[0] == 0
    monkeypatch.setenv("CLEANAIR_OBSERVATION_RETENTION_DAYS", "0")
    assert run(["stations", "prune"], capsys)[:2] == (
        0,
        "deleted 0 observations (CLEANAIR_OBSERVATION_RETENTION_DAYS is 0: kept for ever)\n",
    )
    assert stored(database) == [("openaq:1", 2)]
    monkeypatch.setenv("CLEANAIR_OBSERVATION_RETENTION_DAYS", "400")
    assert run(["stations", "prune"], capsys)[:2] == (
        0,
        "deleted 2 observations older than 400 days\n",
    )
    assert stored(database) == [("openaq:1", 0)]  # the station stays


def test_the_installed_command_imports_lists_and_prunes(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLEANAIR_")}
    env["CLEANAIR_DATABASE"] = str(tmp_path / "var" / "cleanair.db")
    day = archive(tmp_path, "day.csv.gz", row(7, 0, 5.5), row(7, 0, 22, "o3", "ppb"))

    def cleanair(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(CLI), *argv], env=env, capture_output=True, text=True, timeout=60, check=False
        )

    done = cleanair("stations", "import", str(day))
    assert done.returncode == 0, done.stderr
    assert "creating a new database" in done.stderr
    assert "2 added" in done.stdout
    listed = json.loads(cleanair("stations", "list", "--json").stdout)
    assert [(s["id"], s["observations"]) for s in listed] == [("openaq:7", 2)]
    missing = cleanair("stations", "import", str(tmp_path / "nope.csv"))
    assert missing.returncode == 2
    assert "no such file" in missing.stderr
    assert "Traceback" not in missing.stderr
    pruned = cleanair("stations", "prune")
    assert (pruned.returncode, pruned.stdout) == (0, "deleted 2 observations older than 400 days\n")


def test_the_database_is_not_locked_while_the_files_are_read(
    database: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Another process's writes go on while an import reads its files: only its final
    writing holds the write lock."""
    from cleanair_sources import openaq_archive

    read_archive = openaq_archive.read_archive
    written_meanwhile: list[int] = []

    def reading(paths: list[Path], parser: openaq_archive.ArchiveParser) -> Iterator[object]:
        other = SqliteStore(database)  # as a server sharing the file would
        try:
            written_meanwhile.append(other.put_stations([Station("other:1", "O", Point(1, 2))]))
        finally:
            other.close()
        yield from read_archive(paths, parser)

    monkeypatch.setattr(openaq_archive, "read_archive", reading)
    day = archive(tmp_path, "a.csv.gz", row(1, 0, 5.5))
    assert run(["stations", "import", str(day)], capsys)[0] == 0
    assert written_meanwhile == [1]
    assert stored(database) == [("openaq:1", 1), ("other:1", 0)]


# -- stations evaluate


def test_evaluate_reports_each_method_against_the_stations(
    database: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Three stations a kilometre apart for two days (hours 0-47 of 2024-01-01 UTC), and NO2
    # that every station sees rise and fall together.
    lines = [
        row(location, hour, 30.0 + 10.0 * math.sin(hour / 4.0) + location, "no2")
        for location in (1, 2, 3)
        for hour in range(48)
    ]
    status, _, err = run(["stations", "import", str(archive(tmp_path, "a.csv.gz", *lines))], capsys)
    assert status == 0, err
    status, out, err = run(["stations", "evaluate", "--json"], capsys)
    assert status == 0, err
    [no2] = json.loads(out)
    assert (no2["pollutant"], no2["stations"], no2["hours"], no2["observations"]) == (
        "no2",
        3,
        48,
        144,
    )
    rmse = {row["method"]: row["rmse"] for row in no2["rows"] if row["group"] == "all"}
    assert set(rmse) == {"background", "fused", "idw"}
    assert rmse["fused"] < 0.5 * rmse["background"]  # the stations know better than the model
    coverage = {row["method"]: row["coverage"] for row in no2["rows"] if row["group"] == "all"}
    assert coverage["idw"] is None  # inverse distance gives no interval
    assert 0.0 <= coverage["fused"] <= 1.0
    assert 0.0 <= coverage["background"] <= 1.0
    # Each day is fitted in turn (from the week ending with it), said on stderr: the hours
    # ending 00:00-23:00 of 2024-01-01 start on three UTC days.
    assert "no2: fitting day 1 of 3" in err
    assert "no2: fitting day 3 of 3" in err
    status, out, _ = run(
        ["stations", "evaluate", "--pollutant", "no2", "--until", "2024-01-01T12:00:00Z"], capsys
    )
    assert status == 0
    assert "no2: 3 stations, 13 hours, 39 observations" in out
    assert "90% interval coverage" in out
    assert "fused RMSE:" in out


def test_evaluate_with_nothing_stored_or_bad_arguments(
    database: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, _, err = run(["stations", "evaluate"], capsys)
    assert status == 1
    assert "no stored observations" in err
    for bad in (["--pollutant", "so2"], ["--since", "2024-13-01"], ["--until", "soon"]):
        with pytest.raises(SystemExit) as exited:
            cli.main(["stations", "evaluate", *bad])
        assert exited.value.code == 2
        assert bad[1] not in capsys.readouterr().err  # the value is never echoed


def test_evaluate_takes_a_date_or_a_time_without_offset_as_utc(
    database: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = [
        row(location, hour, 30.0 + 10.0 * math.sin(hour / 4.0) + location, "no2")
        for location in (1, 2, 3)
        for hour in range(48)  # hours ending 2024-01-01T00:00Z to 2024-01-02T23:00Z
    ]
    assert run(["stations", "import", str(archive(tmp_path, "a.csv.gz", *lines))], capsys)[0] == 0
    for window, hours in [
        (["--since", "2024-01-02"], 24),  # the date's midnight, UTC
        (["--since", "2024-01-02T06:00"], 18),
        (["--until", "2024-01-01T12:00"], 13),
        (["--until", "2024-01-01T14:00+02:00"], 13),  # an offset still counts
    ]:
        status, out, err = run(["stations", "evaluate", "--json", *window], capsys)
        assert status == 0, (window, err)
        assert json.loads(out)[0]["hours"] == hours, window


def test_evaluate_outside_the_stored_hours_names_the_window_and_what_is_stored(
    database: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    day = archive(tmp_path, "a.csv.gz", row(1, 0, 5.5), row(2, 5, 6.5))
    assert run(["stations", "import", str(day)], capsys)[0] == 0
    stored_span = "the stored observations (every pollutant) end from 2024-01-01T00:00:00+00:00 "
    stored_span += "to 2024-01-01T05:00:00+00:00\n"
    for argv, asked in [
        (
            ["--since", "2016-06-01", "--until", "2016-07-01"],
            "observations whose hour ends from 2016-06-01T00:00:00+00:00 to "
            "2016-07-01T00:00:00+00:00",
        ),
        (
            ["--since", "2025-01-01"],
            "observations whose hour ends at 2025-01-01T00:00:00+00:00 or later",
        ),
        (
            ["--until", "2023-12-31T23:00Z"],
            "observations whose hour ends at 2023-12-31T23:00:00+00:00 or earlier",
        ),
        (["--pollutant", "o3"], "o3 observations"),
    ]:
        status, out, err = run(["stations", "evaluate", *argv], capsys)
        assert (status, out) == (1, ""), argv
        assert err.endswith(f"cleanair: no stored {asked} to evaluate; {stored_span}"), err


# -- screening, the retention and replaying


def row_at(location: int, hour_end: datetime, value: float, parameter: str = "pm25") -> str:
    """A row of `location` (at 60.1+location/1000, 24.9) for the hour ending `hour_end`."""
    return (
        f"{location},{location * 10},Station {location},{hour_end.isoformat()},"
        f"{60.1 + location / 1000},24.9,{parameter},µg/m³,{value}"
    )


def full_hour() -> datetime:
    return datetime.now(UTC).replace(minute=0, second=0, microsecond=0)


def test_values_over_their_bound_and_hours_ahead_are_held_back_not_stored(
    database: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One PM2.5 of 1e300 at a Helsinki station, once stored and fused for thousands of km,
    and a row dated two hours ahead, once served as a measurement: counted, not stored, and
    the rest imported with exit 0."""
    hour = full_hour() - timedelta(hours=1)
    day = archive(
        tmp_path,
        "a.csv",
        row_at(1, hour, 1e300),
        row_at(1, hour + timedelta(hours=3), 12.0, "no2"),
        row_at(2, hour, 8.5),
        packed=False,
    )
    status, out, err = run(["stations", "import", str(day)], capsys)
    assert status == 0, err
    assert out == (
        "imported 2 stations; observations: 1 added, 0 replaced, 0 unchanged; "
        "held back 2 (over the pollutant's upper bound: 1, hour in the future: 1); "
        "rows: 3 read, 0 rejected, 0 ignored\n"
    )
    assert "cleanair: held back 1 observations over their pollutant's upper bound" in err
    assert "cleanair: held back 1 observations whose hour ends after now" in err
    assert "1e+300" not in err + out
    assert "e300" not in err + out
    assert stored(database) == [("openaq:1", 0), ("openaq:2", 1)]


def test_rows_older_than_the_retention_are_told_of_before_anything_is_written(
    database: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    told_before_writing: list[str] = []
    importing = CleanAir.import_observations

    def watched(self: CleanAir, *args: object, **kwargs: object) -> object:
        told_before_writing.append(capsys.readouterr().err)
        return importing(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(CleanAir, "import_observations", watched)
    recent = row_at(1, full_hour() - timedelta(hours=2), 5.0)
    # 2024-01-01 is over 400 days before any day these tests run on.
    day = archive(tmp_path, "a.csv.gz", row(1, 0, 5.5), row(1, 1, 6.5), recent)
    before = datetime.now(UTC)
    status, out, _ = run(["stations", "import", str(day)], capsys)
    after = datetime.now(UTC)
    assert status == 0
    assert "3 added" in out  # imported all the same, as the message says
    [warned] = told_before_writing
    oldest = datetime(2024, 1, 1, tzinfo=UTC)
    keep = {math.ceil((at - oldest) / timedelta(days=1)) for at in (before, after)}
    assert any(
        warned
        == (
            "cleanair: 2 observations end more than 400 days ago, the retention "
            "(CLEANAIR_OBSERVATION_RETENTION_DAYS): they are imported now and deleted by the "
            "next prune (an API process's start or hourly upkeep, or `cleanair stations "
            "prune`); to keep them, set CLEANAIR_OBSERVATION_RETENTION_DAYS to 0 (for ever) "
            f"or to at least {days} days, for this command and the servers (or move them to "
            "the present with --replay)\n"
        )
        for days in keep
    ), warned
    assert stored(database) == [("openaq:1", 3)]

    monkeypatch.setenv("CLEANAIR_OBSERVATION_RETENTION_DAYS", "0")  # kept for ever: no word
    told_before_writing.clear()
    assert run(["stations", "import", str(day)], capsys)[0] == 0
    assert told_before_writing == [""]


def test_replay_moves_a_past_sample_by_whole_days_to_the_last_full_hour(
    database: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two days of 2016 at two stations, given in local time (+08:00), as the shipped
    Beijing sample is: the latest lands at the last full hour or less than a day before it,
    each value on its own hour of the day."""
    beijing = timezone(timedelta(hours=8))
    start = datetime(2016, 12, 30, 1, tzinfo=beijing)
    rows = [
        row_at(station, (start + timedelta(hours=h)).astimezone(beijing), 10.0 + h)
        for station in (1, 2)
        for h in range(47)
    ]
    latest = (start + timedelta(hours=46)).astimezone(UTC)
    day = archive(tmp_path, "beijing.csv.gz", *rows)
    before = full_hour()
    status, out, err = run(["stations", "import", str(day), "--replay"], capsys)
    after = full_hour()
    assert status == 0, err
    assert "94 added" in out
    assert "cleanair: replaying: every row's hour moved by " in err
    store = SqliteStore(database)
    try:
        summaries = store.station_summaries()
        stored_hours = store.observations_between(latest, after + timedelta(days=1))
    finally:
        store.close()
    last = {s.last_hour_end for s in summaries}
    assert len(last) == 1
    [landed] = last
    assert landed is not None
    # Whichever hour the clock was in while the command ran.
    assert any(timedelta(0) <= full - landed < timedelta(days=1) for full in (before, after))
    assert (landed - latest) % timedelta(days=1) == timedelta(0)
    assert landed.astimezone(beijing).hour == latest.astimezone(beijing).hour
    assert len(stored_hours) == 94  # every row moved together, none left where it was
    values = {o.hour_end: o.value for o in stored_hours if o.station_id == "openaq:1"}
    assert values[landed] == 10.0 + 46  # each value moved with its hour


def test_a_row_dated_ahead_does_not_set_the_replays_shift(
    database: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One broken row dated years ahead among a past sample: the sample still lands at the
    last full hour (the shift comes from what the screening keeps), the broken row is held
    back."""
    start = datetime(2016, 6, 1, tzinfo=UTC)
    rows = [row_at(1, start + timedelta(hours=h), 10.0 + h) for h in range(30)]
    rows.append(row_at(1, datetime(2099, 1, 1, tzinfo=UTC), 12.0))
    before = full_hour()
    status, out, err = run(
        ["stations", "import", str(archive(tmp_path, "b.csv.gz", *rows)), "--replay"], capsys
    )
    after = full_hour()
    assert status == 0, err
    assert "30 added" in out
    assert "hour in the future: 1" in out
    store = SqliteStore(database)
    try:
        [summary] = store.station_summaries()
    finally:
        store.close()
    landed = summary.last_hour_end
    assert landed is not None
    assert any(timedelta(0) <= full - landed < timedelta(days=1) for full in (before, after))


def test_replay_leaves_out_what_stays_older_than_the_retention_and_says_so_first(
    database: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("CLEANAIR_OBSERVATION_RETENTION_DAYS", "2")
    start = datetime(2016, 3, 1, tzinfo=UTC)
    day = archive(
        tmp_path, "a.csv", *(row_at(1, start + timedelta(hours=h), 1.0) for h in range(97))
    )
    before = datetime.now(UTC)
    status, out, err = run(["stations", "import", str(day), "--replay"], capsys)
    after = datetime.now(UTC)
    assert status == 0, err
    [line] = [x for x in err.splitlines() if "retention" in x]
    assert line.startswith("cleanair: ")
    left_out = int(line.split()[1])
    assert line.endswith(
        "end more than 2 days ago, the retention (CLEANAIR_OBSERVATION_RETENTION_DAYS): they "
        "are left out of this replay; to keep them, set CLEANAIR_OBSERVATION_RETENTION_DAYS "
        f"to 0 (for ever) or to at least {line.split('at least ')[1].split()[0]} days, for "
        "this command and the servers"
    )
    assert err.index("replaying") < err.index("retention")
    store = SqliteStore(database)
    try:
        kept = store.observations_between(before - timedelta(days=10), after)
    finally:
        store.close()
    # What is kept ends within the retention; the hour before the first kept does not.
    assert len(kept) == 97 - left_out
    assert 0 < left_out < 97
    first = min(o.hour_end for o in kept)
    assert first >= before - timedelta(days=2)
    assert first - timedelta(hours=1) < after - timedelta(days=2)
    assert f"{97 - left_out} added" in out


def test_import_help_shows_replay(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["stations", "import", "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    assert "--replay" in shown
    assert "latest hour in the files ends at the last full hour" in shown

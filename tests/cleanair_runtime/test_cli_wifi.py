"""`cleanair wifi import`, called in process over a SQLite file in a temporary directory."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path

import pytest

from cleanair_core.air.wifi import WifiAccessPoint
from cleanair_core.air.wifi_location import LocalWifiGeolocator
from cleanair_core.geo import Point, distance_m
from cleanair_runtime import cli
from cleanair_runtime.cli import wifi
from cleanair_runtime.composition.bootstrap import open_deployment
from cleanair_runtime.composition.settings import Settings

A, B, C = "a4:2b:b0:11:22:01", "a4:2b:b0:11:22:02", "a4:2b:b0:11:22:03"
WEST, EAST = Point(52.52, 13.40), Point(52.52, 13.4029)  # about 200 m apart


def write(tmp_path: Path, text: str, name: str = "aps.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def locate(scan: list[WifiAccessPoint]) -> Point | None:
    """Locate through a store and key built exactly as the service builds them."""
    deployment = open_deployment(Settings.from_env())
    core = deployment.core
    try:
        return asyncio.run(LocalWifiGeolocator(core.store, core.keys).locate(scan))
    finally:
        deployment.close()


def test_import_then_locate_between_the_imported_access_points(
    database: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    csv = write(
        tmp_path,
        "bssid,lat,lon,accuracy_m\n"
        f"{A},{WEST.lat},{WEST.lon},20\n"
        f"{B.upper().replace(':', '-')},{EAST.lat},{EAST.lon},\n"
        "02:00:00:00:00:01,52.5,13.4,10\n"
        f"{C},52.5,500,10\n",
    )
    assert cli.main(["wifi", "import", str(csv)]) == 0

    out, err = capsys.readouterr()
    assert out == "imported 2 access points, skipped 2 rows\n"
    assert "line 4: not a fixed access point" in err
    assert "line 5: invalid coordinates" in err
    for mac in (A, B, C, "02:00:00:00:00:01", "a42bb0112203"):
        assert mac not in out + err

    point = locate([WifiAccessPoint(A, -60), WifiAccessPoint(B, -60), WifiAccessPoint(C, -40)])
    assert point is not None
    midpoint = Point(WEST.lat, (WEST.lon + EAST.lon) / 2)
    assert distance_m(point, midpoint) < 1
    # One imported access point alone locates nobody.
    assert locate([WifiAccessPoint(A, -60), WifiAccessPoint(C, -40)]) is None


def test_the_import_hashes_with_the_service_key(
    database: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    csv = write(tmp_path, f"bssid,lat,lon\n{A},{WEST.lat},{WEST.lon}\n{B},{EAST.lat},{EAST.lon}\n")
    monkeypatch.setenv("CLEANAIR_SECRET_KEY", "k" * 40)
    assert cli.main(["wifi", "import", str(csv)]) == 0
    scan = [WifiAccessPoint(A, -60), WifiAccessPoint(B, -60)]
    assert locate(scan) is not None
    monkeypatch.setenv("CLEANAIR_SECRET_KEY", "another-key-" + "x" * 30)
    assert locate(scan) is None


def test_progress_and_batches_for_a_large_file(
    database: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(wifi, "IMPORT_BATCH_SIZE", 100)
    monkeypatch.setattr(wifi, "PROGRESS_EVERY_ROWS", 1_000)
    rows = [
        f"00:11:22:{i >> 16:02x}:{(i >> 8) & 255:02x}:{i & 255:02x},52.5,13.4" for i in range(2_500)
    ]
    rows[1_234] = "oops,52.5,13.4"
    csv = write(tmp_path, "\n".join(["bssid,lat,lon", *rows]) + "\n")

    assert cli.main(["wifi", "import", str(csv)]) == 0

    out, err = capsys.readouterr()
    assert out == "imported 2499 access points, skipped 1 rows\n"
    assert "cleanair: 1000 rows read, 1000 access points imported" in err
    assert "cleanair: 2000 rows read, 1900 access points imported" in err
    assert "line 1236: invalid BSSID" in err
    deployment = open_deployment(Settings.from_env())
    core = deployment.core
    try:
        assert core.store.count_access_points() == 2_499
    finally:
        deployment.close()


def test_many_bad_rows_list_the_first_few(
    database: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    csv = write(tmp_path, "bssid,lat,lon\n" + f"{A},95,0\n" * 30)
    # No valid row at all: a failure, with the reasons.
    assert cli.main(["wifi", "import", str(csv)]) == 1
    out, err = capsys.readouterr()
    assert out == "imported 0 access points, skipped 30 rows\n"
    assert err.count("invalid coordinates") == 10
    assert "... and 20 more skipped rows" in err
    assert err.endswith(f"cleanair: no valid row in {csv}\n")
    assert A not in err


def test_a_file_with_only_a_header_imports_nothing_and_fails(
    database: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    csv = write(tmp_path, "bssid,lat,lon\n")
    assert cli.main(["wifi", "import", str(csv)]) == 1
    out, err = capsys.readouterr()
    assert out == "imported 0 access points, skipped 0 rows\n"
    assert err == f"cleanair: no valid row in {csv}\n"


def test_a_missing_file_is_an_operational_error(
    database: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["wifi", "import", str(tmp_path / "nope.csv")]) == 1
    assert "no such file" in capsys.readouterr().err


def test_a_directory_is_an_operational_error(
    database: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["wifi", "import", str(tmp_path)]) == 1
    assert "is a folder, not a file" in capsys.readouterr().err


def test_a_device_is_refused_before_it_is_read(
    database: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # /dev/zero never ends: read, it grew the process until the kernel killed it.
    assert cli.main(["wifi", "import", "/dev/zero"]) == 1
    assert "/dev/zero is not a regular file" in capsys.readouterr().err


def test_an_endless_line_stops_the_import_at_its_number_without_echoing_it(
    database: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    csv = write(tmp_path, f"bssid,lat,lon\n{A},52.5,13.4\n{B}" + ",52.5" * 2_000 + "\n")
    assert cli.main(["wifi", "import", str(csv)]) == 1
    err = capsys.readouterr().err
    assert "line 3: longer than 4,096 characters" in err
    assert B not in err


def test_a_file_without_a_header_is_refused_without_echoing_it(
    database: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    csv = write(tmp_path, f"{A},52.5,13.4\n{B},52.5,13.4\n")
    assert cli.main(["wifi", "import", str(csv)]) == 1
    err = capsys.readouterr().err
    assert "header" in err
    assert A not in err


def test_a_file_that_is_not_utf8_stops_with_what_was_done(
    database: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    csv = tmp_path / "latin1.csv"
    csv.write_bytes(f"bssid,lat,lon\n{A},52.5,13.4\n".encode() + b"\xff\xfe,1,2\n")
    assert cli.main(["wifi", "import", str(csv)]) == 1
    assert "not UTF-8" in capsys.readouterr().err


def test_a_spreadsheet_byte_order_mark_is_fine(
    database: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    csv = tmp_path / "excel.csv"
    csv.write_bytes(f"\ufeffBSSID,Lat,Lon\r\n{A},52.5,13.4\r\n{B},52.5,13.401\r\n".encode())
    assert cli.main(["wifi", "import", str(csv)]) == 0
    assert capsys.readouterr().out == "imported 2 access points, skipped 0 rows\n"


@pytest.mark.parametrize("argv", [["wifi"], ["wifi", "import"], ["wifi", "export", "x.csv"]])
def test_usage_errors_exit_2(database: Path, argv: list[str]) -> None:
    with pytest.raises(SystemExit) as raised:
        cli.main(argv)
    assert raised.value.code == 2


def test_the_midpoint_helper_is_sane() -> None:
    assert math.isclose(distance_m(WEST, EAST), 196.6, abs_tol=2)

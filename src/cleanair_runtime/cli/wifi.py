"""`cleanair wifi import`: Wi-Fi access points for locating callers."""

from __future__ import annotations

import sys
from pathlib import Path

from cleanair_core.air.wifi_location import (
    IMPORT_BATCH_SIZE,
    PROGRESS_EVERY_ROWS,
    ImportReport,
)
from cleanair_core.errors import OperatorError
from cleanair_core.service import CleanAir
from cleanair_runtime.terminal import escape_nonprintable


def import_wifi(core: CleanAir, path: Path) -> int:
    """Stream `path` into the store in batches; progress and skipped rows go to stderr. Exit
    status 1 when no row was valid: a wrong file, or a wrong column, is not a success."""
    report = ImportReport()

    def progress(done: ImportReport) -> None:
        print(
            f"cleanair: {done.rows} rows read, {done.imported} access points imported",
            file=sys.stderr,
            flush=True,
        )

    from cleanair_sources.text_files import bounded_lines, check_regular

    check_regular(path)
    try:
        # utf-8-sig drops the byte-order mark spreadsheets write; newline="" is what csv wants.
        with path.open(encoding="utf-8-sig", newline="") as handle:
            core.import_access_points(
                bounded_lines(str(path), handle, "access point row"),
                report=report,
                batch_size=IMPORT_BATCH_SIZE,
                on_progress=progress,
                progress_every=PROGRESS_EVERY_ROWS,
            )
    except FileNotFoundError:
        raise OperatorError(f"no such file: {path}") from None
    except OSError as exc:
        raise OperatorError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise OperatorError(
            f"{path} is not UTF-8 text; stopped after {report.rows} rows, "
            f"{report.imported} access points were imported"
        ) from None
    print(f"imported {report.imported} access points, skipped {report.skipped} rows")
    for error in report.first_errors:  # line numbers and reasons only, never a BSSID
        print(f"cleanair: line {error.line}: {escape_nonprintable(error.reason)}", file=sys.stderr)
    if report.skipped > len(report.first_errors):
        print(
            f"cleanair: ... and {report.skipped - len(report.first_errors)} more skipped rows",
            file=sys.stderr,
        )
    if report.imported == 0:
        print(f"cleanair: no valid row in {escape_nonprintable(path)}", file=sys.stderr)
        return 1
    return 0

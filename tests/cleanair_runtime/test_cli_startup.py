"""The operator CLI's store-only commands start without the server's heavy libraries.

Litestar, httpx, NumPy and sqlite-utils take most of a second to import; a command that only
reads or writes the database needs none of them. Timing is measured by `make bench`; these
tests check the structural fact behind it, in a fresh interpreter (this one has them all).
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

#: Imported only by `serve`, `worker` and the commands that compute (network import).
HEAVY = ("litestar", "httpx", "numpy", "sqlite_utils", "uvicorn", "psycopg")

PROBE = """
import json, sys
from cleanair_runtime.cli import main
codes = [main(argv) for argv in json.loads(sys.argv[1])]
heavy = sorted(m for m in json.loads(sys.argv[2]) if m in sys.modules)
print(json.dumps({"codes": codes, "heavy": heavy}))
"""


def run_probe(database: Path, *commands: list[str]) -> dict[str, list[object]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLEANAIR_")}
    env["CLEANAIR_DATABASE"] = str(database)
    done = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(commands), json.dumps(HEAVY)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    result: dict[str, list[object]] = json.loads(done.stdout.splitlines()[-1])
    return result


@pytest.fixture
def existing_database(tmp_path: Path) -> Path:
    """A database that is already migrated, as an operator's normally is."""
    path = tmp_path / "cleanair.db"
    assert run_probe(path, ["users", "add", "alice"])["codes"] == [0]
    return path


def test_store_only_commands_import_no_heavy_library(existing_database: Path) -> None:
    result = run_probe(
        existing_database,
        ["users", "add", "bob"],
        ["users", "list"],
        ["pairing-code", "alice"],
        ["connections", "list", "alice"],
        ["partners", "add", "acme"],
        ["partners", "list"],
        ["partners", "connections", "acme"],
        ["partners", "usage", "acme"],
        ["usage", "alice"],
        ["network", "list"],
        ["stations", "list"],
        ["stations", "list", "--json"],
        ["stations", "prune"],
        ["alerts", "list"],
        ["alerts", "list", "--json", "--user", "alice", "--status", "active"],
    )
    assert result == {"codes": [0] * 15, "heavy": []}


def test_stations_import_imports_no_heavy_library(existing_database: Path) -> None:
    archive = existing_database.parent / "day.csv.gz"
    archive.write_bytes(
        gzip.compress(
            b"location_id,sensors_id,location,datetime,lat,lon,parameter,units,value\n"
            b"1,1,A,2024-01-01T01:00:00+00:00,60.1,24.9,no2,ppb,12\n"
        )
    )
    result = run_probe(existing_database, ["stations", "import", str(archive)])
    assert result == {"codes": [0], "heavy": []}


def test_help_imports_no_heavy_library(tmp_path: Path) -> None:
    probe = "import sys\nfrom cleanair_runtime.cli import build_parser\nbuild_parser()\n" + (
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == "[]"


def test_the_server_starts_without_scipy() -> None:
    """SciPy took seconds of every `cleanair serve` start (`make bench` measures the
    start-up): the street-level fields are convolved with NumPy's FFT, and the router imports
    SciPy at its first search."""
    probe = (
        "import sys\nimport cleanair_runtime.processes.server, cleanair_http.app\n"
        "import cleanair_runtime.composition.bootstrap\n"
        "import cleanair_sources.street_increments, cleanair_sources.street_router\n"
        "import cleanair_sources.embedded_model, cleanair_sources.gazetteer\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'scipy'))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == "[]"

"""A database a newer release has migrated stops every `cleanair` command with one clear line
on stderr and exit status 2 (a setting to fix: run that release), never a traceback; on
SQLite and PostgreSQL alike. The CLI runs in process, as in test_cli_output.py, and once as
the installed command to see exactly what reaches the terminal."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from cleanair_runtime import cli
from cleanair_storage.postgres import PostgresStore
from cleanair_storage.postgres.migrations import latest_version
from support.sqlite_files import migrated_by_a_newer_release

#: Every command: each opens the database first, and must stop there. `serve` on any free
#: port: its default, 8000, is where the developer's own `make run` listens, and a busy port
#: would end it (exit 1) before the database was ever opened.
COMMANDS = [
    ["serve", "--port", "0"],
    ["serve", "--port", "0", "--workers", "2"],
    ["worker"],
    ["users", "add", "alice"],
    ["users", "list"],
    ["users", "set-premium", "alice", "off"],
    ["pairing-code", "alice"],
    ["connections", "list", "alice"],
    ["connections", "revoke", "00000000-0000-4000-8000-000000000001"],
    ["partners", "add", "acme"],
    ["partners", "issue-token", "acme", "--name", "n", "--scope", "aq:read"],
    ["partners", "deactivate", "acme"],
    ["partners", "list"],
    ["partners", "connections", "acme"],
    ["partners", "revoke", "acme", "00000000-0000-4000-8000-000000000001"],
    ["partners", "usage", "acme"],
    ["clients", "add", "my-app"],
    ["usage", "alice"],
    ["wifi", "import", "points.csv"],
    ["network", "import", "city.osm.pbf"],
    ["network", "list"],
    ["network", "delete", "helsinki"],
]
KEY = "ab" * 32


@pytest.fixture(params=["sqlite", "postgres"])
def too_new(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """CLEANAIR_DATABASE names a database migrated by a release newer than this one."""
    monkeypatch.setenv("CLEANAIR_SECRET_KEY", KEY)
    monkeypatch.delenv("CLEANAIR_SECRET_KEY_FILE", raising=False)
    monkeypatch.setenv("CLEANAIR_DEFAULT_NETWORK", "false")
    # `serve --workers` in this test process, where earlier tests imported prometheus_client:
    # its figures could not be shared across the forks (the real command imports it later).
    monkeypatch.setenv("CLEANAIR_METRICS", "off")
    if request.param == "sqlite":
        path = tmp_path / "cleanair.db"
        migrated_by_a_newer_release(path)
        database = str(path)
    else:
        database = request.getfixturevalue("postgres_url")
        PostgresStore(database).close()
        with psycopg.connect(database) as pg:
            pg.execute(
                "INSERT INTO schema_migrations (version, name) VALUES (%s, 'from the future')",
                (latest_version() + 1,),
            )
    monkeypatch.setenv("CLEANAIR_DATABASE", database)
    kind: str = request.param
    return kind


def assert_one_clear_line(err: str) -> None:
    assert err.startswith("cleanair: "), err
    assert err.count("\n") == 1, err
    assert "newer" in err
    assert "Traceback" not in err


def never_runs(*args: object, **kwargs: object) -> None:
    raise AssertionError("started on a database newer than the code")


@pytest.mark.parametrize("argv", COMMANDS, ids=" ".join)
def test_every_command_refuses_a_database_newer_than_the_code(
    too_new: str,
    argv: list[str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Were the database accepted, `serve` and `worker` would run until stopped.
    monkeypatch.setattr("uvicorn.Server.run", never_runs)
    monkeypatch.setattr("cleanair_runtime.processes.worker.anyio.run", never_runs)
    assert cli.main(argv) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert_one_clear_line(err)


def test_the_installed_command_prints_no_traceback(too_new: str) -> None:
    cleanair = Path(sys.executable).with_name("cleanair")
    done = subprocess.run(
        [str(cleanair), "serve", "--port", "0"],
        capture_output=True,
        text=True,
        timeout=60,
        env=os.environ.copy(),
        check=False,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert_one_clear_line(done.stderr)

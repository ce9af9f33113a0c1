"""`cleanair ... | head`: a reader that stops early ends the command quietly, with 141.

The installed command runs in its own process, its stdout a pipe this test closes: before
the command starts (what `network list | head -1` meets when head is quicker than the
command's one write at exit) and after a few bytes of an output longer than any pipe's
buffer (`stations list --json | head -c 300`). Neither depends on timing.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cleanair_runtime import cli
from cleanair_runtime.terminal import CLOSED_PIPE_STATUS, quiet_on_closed_pipe

CLI = Path(sys.executable).parent / "cleanair"
HEADER = "location_id,sensors_id,location,datetime,lat,lon,parameter,units,value"
#: Stations whose `stations list --json` is some 1.4 MB: past a pipe's largest buffer (1 MB
#: unless an administrator raised /proc/sys/fs/pipe-max-size), so writing it must fail.
STATIONS = 6_000


@pytest.fixture
def many_stations(database: Path, tmp_path: Path) -> Path:
    lines = [
        f"{n},{n},Station {n},2024-01-01T01:00:00+00:00,{n / 1000 % 80:.4f},24.9,pm25,ug/m3,5"
        for n in range(1, STATIONS + 1)
    ]
    day = tmp_path / "day.csv.gz"
    day.write_bytes(gzip.compress("\n".join([HEADER, *lines, ""]).encode()))
    assert cli.main(["stations", "import", str(day)]) == 0
    return database


def closed_before_start(*argv: str) -> subprocess.CompletedProcess[str]:
    read_end, write_end = os.pipe()
    os.close(read_end)  # every write to write_end now fails with EPIPE
    try:
        return subprocess.run(
            [str(CLI), *argv],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        os.close(write_end)


@pytest.mark.parametrize(
    "argv",
    [
        ["--version"],
        ["--help"],
        ["stations", "evaluate", "--help"],
        ["users", "list"],
        ["network", "list"],
        ["stations", "list"],
        ["stations", "list", "--json"],
        ["usage", "alice"],
    ],
)
def test_a_pipe_closed_before_the_command_writes_ends_it_quietly(
    database: Path, argv: list[str]
) -> None:
    assert cli.main(["users", "add", "alice"]) == 0
    done = closed_before_start(*argv)
    assert (done.returncode, done.stderr) == (CLOSED_PIPE_STATUS, "")


def test_a_pipe_closed_mid_output_ends_the_command_quietly(many_stations: Path) -> None:
    child = subprocess.Popen(
        [str(CLI), "stations", "list", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert child.stdout is not None
    assert child.stderr is not None
    start = child.stdout.read(300)
    child.stdout.close()  # as `head -c 300` exits
    err = child.stderr.read()
    assert child.wait(timeout=120) == CLOSED_PIPE_STATUS
    assert err == b""
    assert start.startswith(b'[{"id": "openaq:1", ')  # it was writing the list


def test_read_to_the_end_the_same_output_is_whole(many_stations: Path) -> None:
    done = subprocess.run(
        [str(CLI), "stations", "list", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, "")
    listed = json.loads(done.stdout)
    assert len(listed) == STATIONS
    assert len(done.stdout) > 1_100_000  # longer than any pipe's buffer


def test_only_stdout_s_own_closed_pipe_is_kept_quiet(monkeypatch: pytest.MonkeyPatch) -> None:
    """A broken pipe of something else (a child process's, a socket's) while stdout is still
    read is an error like any other: raised, not turned into a quiet 141."""

    def elsewhere() -> int:
        raise BrokenPipeError(32, "a pipe of the command's own")

    read_end, write_end = os.pipe()
    with os.fdopen(write_end, "w") as stdout:
        monkeypatch.setattr(sys, "stdout", stdout)
        with pytest.raises(BrokenPipeError, match="the command's own"):
            quiet_on_closed_pipe(elsewhere)
        os.close(read_end)  # now stdout's reader is gone too
        assert quiet_on_closed_pipe(elsewhere) == CLOSED_PIPE_STATUS
        print("goes nowhere", file=stdout)  # /dev/null now: the exit's flush cannot fail
        monkeypatch.undo()

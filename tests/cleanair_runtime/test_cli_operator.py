"""The operator CLI: which database a command works on, bad arguments and settings, and the
listing and partner commands. Run in process over a temporary SQLite file (`database`), or
as the installed command where only a fresh process shows it (no traceback)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from cleanair_core.credits.ledger import Billable
from cleanair_core.errors import NotAuthenticated
from cleanair_runtime import cli
from cleanair_runtime.composition.bootstrap import open_deployment
from cleanair_runtime.composition.settings import Settings

CLI = Path(sys.executable).with_name("cleanair")
KEY = "ab" * 32
#: Commands that only make sense on an existing database: never one that makes it.
NEEDING_A_DATABASE = [
    ["users", "list"],
    ["users", "set-premium", "alice", "on"],
    ["pairing-code", "alice"],
    ["connections", "list", "alice"],
    ["connections", "revoke", "00000000-0000-4000-8000-000000000001"],
    ["partners", "list"],
    ["partners", "issue-token", "acme", "--name", "n", "--scope", "aq:read"],
    ["partners", "deactivate", "acme"],
    ["partners", "connections", "acme"],
    ["partners", "revoke", "acme", "00000000-0000-4000-8000-000000000001"],
    ["partners", "usage", "acme"],
    ["usage", "alice"],
    ["credits", "show", "alice"],
    ["credits", "grant", "alice", "5", "--reason", "x"],
    ["network", "list"],
    ["network", "delete", "helsinki"],
    ["stations", "list"],
    ["stations", "prune"],
    ["worker"],  # on a new, empty database it would idle for ever
]


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    status = cli.main(argv)
    out, err = capsys.readouterr()
    return status, out, err


def installed(argv: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    """The installed `cleanair` in a fresh process, with only the given CLEANAIR_* settings."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("CLEANAIR_")}
    return subprocess.run(
        [str(CLI), *argv], env=base | env, capture_output=True, text=True, timeout=60
    )


# -- which database ---------------------------------------------------------------------------


@pytest.mark.parametrize("argv", NEEDING_A_DATABASE, ids=" ".join)
def test_a_command_needing_a_database_refuses_to_make_one(
    no_database: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    status, out, err = run(argv, capsys)
    assert (status, out) == (2, "")
    assert err == (
        f"cleanair: no database at {no_database}: run cleanair where its database is or set "
        "CLEANAIR_DATABASE (`cleanair users add` or `cleanair serve` makes a new one)\n"
    )
    assert not no_database.parent.exists()  # neither the database nor a key was made


def test_a_relative_database_path_is_shown_absolute_with_the_folder_it_is_relative_to(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CLEANAIR_DATABASE", raising=False)  # the default, ./var/cleanair.db
    monkeypatch.delenv("CLEANAIR_SECRET_KEY", raising=False)
    monkeypatch.delenv("CLEANAIR_SECRET_KEY_FILE", raising=False)
    status, _, err = run(["pairing-code", "alice"], capsys)
    assert status == 2
    assert f"no database at {tmp_path}/var/cleanair.db (CLEANAIR_DATABASE is relative to " in err

    status, _, err = run(["users", "add", "alice"], capsys)
    assert status == 0
    assert err == (
        f"cleanair: creating a new database {tmp_path}/var/cleanair.db and key file "
        f"{tmp_path}/var/secret.key (CLEANAIR_DATABASE is relative to {tmp_path})\n"
    )
    assert run(["pairing-code", "alice"], capsys)[0] == 0


def test_a_creating_command_says_what_it_creates_once(
    no_database: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, err = run(["partners", "add", "acme"], capsys)
    assert (status, out) == (0, "added partner acme\n")
    key_file = no_database.parent / "secret.key"
    assert err == f"cleanair: creating a new database {no_database} and key file {key_file}\n"
    assert no_database.exists()
    assert key_file.exists()
    assert run(["users", "add", "alice"], capsys) == (0, "added user alice (premium)\n", "")


def test_a_database_without_its_key_file_is_refused_not_given_a_new_key(
    database: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    key_file = database.parent / "secret.key"
    key_file.unlink()
    status, _, err = run(["pairing-code", "alice"], capsys)
    assert status == 2
    assert err.startswith(f"cleanair: no key file at {key_file}: ")
    assert not key_file.exists()
    # Nor does a command that may make a new database make a key for this one: it would
    # void every token, pairing code and Wi-Fi access point hashed with the lost key.
    status, _, err = run(["users", "add", "bob"], capsys)
    assert status == 2
    assert err.startswith(f"cleanair: no key file at {key_file}: ")
    assert not key_file.exists()


def test_a_database_given_with_a_secret_key_needs_no_key_file(
    no_database: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CLEANAIR_SECRET_KEY", KEY)
    _, _, err = run(["users", "add", "alice"], capsys)
    assert err == f"cleanair: creating a new database {no_database}\n"
    assert run(["users", "list"], capsys)[0] == 0
    assert not (no_database.parent / "secret.key").exists()


# -- bad settings: one line and exit 2, never a traceback -------------------------------------


def test_a_database_folder_that_cannot_be_made(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    done = installed(["users", "add", "alice"], CLEANAIR_DATABASE=str(blocker / "var" / "x.db"))
    assert done.returncode == 2
    assert done.stderr == f"cleanair: cannot create the folder {blocker}/var: Not a directory\n"


def test_a_database_path_that_is_a_folder(tmp_path: Path) -> None:
    done = installed(["users", "add", "alice"], CLEANAIR_DATABASE=str(tmp_path))
    assert done.returncode == 2
    assert done.stderr == (
        f"cleanair: CLEANAIR_DATABASE: {tmp_path} is a folder, not a database file\n"
    )


def test_a_database_name_the_system_refuses(tmp_path: Path) -> None:
    too_long = tmp_path / ("x" * 300)
    done = installed(["users", "add", "alice"], CLEANAIR_DATABASE=str(too_long))
    assert done.returncode == 2
    assert done.stderr == f"cleanair: {too_long}: File name too long\n"


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (lambda path: path.mkdir(), "Is a directory"),
        (lambda path: path.write_bytes(b"\xff\xfe not text"), "not a hex key"),
    ],
    ids=["a folder", "not text"],
)
def test_an_unreadable_key_file(
    tmp_path: Path, make: Callable[[Path], object], reason: str
) -> None:
    key_file = tmp_path / "key"
    make(key_file)
    done = installed(
        ["users", "add", "alice"],
        CLEANAIR_DATABASE=str(tmp_path / "x.db"),
        CLEANAIR_SECRET_KEY_FILE=str(key_file),
    )
    assert done.returncode == 2
    assert done.stderr.endswith(f"cleanair: the key file {key_file} cannot be read: {reason}\n")
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("workers", ["1", "2"])
def test_serve_on_a_port_in_use_is_one_line_and_exit_1(tmp_path: Path, workers: str) -> None:
    database = tmp_path / "var" / "x.db"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = installed(
            ["serve", "--port", str(port), "--workers", workers],
            CLEANAIR_DATABASE=str(database),
        )
    assert done.returncode == 1
    assert done.stderr == f"cleanair: cannot listen on 127.0.0.1:{port}: Address already in use\n"
    # It failed before making anything: no database, no key file, not even their folder.
    assert not database.parent.exists()


# -- bad arguments: usage and exit 2 ----------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["nonsense"],
        ["serve", "--port", "65536"],
        ["serve", "--port", "-1"],
        ["serve", "--port", "http"],
        ["serve", "--workers", "0"],
        ["worker", "--concurrency", "65"],
        ["users"],
        ["users", "add"],
        ["users", "add", "alice", "--premium=yes"],
        ["users", "list", "alice"],
        ["users", "set-premium", "alice"],
        ["users", "set-premium", "alice", "yes"],
        ["pairing-code"],
        ["connections", "list"],
        ["connections", "revoke"],
        ["partners", "add"],
        ["partners", "list", "acme"],
        ["partners", "issue-token", "acme", "--name", "n"],
        ["partners", "issue-token", "acme", "--scope", "aq:read"],
        ["partners", "issue-token", "acme", "--name", "n", "--scope", "aq:write"],
        ["partners", "deactivate"],
        ["partners", "connections"],
        ["partners", "revoke", "acme"],
        ["partners", "usage"],
        ["partners", "usage", "acme", "--csv"],
        ["clients", "add"],
        ["usage"],
        ["wifi", "import"],
        ["network", "import"],
        ["network", "delete"],
        ["network", "list", "x"],
    ],
    ids=lambda argv: " ".join(argv) or "nothing",
)
def test_bad_arguments_exit_2_with_usage(
    no_database: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    with pytest.raises(SystemExit) as raised:
        cli.main(argv)
    assert raised.value.code == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert "usage: cleanair" in err
    assert "error: " in err
    assert not no_database.parent.exists()


# -- listings and partners --------------------------------------------------------------------


def test_users_list(database: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["users", "list"], capsys)[1] == "name\tpremium\tcreated\n"
    run(["users", "add", "bob", "--no-premium"], capsys)
    run(["users", "add", "alice"], capsys)
    status, out, _ = run(["users", "list"], capsys)
    rows = [line.split("\t")[:2] for line in out.splitlines()]
    assert status == 0
    assert rows == [["name", "premium"], ["alice", "on"], ["bob", "off"]]


def test_partners_list(database: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run(["partners", "add", "globex"], capsys)
    run(["partners", "add", "acme"], capsys)
    run(["partners", "deactivate", "globex"], capsys)
    status, out, _ = run(["partners", "list"], capsys)
    rows = [line.split("\t")[:2] for line in out.splitlines()]
    assert status == 0
    assert rows == [["name", "active"], ["acme", "yes"], ["globex", "no"]]


def issue(capsys: pytest.CaptureFixture[str], partner: str = "acme") -> tuple[str, str]:
    """A partner token, and its connection id as issue-token reports it."""
    status, out, err = run(
        ["partners", "issue-token", partner, "--name", "feed", "--scope", "aq:read"], capsys
    )
    assert status == 0
    token = out.strip()
    assert out == f"{token}\n"  # the token alone on stdout, for scripts
    connection_id = err.split()[2]
    assert err == (
        f"cleanair: connection {connection_id} (the token is shown only now; revoke it with "
        f"`cleanair partners revoke {partner} {connection_id}`)\n"
    )
    return token, str(uuid.UUID(connection_id))


def test_a_partners_connections_are_listed_without_tokens_and_revocable(
    database: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run(["partners", "add", "acme"], capsys)
    token, connection_id = issue(capsys)
    status, out, _ = run(["partners", "connections", "acme"], capsys)
    assert status == 0
    assert out.splitlines()[0] == "id\tname\tscopes\tcreated\trevoked"
    assert out.splitlines()[1].split("\t")[:3] == [connection_id, "feed", "aq:read"]
    assert out.splitlines()[1].endswith("\t-")
    assert token not in out

    assert run(["partners", "revoke", "acme", connection_id], capsys) == (
        0,
        f"revoked {connection_id}\n",
        "",
    )
    _, out, _ = run(["partners", "connections", "acme"], capsys)
    assert not out.splitlines()[1].endswith("\t-")  # revoked at: now
    deployment = open_deployment(Settings.from_env(), with_sources=False)
    try:
        with pytest.raises(NotAuthenticated):
            deployment.core.authenticate(token)
    finally:
        deployment.close()
    # Once revoked, or of another owner: refused, and nothing else is touched.
    status, _, err = run(["partners", "revoke", "acme", connection_id], capsys)
    assert (status, err) == (
        1,
        f"cleanair: partner acme has no active connection {connection_id}\n",
    )


def test_partners_revoke_refuses_another_owners_connection(
    database: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run(["partners", "add", "acme"], capsys)
    run(["partners", "add", "globex"], capsys)
    token, connection_id = issue(capsys, "globex")
    status, _, err = run(["partners", "revoke", "acme", connection_id], capsys)
    assert (status, err) == (
        1,
        f"cleanair: partner acme has no active connection {connection_id}\n",
    )
    deployment = open_deployment(Settings.from_env(), with_sources=False)
    try:
        deployment.core.authenticate(token)  # still works
    finally:
        deployment.close()


def test_partners_usage_is_the_partners_pool_by_label(
    database: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run(["partners", "add", "acme"], capsys)
    run(["users", "add", "acme"], capsys)  # a user of the same name has a pool of its own
    run(["clients", "add", "feed-app"], capsys)
    token, _ = issue(capsys)
    deployment = open_deployment(Settings.from_env(), with_sources=False)
    core = deployment.core
    try:
        caller = core.authenticate(token)
        with core.charge(caller, Billable.FORECAST, client="feed-app"):
            pass
        with core.charge(caller, Billable.SCORE):
            pass
    finally:
        deployment.close()
    assert run(["partners", "usage", "acme"], capsys) == (0, "client:feed-app\t2\nscore\t1\n", "")
    status, out, _ = run(["partners", "usage", "acme", "--json"], capsys)
    assert (status, json.loads(out)) == (0, {"client:feed-app": 2, "score": 1})
    assert run(["usage", "acme"], capsys) == (0, "no credits used this month by acme\n", "")


def test_usage_with_nothing_used_says_so(
    database: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An empty answer looked like a command that had done nothing."""
    run(["partners", "add", "acme"], capsys)
    run(["users", "add", "alice"], capsys)
    assert run(["partners", "usage", "acme"], capsys) == (
        0,
        "no credits used this month by acme\n",
        "",
    )
    assert run(["partners", "usage", "acme", "--json"], capsys) == (0, "{}\n", "")
    assert run(["usage", "alice"], capsys) == (0, "no credits used this month by alice\n", "")
    assert run(["usage", "alice", "--json"], capsys) == (0, "{}\n", "")

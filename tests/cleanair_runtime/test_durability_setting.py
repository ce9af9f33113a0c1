"""CLEANAIR_SQLITE_SYNCHRONOUS: power-loss durable (`full`) unless the operator trades it
away, a bad value a start-up error, and the store every process opens takes it."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from cleanair_runtime.composition.bootstrap import open_deployment
from cleanair_runtime.composition.settings import Settings, SettingsError
from cleanair_storage.sqlite import SqliteStore


def test_commits_are_synced_to_disk_unless_told() -> None:
    assert Settings.from_env({}).sqlite_synchronous == "full"
    assert Settings.from_env({"CLEANAIR_SQLITE_SYNCHRONOUS": " Normal "}).sqlite_synchronous == (
        "normal"
    )
    assert Settings.from_env({"CLEANAIR_SQLITE_SYNCHRONOUS": "FULL"}).sqlite_synchronous == "full"


@pytest.mark.parametrize("raw", ["off", "extra", "0"])
def test_a_bad_value_stops_start_up_and_is_not_echoed(raw: str) -> None:
    with pytest.raises(SettingsError) as raised:
        Settings.from_env({"CLEANAIR_SQLITE_SYNCHRONOUS": raw})
    assert str(raised.value) == (
        "invalid settings:\n  CLEANAIR_SQLITE_SYNCHRONOUS: must be one of full, normal"
    )


@pytest.mark.parametrize(("raw", "pragma"), [(None, 2), ("normal", 1), ("full", 2)])
def test_the_deployments_store_takes_the_setting(
    tmp_path: Path, raw: str | None, pragma: int
) -> None:
    env = {"CLEANAIR_DATABASE": str(tmp_path / "var" / "cleanair.db")}
    if raw is not None:
        env["CLEANAIR_SQLITE_SYNCHRONOUS"] = raw
    deployment = open_deployment(Settings.from_env(env), with_sources=False)
    try:
        store = deployment.core.store
        assert isinstance(store, SqliteStore)
        assert store._writer.execute("PRAGMA synchronous").fetchone()[0] == pragma
    finally:
        deployment.close()


def test_postgresql_without_synced_commits_is_told_by_the_processes_that_serve(
    postgres_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # The tests' server runs with fsync and synchronous_commit off. An operator's command
    # prints what it was asked for alone (tests/cleanair_runtime/test_cli_schema_too_new.py).
    key_file = tmp_path / "shared.key"
    key_file.write_text("ab" * 32 + "\n")
    settings = Settings.from_env(
        {"CLEANAIR_DATABASE": postgres_url, "CLEANAIR_SECRET_KEY_FILE": str(key_file)}
    )
    caplog.set_level(logging.WARNING, logger="cleanair.storage.postgres")
    open_deployment(settings, with_sources=False).close()
    assert caplog.records == []
    open_deployment(settings).close()
    warned = [r.getMessage() for r in caplog.records]
    assert [w.split(":")[0] for w in warned] == [
        "PostgreSQL fsync is off",
        "PostgreSQL synchronous_commit is off",
    ]

"""The composition root builds the adapters the settings choose, and closes their clients."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from cleanair_core.access.accounts import User
from cleanair_core.air.fused_air import FusedAir
from cleanair_core.air.quality_source import Sample
from cleanair_core.air.street_level import StreetLevelAir
from cleanair_core.air.wifi_location import LocalWifiGeolocator
from cleanair_core.geo import Point
from cleanair_core.keys import TokenKeys, generate_key
from cleanair_runtime.composition.bootstrap import Deployment, build_sources, open_deployment
from cleanair_runtime.composition.settings import Settings, SettingsError
from cleanair_sources.embedded_model import EmbeddedModel
from cleanair_sources.gazetteer import Gazetteer
from cleanair_sources.ichnaea import IchnaeaGeolocator
from cleanair_sources.ip_location import CountryIpLocator
from cleanair_sources.open_meteo import OpenMeteoSource
from cleanair_storage.memory import MemoryStore


def test_the_default_sources_are_offline() -> None:
    deployment = Deployment()
    sources = build_sources(
        Settings.from_env({}), MemoryStore(), TokenKeys(generate_key()), deployment
    )
    # With the default network loaded: fused with the stations, over street level, over the
    # embedded model.
    assert isinstance(sources.air_quality, FusedAir)
    street_level = sources.air_quality.unfused
    assert isinstance(street_level, StreetLevelAir)
    assert isinstance(street_level.background, EmbeddedModel)
    assert isinstance(sources.wifi, LocalWifiGeolocator)
    assert isinstance(sources.ip, CountryIpLocator)
    assert isinstance(sources.places, Gazetteer)


def test_remote_sources_are_chosen_by_settings_and_closed() -> None:
    settings = Settings.from_env(
        {
            "CLEANAIR_AIR_QUALITY_SOURCE": "open-meteo",
            "CLEANAIR_WIFI_GEOLOCATOR": "ichnaea",
            "CLEANAIR_ICHNAEA_URL": "http://127.0.0.1:9/v1/geolocate",
        }
    )
    deployment = Deployment()
    sources = build_sources(settings, MemoryStore(), TokenKeys(generate_key()), deployment)
    assert isinstance(sources.air_quality, FusedAir)
    street_level = sources.air_quality.unfused
    assert isinstance(street_level, StreetLevelAir)  # street level over CAMS too
    open_meteo = street_level.background
    assert isinstance(open_meteo, OpenMeteoSource)
    assert isinstance(sources.wifi, IchnaeaGeolocator)
    clients = [open_meteo._client, sources.wifi._client]
    assert not any(client.is_closed for client in clients)
    asyncio.run(deployment.aclose())
    assert all(client.is_closed for client in clients)


def test_without_a_street_network_the_background_source_applies_alone() -> None:
    settings = Settings.from_env({"CLEANAIR_DEFAULT_NETWORK": "false"})
    sources = build_sources(settings, MemoryStore(), TokenKeys(generate_key()), Deployment())
    assert isinstance(sources.air_quality, FusedAir)
    # Street level all the same, so that a network imported later gets it (network_reload).
    street_level = sources.air_quality.unfused
    assert isinstance(street_level, StreetLevelAir)
    assert isinstance(street_level.background, EmbeddedModel)
    samples = [Sample(Point(60.17, 24.94), datetime(2026, 5, 20, 8, tzinfo=UTC))]
    assert asyncio.run(street_level.concentrations(samples)) == asyncio.run(
        street_level.background.concentrations(samples)
    )


def test_a_deployment_closes_what_it_opened_last_first_and_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    deployment = Deployment()
    closed: list[str] = []

    def closer(name: str, fail: bool = False) -> Callable[[], Awaitable[None]]:
        async def close() -> None:
            closed.append(name)
            if fail:
                raise OSError("gone")

        return close

    deployment.opened("first", closer("first"))
    deployment.opened("second", closer("second", fail=True))
    deployment.opened("third", closer("third"))
    deployment.close()
    deployment.close()
    assert closed == ["third", "second", "first"]  # a failing close does not stop the rest
    assert "could not close second" in caplog.text


def test_an_opened_deployment_closes_its_store(tmp_path: Path) -> None:
    settings = Settings(database=tmp_path / "var" / "cleanair.db", default_network=False)
    deployment = open_deployment(settings, with_sources=False)
    store = deployment.core.store
    store.add_user(User("alice", True, datetime(2026, 1, 1, tzinfo=UTC)))
    deployment.close()
    with pytest.raises(sqlite3.ProgrammingError):  # closed: its writer is gone
        store.add_user(User("bob", True, datetime(2026, 1, 1, tzinfo=UTC)))


def test_a_postgresql_deployment_opens_on_a_shared_key(postgres_url: str, tmp_path: Path) -> None:
    key_file = tmp_path / "shared.key"
    key_file.write_text("ab" * 32 + "\n")
    settings = Settings.from_env(
        {"CLEANAIR_DATABASE": postgres_url, "CLEANAIR_SECRET_KEY_FILE": str(key_file)}
    )
    deployment = open_deployment(settings, with_sources=False)
    try:
        core = deployment.core
        assert type(core.store).__name__ == "PostgresStore"
        core.add_user("alice")
        assert core.store.get_user("alice") is not None
    finally:
        deployment.close()
    # A second process (here: a second deployment) sees the same data with the same key.
    again = open_deployment(settings, with_sources=False)
    try:
        assert again.core.store.get_user("alice") is not None
    finally:
        again.close()


def test_a_postgresql_deployment_never_makes_up_a_key(postgres_url: str, tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.key"
    settings = Settings.from_env(
        {"CLEANAIR_DATABASE": postgres_url, "CLEANAIR_SECRET_KEY_FILE": str(missing)}
    )
    with pytest.raises(SettingsError, match="does not exist: with a PostgreSQL database"):
        open_deployment(settings, with_sources=False)
    assert not missing.exists()


def test_a_sqlite_deployment_never_makes_a_new_key_for_an_existing_database(
    tmp_path: Path,
) -> None:
    """The tokens, pairing codes and Wi-Fi access points of the database are hashed with its
    key: a key file that went missing (not mounted, say) stops the server, it is not
    replaced by one that would quietly void them all."""
    env = {"CLEANAIR_DATABASE": str(tmp_path / "cleanair.db")}
    open_deployment(Settings.from_env(env), with_sources=False).close()  # database and key
    key_file = tmp_path / "secret.key"
    key_file.unlink()
    with pytest.raises(SettingsError, match="no key file at"):
        open_deployment(Settings.from_env(env), with_sources=False)
    assert not key_file.exists()


def test_a_deployment_says_what_it_works_with_and_no_password(tmp_path: Path) -> None:
    settings = Settings.from_env(
        {
            "CLEANAIR_DATABASE": str(tmp_path / "cleanair.db"),
            "CLEANAIR_AIR_QUALITY_SOURCE": "open-meteo",
            "CLEANAIR_OPEN_METEO_URL": "https://me:s3cret@air.example.org:8443/api",
        }
    )
    with_sources = open_deployment(settings)
    try:
        assert with_sources.in_use() == {
            "database": str(tmp_path / "cleanair.db"),
            "air_quality_source": "open-meteo (https://air.example.org:8443)",
            "networks": ["helsinki"],  # the shipped default, imported on first start
        }
    finally:
        with_sources.close()
    # The CLI opens no sources: only the database is known.
    without = open_deployment(settings, with_sources=False)
    try:
        assert without.in_use() == {"database": str(tmp_path / "cleanair.db")}
    finally:
        without.close()


def test_the_embedded_source_is_named_as_the_setting_says(tmp_path: Path) -> None:
    settings = Settings.from_env(
        {"CLEANAIR_DATABASE": str(tmp_path / "cleanair.db"), "CLEANAIR_DEFAULT_NETWORK": "false"}
    )
    deployment = open_deployment(settings)
    try:
        assert deployment.in_use() == {
            "database": str(tmp_path / "cleanair.db"),
            "air_quality_source": "embedded",
            "networks": [],
        }
    finally:
        deployment.close()


def test_the_default_network_is_imported_on_the_first_start_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stored the first time: later starts read it back instead of parsing the extract."""
    from cleanair_sources import osm_import

    imports: list[str] = []
    real = osm_import.import_network

    def counted(*args: object, **kwargs: object) -> object:
        imports.append(str(args[1]))
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(osm_import, "import_network", counted)
    settings = Settings.from_env(
        {"CLEANAIR_DATABASE": str(tmp_path / "cleanair.db"), "CLEANAIR_DEFAULT_NETWORK": "true"}
    )
    for _ in range(2):
        deployment = open_deployment(settings)
        assert deployment.network_names == ("helsinki",)
        deployment.close()
    assert imports == ["helsinki"]

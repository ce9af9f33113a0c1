"""Settings of the air-quality and Wi-Fi sources; bad values name their variable."""

from __future__ import annotations

import pytest

from cleanair_http.settings import OPEN_METEO_URL, Settings, SettingsError


def test_defaults_work_offline() -> None:
    settings = Settings.from_env({})
    assert settings.air_quality_source == "embedded"
    assert settings.wifi_geolocator == "local"
    assert settings.open_meteo_url == OPEN_METEO_URL


def test_open_meteo_and_ichnaea_can_be_chosen() -> None:
    settings = Settings.from_env(
        {
            "CLEANAIR_AIR_QUALITY_SOURCE": "Open-Meteo",
            "CLEANAIR_OPEN_METEO_URL": "http://meteo.internal:8080/",
            "CLEANAIR_OPEN_METEO_TIMEOUT": "2.5",
            "CLEANAIR_WIFI_GEOLOCATOR": "ichnaea",
            "CLEANAIR_ICHNAEA_URL": "https://api.beacondb.net/v1/geolocate",
            "CLEANAIR_ICHNAEA_KEY": "sekrit-key",
        }
    )
    assert settings.air_quality_source == "open-meteo"
    assert settings.open_meteo_url == "http://meteo.internal:8080"
    assert settings.open_meteo_timeout == 2.5
    assert settings.ichnaea_url == "https://api.beacondb.net/v1/geolocate"
    assert "sekrit-key" not in repr(settings)


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"CLEANAIR_AIR_QUALITY_SOURCE": "satellite"}, "CLEANAIR_AIR_QUALITY_SOURCE"),
        ({"CLEANAIR_OPEN_METEO_URL": "ftp://x"}, "CLEANAIR_OPEN_METEO_URL"),
        ({"CLEANAIR_OPEN_METEO_TIMEOUT": "0"}, "CLEANAIR_OPEN_METEO_TIMEOUT"),
        ({"CLEANAIR_OPEN_METEO_TIMEOUT": "soon"}, "CLEANAIR_OPEN_METEO_TIMEOUT"),
        ({"CLEANAIR_WIFI_GEOLOCATOR": "gps"}, "CLEANAIR_WIFI_GEOLOCATOR"),
        ({"CLEANAIR_WIFI_GEOLOCATOR": "ichnaea"}, "CLEANAIR_ICHNAEA_URL"),
    ],
)
def test_bad_source_settings_fail_naming_the_variable(env: dict[str, str], named: str) -> None:
    with pytest.raises(SettingsError, match=named):
        Settings.from_env(env)

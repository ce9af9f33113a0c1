"""Settings of the air-quality and Wi-Fi sources; bad values name their variable."""

from __future__ import annotations

from pathlib import Path

import pytest

from cleanair_runtime.composition.settings import (
    OPEN_METEO_URL,
    Settings,
    SettingsError,
    database_label,
)


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


def test_plan_settings_reach_the_policy() -> None:
    from cleanair_runtime.composition.bootstrap import policy_from

    defaults = Settings.from_env({})
    assert (defaults.plan_workers, defaults.default_network) == (2, True)
    assert defaults.plan_worker_idle_seconds == 1.0
    settings = Settings.from_env(
        {
            "CLEANAIR_PLAN_WORKERS": "0",
            "CLEANAIR_PLAN_WORKER_IDLE_SECONDS": "0.5",
            "CLEANAIR_PLAN_LEASE_SECONDS": "5",
            "CLEANAIR_MAX_PLAN_ATTEMPTS": "7",
            "CLEANAIR_PLAN_RETENTION_DAYS": "3",
            "CLEANAIR_DEFAULT_NETWORK": "off",
        }
    )
    assert (settings.plan_workers, settings.default_network) == (0, False)
    assert settings.plan_worker_idle_seconds == 0.5
    policy = policy_from(settings)
    assert policy.plan_lease_seconds == 5
    assert policy.max_plan_attempts == 7
    assert policy.plan_retention_seconds == 3 * 24 * 3600


@pytest.mark.parametrize(
    ("name", "raw"),
    [
        ("CLEANAIR_PLAN_WORKERS", "-1"),
        ("CLEANAIR_PLAN_WORKER_IDLE_SECONDS", "0.05"),
        ("CLEANAIR_PLAN_WORKER_IDLE_SECONDS", "121"),
        ("CLEANAIR_PLAN_WORKER_IDLE_SECONDS", "a while"),
        ("CLEANAIR_PLAN_LEASE_SECONDS", "0"),
        ("CLEANAIR_MAX_PLAN_ATTEMPTS", "0"),
        ("CLEANAIR_MAX_PLAN_ATTEMPTS", "11"),
        ("CLEANAIR_MAX_PLAN_ATTEMPTS", "three"),
        ("CLEANAIR_PLAN_RETENTION_DAYS", "a week"),
        ("CLEANAIR_DEFAULT_NETWORK", "maybe"),
    ],
)
def test_bad_plan_settings_fail_naming_the_variable(name: str, raw: str) -> None:
    with pytest.raises(SettingsError, match=name):
        Settings.from_env({name: raw})


def test_the_default_network_is_imported_once_and_only_when_wanted() -> None:
    from cleanair_runtime.composition.bootstrap import DEFAULT_NETWORK_NAME, street_networks
    from cleanair_storage.memory import MemoryStore

    store = MemoryStore()
    assert street_networks(Settings(default_network=False), store) == []
    assert store.network_summaries() == []
    [imported] = street_networks(Settings(), store)
    assert imported.name == DEFAULT_NETWORK_NAME
    assert [n.name for n in store.network_summaries()] == [DEFAULT_NETWORK_NAME]
    # A restart loads what is stored rather than importing again.
    [loaded] = street_networks(Settings(), store)
    assert loaded is imported


def test_the_pairing_guess_budget_reaches_the_policy() -> None:
    from cleanair_runtime.composition.bootstrap import policy_from

    assert policy_from(Settings.from_env({})).pairing_guess_budget == 100
    settings = Settings.from_env({"CLEANAIR_PAIRING_GUESS_BUDGET": "40"})
    assert policy_from(settings).pairing_guess_budget == 40
    with pytest.raises(SettingsError, match="CLEANAIR_PAIRING_GUESS_BUDGET"):
        Settings.from_env({"CLEANAIR_PAIRING_GUESS_BUDGET": "0"})


@pytest.mark.parametrize(
    "retired", ["CLEANAIR_PAIRING_FAILURE_BUDGET", "CLEANAIR_PAIRING_FAILURE_WINDOW_SECONDS"]
)
def test_retired_variables_stop_start_up_instead_of_being_ignored(retired: str) -> None:
    with pytest.raises(SettingsError, match=f"{retired}: no longer read") as raised:
        Settings.from_env({retired: "100"})
    assert "docs/security.md" in str(raised.value)


def test_the_defaults_are_the_cores_own() -> None:
    """Settings that become the policy default to `Policy()`'s values, not to a copy of them."""
    from cleanair_core import Policy
    from cleanair_runtime.composition.bootstrap import policy_from

    assert policy_from(Settings.from_env({})) == Policy()
    assert policy_from(Settings()) == Policy()


def test_the_observation_retention_reaches_the_policy_and_0_keeps_for_ever() -> None:
    from cleanair_runtime.composition.bootstrap import policy_from

    assert Settings.from_env({}).observation_retention_days == 400
    for days in ("0", "30", "36500"):
        settings = Settings.from_env({"CLEANAIR_OBSERVATION_RETENTION_DAYS": days})
        assert policy_from(settings).observation_retention_seconds == int(days) * 86_400


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("-1", "must be between 0 and 36500 days"),
        ("36501", "must be between 0 and 36500 days"),
        ("a year", "must be a whole number"),
    ],
)
def test_a_bad_observation_retention_is_refused(raw: str, message: str) -> None:
    with pytest.raises(SettingsError) as raised:
        Settings.from_env({"CLEANAIR_OBSERVATION_RETENTION_DAYS": raw})
    assert str(raised.value) == (
        f"invalid settings:\n  CLEANAIR_OBSERVATION_RETENTION_DAYS: {message}"
    )


def test_the_access_log_level_is_read_in_any_case() -> None:
    assert Settings.from_env({}).access_log == "info"
    assert Settings.from_env({"CLEANAIR_ACCESS_LOG": " DEBUG "}).access_log == "debug"
    assert Settings.from_env({"CLEANAIR_ACCESS_LOG": "off"}).access_log == "off"


def test_every_default_is_within_its_bounds() -> None:
    from cleanair_runtime.composition.settings import SETTINGS

    bounded = [s for s in SETTINGS if s.bounds is not None]
    assert len(bounded) > 10
    for setting in bounded:
        assert setting.bounds is not None
        assert isinstance(setting.default, int | float)
        setting.bounds.check(setting.default)


@pytest.mark.parametrize(
    ("name", "raw", "message"),
    [
        ("CLEANAIR_MONTHLY_CREDITS", "lots", "must be a whole number"),
        ("CLEANAIR_PLAN_WORKERS", "-1", "must not be negative"),
        ("CLEANAIR_PLAN_LEASE_SECONDS", "0", "must be at least 1"),
        ("CLEANAIR_HEADER_TIMEOUT", "soon", "must be a number of seconds"),
        ("CLEANAIR_SEND_TIMEOUT", "120.5", "must be between 0.1 and 120 seconds"),
        ("CLEANAIR_MAX_PLAN_ATTEMPTS", "11", "must be between 1 and 10"),
        ("CLEANAIR_ENVIRONMENT", "prod", "must be tst or pdn"),
        ("CLEANAIR_ACCESS_LOG", "warning", "must be one of info, debug, off"),
        ("CLEANAIR_SECRET_KEY", "short", "must be at least 32 characters"),
    ],
)
def test_a_bad_value_is_named_with_what_is_wrong(name: str, raw: str, message: str) -> None:
    with pytest.raises(SettingsError) as raised:
        Settings.from_env({name: raw})
    assert str(raised.value) == f"invalid settings:\n  {name}: {message}"


def test_every_bad_variable_is_named_at_once() -> None:
    with pytest.raises(SettingsError) as raised:
        Settings.from_env(
            {
                "CLEANAIR_MONTHLY_CREDITS": "-5",
                "CLEANAIR_BODY_TIMEOUT": "0",
                "CLEANAIR_LOG_LEVEL": "loud",
            }
        )
    assert str(raised.value).splitlines()[1:] == [
        "  CLEANAIR_MONTHLY_CREDITS: must not be negative",
        "  CLEANAIR_LOG_LEVEL: must be DEBUG, INFO, WARNING or ERROR",
        "  CLEANAIR_BODY_TIMEOUT: must be between 0.1 and 120 seconds",
    ]


URL = "postgresql://cleanair:s3cret-pass@db.internal:5432/cleanair"
KEY = "k" * 40


def test_a_postgresql_url_is_kept_as_written_and_a_path_stays_a_path() -> None:
    settings = Settings.from_env({"CLEANAIR_DATABASE": URL, "CLEANAIR_SECRET_KEY": KEY})
    assert settings.database == URL
    assert settings.uses_postgres
    local = Settings.from_env({"CLEANAIR_DATABASE": "/srv/cleanair/db.sqlite"})
    assert local.database == Path("/srv/cleanair/db.sqlite")
    assert not local.uses_postgres


def test_a_postgresql_database_without_a_given_key_is_refused_at_start() -> None:
    with pytest.raises(SettingsError, match="CLEANAIR_SECRET_KEY or CLEANAIR_SECRET_KEY_FILE"):
        Settings.from_env({"CLEANAIR_DATABASE": URL})
    with_file = Settings.from_env(
        {"CLEANAIR_DATABASE": URL, "CLEANAIR_SECRET_KEY_FILE": "/etc/cleanair/key"}
    )
    assert with_file.key_file == Path("/etc/cleanair/key")


def test_the_database_is_shown_without_its_password() -> None:
    assert database_label(URL) == "postgresql://cleanair@db.internal:5432/cleanair"
    assert "s3cret" not in database_label(URL)
    assert database_label("postgresql:///cleanair") == "postgresql:///cleanair"
    assert database_label(Path("var/cleanair.db")) == "var/cleanair.db"
    # libpq also takes the password as a query parameter, and other secrets that way too.
    in_query = "postgresql://db.internal/cleanair?user=app&password=s3cret&sslpassword=k3y"
    assert database_label(in_query) == "postgresql://db.internal/cleanair"
    several = "postgresql://app:s3cret@h1:5432,h2:5433/cleanair?target_session_attrs=read-write"
    assert database_label(several) == "postgresql://app@h1:5432,h2:5433/cleanair"


def test_openaq_is_off_until_a_key_is_set_and_the_key_is_never_shown() -> None:
    assert Settings.from_env({}).openaq_api_key is None
    settings = Settings.from_env(
        {
            "CLEANAIR_OPENAQ_API_KEY": "openaq-sekrit",
            "CLEANAIR_OPENAQ_URL": "http://openaq.internal:8000/v3/",
            "CLEANAIR_OPENAQ_POLL_SECONDS": "600",
            "CLEANAIR_OPENAQ_BOX": "60.1, 24.8, 60.3, 25.2",
        }
    )
    assert settings.openaq_api_key == "openaq-sekrit"
    assert settings.openaq_url == "http://openaq.internal:8000/v3"
    assert settings.openaq_poll_seconds == 600
    assert settings.openaq_box == (60.1, 24.8, 60.3, 25.2)
    assert "openaq-sekrit" not in repr(settings)


@pytest.mark.parametrize(
    ("variable", "raw"),
    [
        ("CLEANAIR_OPENAQ_URL", "api.openaq.org"),
        ("CLEANAIR_OPENAQ_POLL_SECONDS", "10"),
        ("CLEANAIR_OPENAQ_POLL_SECONDS", "often"),
        ("CLEANAIR_OPENAQ_BOX", "60,24,61"),
        ("CLEANAIR_OPENAQ_BOX", "61,24,60,25"),  # south above north
        ("CLEANAIR_OPENAQ_BOX", "60,25,61,24"),  # west east of east
        ("CLEANAIR_OPENAQ_BOX", "60,24,91,25"),
        ("CLEANAIR_OPENAQ_BOX", "north,24,61,25"),
    ],
)
def test_bad_openaq_settings_fail_naming_the_variable(variable: str, raw: str) -> None:
    with pytest.raises(SettingsError, match=variable):
        Settings.from_env({variable: raw})

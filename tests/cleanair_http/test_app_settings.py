"""The app reads its settings through `HttpSettings`, never the runtime's module: the runtime's
`Settings` and the adapter's own `AppSettings` both serve, with the same shipped defaults."""

from __future__ import annotations

import attrs
from litestar.testing import TestClient

from cleanair_core import CleanAir
from cleanair_http.app import create_app
from cleanair_http.app_settings import AppSettings, HttpSettings
from cleanair_runtime.composition.settings import Settings

APP = "https://app.example"


def test_the_runtimes_settings_default_to_the_apps() -> None:
    shipped, own = Settings(), AppSettings()
    for field in attrs.fields(AppSettings):
        assert getattr(shipped, field.name) == getattr(own, field.name), field.name


def test_the_runtimes_settings_are_what_the_app_reads() -> None:
    settings: HttpSettings = Settings(plan_workers=0)  # mypy holds the shape

    assert settings.plan_workers == 0


def test_an_app_built_with_its_own_settings_serves_them(core: CleanAir) -> None:
    app = create_app(core, AppSettings(plan_workers=0, cors_allow_origins=(APP,)))

    with TestClient(app) as client:
        response = client.options(
            "/v1/quota",
            headers={"Origin": APP, "Access-Control-Request-Method": "GET"},
        )

    assert response.status_code == 204
    assert response.headers["access-control-allow-origin"] == APP

"""The composition root builds the adapters the settings choose, and closes their clients."""

from __future__ import annotations

import asyncio

from cleanair_core.air.wifi_location import LocalWifiGeolocator
from cleanair_core.keys import TokenKeys, generate_key
from cleanair_http.bootstrap import build_sources, close_sources
from cleanair_http.settings import Settings
from cleanair_sources.embedded_model import EmbeddedModel
from cleanair_sources.gazetteer import Gazetteer
from cleanair_sources.ichnaea import IchnaeaGeolocator
from cleanair_sources.ip_location import CountryIpLocator
from cleanair_sources.open_meteo import OpenMeteoSource
from cleanair_storage.memory import MemoryStore


def test_the_default_sources_are_offline() -> None:
    sources = build_sources(Settings.from_env({}), MemoryStore(), TokenKeys(generate_key()))
    assert isinstance(sources.air_quality, EmbeddedModel)
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
    sources = build_sources(settings, MemoryStore(), TokenKeys(generate_key()))
    assert isinstance(sources.air_quality, OpenMeteoSource)
    assert isinstance(sources.wifi, IchnaeaGeolocator)
    clients = [sources.air_quality._client, sources.wifi._client]
    assert not any(client.is_closed for client in clients)
    asyncio.run(close_sources(sources))
    assert all(client.is_closed for client in clients)

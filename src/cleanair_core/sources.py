"""The outside-world ports the air-quality use cases need, gathered for the facade."""

from __future__ import annotations

import attrs

from cleanair_core.air_quality import AirQualitySource
from cleanair_core.places import IpLocator, PlaceNamer
from cleanair_core.street_network import StreetNetworks
from cleanair_core.wifi import WifiGeolocator


@attrs.frozen
class Sources:
    """Where air quality, Wi-Fi and IP locations, place names and street networks come from.

    A port left as None makes the use cases that need it fail as unresolvable (Wi-Fi, IP) or
    fall back to coordinates as the name (places).
    """

    air_quality: AirQualitySource
    wifi: WifiGeolocator | None = None
    ip: IpLocator | None = None
    places: PlaceNamer | None = None
    #: The street networks route plans run on; None rejects every plan.
    networks: StreetNetworks | None = None

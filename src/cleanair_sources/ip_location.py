"""An approximate place for a client address: its country, placed at the country's capital.

The country comes from `iptocc` (regional-registry delegation data bundled in the package, no
network); the capital and the country's name from the gazetteer (GeoNames, CC BY 4.0). A
country is all an address reveals reliably, so the answer is deliberately coarse.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable

import iptocc

from cleanair_core.air.places import Place
from cleanair_sources.gazetteer import Gazetteer


class CountryIpLocator:
    """Implements the core `IpLocator`: address -> Place(country name, capital's point).

    None for anything that is not a public unicast address (loopback, private, link-local,
    shared, documentation, multicast, reserved, unspecified, or not an address at all, such as
    "testclient"), for an address no registry delegates to a country, and for a code the
    gazetteer does not know as a country with a place ("EU", "AP", Antarctica).
    `country_code` is iptocc's lookup unless a test passes another.
    """

    def __init__(
        self,
        gazetteer: Gazetteer,
        country_code: Callable[[str], str | None] = iptocc.country_code,
    ) -> None:
        self._gazetteer = gazetteer
        self._country_code = country_code

    def locate(self, address: str) -> Place | None:
        parsed = _public_address(address)
        if parsed is None:
            return None
        code = self._country_code(parsed)
        if not code:
            return None
        name = self._gazetteer.country_name(code)
        capital = self._gazetteer.capital_of(code)
        if name is None or capital is None:
            return None
        return Place(name=name, point=capital.point)


def _public_address(address: str) -> str | None:
    """The address in canonical form if it is a public unicast IPv4 or IPv6 address.

    An IPv4-mapped IPv6 address (::ffff:8.8.8.8, as dual-stack servers report IPv4 clients)
    becomes its IPv4 address. A zone index (fe80::1%eth0) only ever marks a link-local one.
    """
    try:
        ip = ipaddress.ip_address(address.strip())
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if not ip.is_global or ip.is_multicast:
        return None
    return str(ip)

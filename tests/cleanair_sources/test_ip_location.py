"""IP address -> country -> the country's capital, or None when an address says nothing."""

from __future__ import annotations

import pytest

from cleanair_core.air.places import IpLocator, Place
from cleanair_core.geo import distance_m
from cleanair_sources.gazetteer import Gazetteer
from cleanair_sources.ip_location import CountryIpLocator


@pytest.fixture(scope="module")
def gazetteer() -> Gazetteer:
    return Gazetteer.load()


@pytest.fixture(scope="module")
def locator(gazetteer: Gazetteer) -> CountryIpLocator:
    return CountryIpLocator(gazetteer)


def capital_place(gazetteer: Gazetteer, cc: str) -> Place:
    capital = gazetteer.capital_of(cc)
    name = gazetteer.country_name(cc)
    assert capital is not None
    assert name is not None
    return Place(name=name, point=capital.point)


@pytest.mark.parametrize(
    ("address", "cc", "country", "capital"),
    [
        ("8.8.8.8", "US", "United States", "Washington"),
        ("81.2.69.160", "GB", "United Kingdom", "London"),
        ("193.166.3.2", "FI", "Finland", "Helsinki"),  # FUNET
        ("2001:4860:4860::8888", "US", "United States", "Washington"),
        ("2a00:1450:4001:82a::200e", "IE", "Ireland", "Dublin"),
        ("::ffff:8.8.8.8", "US", "United States", "Washington"),  # IPv4-mapped, dual-stack
        (" 81.2.69.160 ", "GB", "United Kingdom", "London"),
    ],
)
def test_a_public_address_is_placed_at_its_countrys_capital(
    gazetteer: Gazetteer,
    locator: CountryIpLocator,
    address: str,
    cc: str,
    country: str,
    capital: str,
) -> None:
    port: IpLocator = locator
    place = port.locate(address)
    assert place is not None
    assert place == capital_place(gazetteer, cc)
    assert place.name == country
    capital_city = gazetteer.capital_of(cc)
    assert capital_city is not None
    assert capital_city.name == capital
    assert distance_m(place.point, capital_city.point) == 0


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",  # loopback
        "::1",
        "10.1.2.3",  # private
        "172.16.0.1",
        "192.168.1.10",
        "fd12:3456:789a::1",
        "169.254.10.20",  # link-local
        "fe80::1",
        "fe80::1%eth0",
        "100.64.0.1",  # shared address space (carrier-grade NAT)
        "0.0.0.0",  # unspecified
        "::",
        "192.0.2.1",  # documentation
        "203.0.113.5",
        "2001:db8::1",
        "240.0.0.1",  # reserved
        "255.255.255.255",
        "224.0.0.1",  # multicast
        "ff02::1",
        "::ffff:10.0.0.1",  # a private address, mapped
        "testclient",  # what test clients report
        "unknown",
        "",
        "8.8.8.8:443",  # not an address on its own
        "999.1.1.1",
        "[2001:4860:4860::8888]",
    ],
)
def test_an_address_that_says_nothing_gives_none(locator: CountryIpLocator, address: str) -> None:
    assert locator.locate(address) is None


@pytest.mark.parametrize("code", ["EU", "AP", "ZZ", "AQ", "", None])
def test_a_code_that_is_no_country_with_a_capital_gives_none(
    gazetteer: Gazetteer, code: str | None
) -> None:
    locator = CountryIpLocator(gazetteer, country_code=lambda address: code)
    assert locator.locate("8.8.8.8") is None


def test_the_lookup_sees_the_canonical_address(gazetteer: Gazetteer) -> None:
    seen: list[str] = []

    def lookup(address: str) -> str | None:
        seen.append(address)
        return "fi"

    locator = CountryIpLocator(gazetteer, country_code=lookup)
    assert locator.locate(" ::ffff:81.2.69.160") == capital_place(gazetteer, "FI")
    assert locator.locate("2001:4860:4860:0:0:0:0:8888") == capital_place(gazetteer, "FI")
    assert seen == ["81.2.69.160", "2001:4860:4860::8888"]


def test_the_lookup_is_not_asked_about_private_addresses(gazetteer: Gazetteer) -> None:
    def lookup(address: str) -> str | None:
        raise AssertionError(f"asked about {address}")

    locator = CountryIpLocator(gazetteer, country_code=lookup)
    assert locator.locate("192.168.0.1") is None

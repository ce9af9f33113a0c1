"""Webhook destinations: the URL a user gives, and the addresses its host may resolve to (SSRF)."""

from __future__ import annotations

import ipaddress
from random import Random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cleanair_core.alerts.destinations import (
    DEFAULT_PORTS,
    DestinationPolicy,
    InvalidWebhookUrl,
    IPAddress,
    Refusal,
    Refused,
    parse_networks,
    refusal_of,
)
from cleanair_core.errors import Unprocessable

POLICY = DestinationPolicy()

# Written from the IANA special-purpose registries (and the issue), not from the module.
NOT_GLOBAL_IPV4 = {
    "0.0.0.0/8": Refusal.UNSPECIFIED,
    "10.0.0.0/8": Refusal.PRIVATE,
    "100.64.0.0/10": Refusal.SHARED,
    "127.0.0.0/8": Refusal.LOOPBACK,
    "169.254.0.0/16": Refusal.LINK_LOCAL,
    "172.16.0.0/12": Refusal.PRIVATE,
    "192.0.0.0/24": Refusal.RESERVED,
    "192.0.2.0/24": Refusal.DOCUMENTATION,
    "192.168.0.0/16": Refusal.PRIVATE,
    "198.18.0.0/15": Refusal.RESERVED,
    "198.51.100.0/24": Refusal.DOCUMENTATION,
    "203.0.113.0/24": Refusal.DOCUMENTATION,
    "224.0.0.0/4": Refusal.MULTICAST,
    "240.0.0.0/4": Refusal.RESERVED,
}
NOT_GLOBAL_IPV6 = {
    "::1/128": Refusal.LOOPBACK,
    "::/128": Refusal.UNSPECIFIED,
    "fc00::/7": Refusal.PRIVATE,
    "fe80::/10": Refusal.LINK_LOCAL,
    "ff00::/8": Refusal.MULTICAST,
    "2001:db8::/32": Refusal.DOCUMENTATION,
    "3fff::/20": Refusal.DOCUMENTATION,
    "100::/64": Refusal.RESERVED,
    "2001::/32": Refusal.RESERVED,  # Teredo
}
PUBLIC = ["8.8.8.8", "1.1.1.1", "81.2.69.160", "193.166.3.2", "2001:4860:4860::8888", "2a00::1"]


def ip(text: str) -> IPAddress:
    return ipaddress.ip_address(text)


def mapped(v4: ipaddress.IPv4Address) -> ipaddress.IPv6Address:
    return ipaddress.IPv6Address(f"::ffff:{v4}")


def nat64(v4: ipaddress.IPv4Address) -> ipaddress.IPv6Address:
    return ipaddress.IPv6Address(int(ipaddress.IPv6Address("64:ff9b::")) | int(v4))


def sixtofour(v4: ipaddress.IPv4Address, tail: int = 1) -> ipaddress.IPv6Address:
    return ipaddress.IPv6Address((0x2002 << 112) | (int(v4) << 80) | tail)


def not_global_ipv4() -> st.SearchStrategy[tuple[ipaddress.IPv4Address, Refusal]]:
    return st.sampled_from(sorted(NOT_GLOBAL_IPV4.items())).flatmap(
        lambda item: st.tuples(st.ip_addresses(network=item[0]), st.just(item[1]))
    )


# Addresses -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("address", "refusal"),
    [
        ("127.0.0.1", Refusal.LOOPBACK),
        ("10.1.2.3", Refusal.PRIVATE),
        ("172.31.255.255", Refusal.PRIVATE),
        ("192.168.1.1", Refusal.PRIVATE),
        ("169.254.169.254", Refusal.LINK_LOCAL),  # cloud metadata services
        ("100.100.100.200", Refusal.SHARED),  # another cloud's metadata service
        ("0.0.0.0", Refusal.UNSPECIFIED),
        ("255.255.255.255", Refusal.RESERVED),
        ("224.0.0.1", Refusal.MULTICAST),
        ("::1", Refusal.LOOPBACK),
        ("::", Refusal.UNSPECIFIED),
        ("fd12:3456::1", Refusal.PRIVATE),
        ("fe80::1", Refusal.LINK_LOCAL),
        ("ff02::1", Refusal.MULTICAST),
        ("::ffff:127.0.0.1", Refusal.LOOPBACK),
        ("::ffff:169.254.169.254", Refusal.LINK_LOCAL),
        ("64:ff9b::127.0.0.1", Refusal.LOOPBACK),
        ("64:ff9b::10.0.0.1", Refusal.PRIVATE),
        ("2002:a9fe:a9fe::1", Refusal.LINK_LOCAL),  # 6to4 of 169.254.169.254
        ("2002:7f00:1::", Refusal.LOOPBACK),
        ("::127.0.0.1", Refusal.RESERVED),  # IPv4-compatible, deprecated
        ("64:ff9b:1::1", Refusal.PRIVATE),  # local-use NAT64
    ],
)
def test_not_public_addresses_are_refused_with_their_reason(address: str, refusal: Refusal) -> None:
    assert refusal_of(ip(address)) is refusal
    assert POLICY.check_addresses([ip(address)]) == Refused(refusal, ip(address))


@pytest.mark.parametrize("address", PUBLIC)
def test_public_addresses_and_their_ipv6_forms_are_allowed(address: str) -> None:
    public = ip(address)
    forms = [public]
    if isinstance(public, ipaddress.IPv4Address):
        forms += [mapped(public), nat64(public), sixtofour(public)]
    for form in forms:
        assert refusal_of(form) is None, form
    assert POLICY.check_addresses(forms) is None


@given(not_global_ipv4())
def test_every_not_global_ipv4_address_is_refused_in_every_form(
    item: tuple[ipaddress.IPv4Address, Refusal],
) -> None:
    address, refusal = item
    for form in (address, mapped(address), nat64(address), sixtofour(address)):
        assert refusal_of(form) is refusal, form
        assert POLICY.check_addresses([form]) == Refused(refusal, form)


@given(
    st.sampled_from(sorted(NOT_GLOBAL_IPV6.items())).flatmap(
        lambda item: st.tuples(st.ip_addresses(network=item[0]), st.just(item[1]))
    )
)
def test_every_not_global_ipv6_address_is_refused(
    item: tuple[ipaddress.IPv6Address, Refusal],
) -> None:
    address, refusal = item
    assert refusal_of(address) is refusal


@given(st.ip_addresses())
def test_an_allowed_address_is_one_python_calls_global_and_unicast(address: IPAddress) -> None:
    if refusal_of(address) is None:
        judged = address
        if isinstance(address, ipaddress.IPv6Address):
            embedded = address.ipv4_mapped or address.sixtofour
            if address in ipaddress.IPv6Network("64:ff9b::/96"):
                embedded = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
            judged = embedded or address
            assert address in ipaddress.IPv6Network("2000::/3") or embedded is not None
        assert judged.is_global
        assert not judged.is_multicast
        assert not judged.is_private


@given(st.lists(st.ip_addresses(), min_size=1, max_size=6), st.randoms())
def test_a_host_is_refused_when_any_of_its_addresses_is(
    addresses: list[IPAddress], random: Random
) -> None:
    verdict = POLICY.check_addresses(addresses)
    refused = [(refusal, a) for a in addresses if (refusal := refusal_of(a)) is not None]
    if refused:
        assert verdict == Refused(*refused[0])
    else:
        assert verdict is None
    shuffled = list(addresses)
    random.shuffle(shuffled)
    assert (POLICY.check_addresses(shuffled) is None) == (verdict is None)


@given(not_global_ipv4(), st.sampled_from([ip(a) for a in PUBLIC]))
def test_one_private_address_among_public_ones_refuses_the_host(
    item: tuple[ipaddress.IPv4Address, Refusal], public: IPAddress
) -> None:
    """The DNS trick: a name answering a public and a private address is refused outright."""
    private, refusal = item
    assert POLICY.check_addresses([public, private]) == Refused(refusal, private)


def test_a_host_with_no_address_is_refused() -> None:
    assert POLICY.check_addresses([]) == Refused(Refusal.NO_ADDRESS)


@given(not_global_ipv4())
def test_the_operators_networks_are_allowed_in_every_form(
    item: tuple[ipaddress.IPv4Address, Refusal],
) -> None:
    address, _ = item
    network = ipaddress.IPv4Network(f"{address}/16", strict=False)
    policy = DestinationPolicy(allowed_networks=(network,))
    for form in (address, mapped(address), nat64(address), sixtofour(address)):
        assert policy.check_addresses([form]) is None, form
    outside = ipaddress.IPv4Address(int(network.network_address) ^ (1 << 16))
    refusal = refusal_of(outside)
    if refusal is not None:
        assert policy.check_addresses([address, outside]) == Refused(refusal, outside)


def test_an_allowed_network_allows_only_itself() -> None:
    policy = DestinationPolicy(allowed_networks=parse_networks(["10.0.0.0/8", "fd00::/8"]))
    assert policy.check_addresses([ip("10.1.2.3"), ip("fd00::5")]) is None
    assert policy.check_addresses([ip("10.1.2.3"), ip("127.0.0.1")]) == Refused(
        Refusal.LOOPBACK, ip("127.0.0.1")
    )
    assert policy.check_addresses([ip("192.168.0.1")]) == Refused(
        Refusal.PRIVATE, ip("192.168.0.1")
    )


def test_allowed_networks_are_read_strictly_and_errors_name_the_position() -> None:
    assert parse_networks([" 127.0.0.0/8 ", "::1/128"]) == (
        ipaddress.ip_network("127.0.0.0/8"),
        ipaddress.ip_network("::1/128"),
    )
    for bad in (["10.0.0.0/8", "10.1.2.3/8"], ["10.0.0.0/8", "intranet"]):
        with pytest.raises(ValueError, match=r"^allowed network 2 is not") as raised:
            parse_networks(bad)
        assert bad[1] not in str(raised.value)


# URLs ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("url", "host", "port", "target"),
    [
        ("https://hooks.example.com/cleanair", "hooks.example.com", 443, "/cleanair"),
        ("https://Hooks.Example.COM", "hooks.example.com", 443, "/"),
        (
            "https://hooks.example.com:8443/a?token=x&b=1",
            "hooks.example.com",
            8443,
            "/a?token=x&b=1",
        ),
        ("https://203.0.113.9/h", "203.0.113.9", 443, "/h"),  # refused later, by address
        ("https://[2001:DB8::1]:443/h", "2001:db8::1", 443, "/h"),
        ("https://xn--bcher-kva.example/", "xn--bcher-kva.example", 443, "/"),
    ],
)
def test_a_valid_url_is_parsed(url: str, host: str, port: int, target: str) -> None:
    parsed = POLICY.validate_url(url)
    assert (parsed.scheme, parsed.host, parsed.port, parsed.target) == ("https", host, port, target)


def test_the_authority_and_the_text_keep_a_port_only_when_not_the_schemes() -> None:
    assert str(POLICY.validate_url("https://a.example:443/x")) == "https://a.example/x"
    assert POLICY.validate_url("https://a.example:8443/").authority == "a.example:8443"
    assert POLICY.validate_url("https://[::1]:8443/").authority == "[::1]:8443"
    assert POLICY.validate_url("https://[::1]/").address_literal == ip("::1")
    assert POLICY.validate_url("https://a.example/").address_literal is None


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("http://hooks.example.com/", "must use https"),
        ("ftp://hooks.example.com/", "must use https"),
        ("hooks.example.com/path", "must use https"),
        ("https://user:pass@hooks.example.com/", "must not contain a user name or password"),
        ("https://user@hooks.example.com/", "must not contain a user name or password"),
        ("https:///path", "must name a host"),
        ("https://hooks.example.com:22/", "must use one of the ports 80, 443, 8080, 8443"),
        ("https://hooks.example.com:0/", "must use one of the ports 80, 443, 8080, 8443"),
        ("https://hooks.example.com:70000/", "must have a port between 1 and 65535"),
        ("https://hooks.example.com:x/", "must have a port between 1 and 65535"),
        ("https://hooks.example.com/#frag", "must not contain a fragment"),
        ("https://hooks.example.com/ x", "must not contain spaces, control characters"),
        ("https://hooks.example.com/\nx", "must not contain spaces, control characters"),
        ("https://hooks.example.com\\@evil.example/", "must not contain spaces, control"),
        ("https://bücher.example/", "must be ASCII"),
        ("https://127.1/", "must name a host or an address"),
        ("https://0x7f.0.0.1/", "must name a host or an address"),
        ("https://2130706433/", "must name a host or an address"),
        ("https://0177.0.0.1/", "must name a host or an address"),
        ("https://-bad.example/", "must name a host or an address"),
        ("https://bad..example/", "must name a host or an address"),
        ("https://under_score.example/", "must name a host or an address"),
        ("https://%31%32%37.0.0.1/", "must name a host or an address"),
        ("https://[::1/", "must name a host or an address"),
        ("https://[fe80::1%25eth0]/", "must not name an IPv6 zone"),
        ("https://" + "a" * 64 + ".example/", "must name a host or an address"),
    ],
)
def test_an_invalid_url_names_the_rule_it_breaks(url: str, message: str) -> None:
    with pytest.raises(InvalidWebhookUrl) as raised:
        POLICY.validate_url(url, field="delivery.url")
    (violation,) = raised.value.violations
    assert violation.field == "delivery.url"
    assert violation.rule == "format"
    assert violation.message.startswith(message)
    assert isinstance(raised.value, Unprocessable)  # a 422 like every other validation error


def test_a_url_over_the_length_bound_is_too_long() -> None:
    url = "https://hooks.example.com/" + "a" * 2048
    with pytest.raises(InvalidWebhookUrl) as raised:
        POLICY.validate_url(url)
    assert raised.value.violations[0].rule == "too_long"
    assert raised.value.violations[0].message == "must be at most 2048 characters"
    assert DestinationPolicy(max_url_length=5000).validate_url(url).target.endswith("a")


def test_http_and_other_ports_are_the_operators_to_allow() -> None:
    policy = DestinationPolicy(allow_http=True, allowed_ports=None)
    parsed = policy.validate_url("http://127.0.0.1:5555/hook")
    assert (parsed.scheme, parsed.port, str(parsed)) == ("http", 5555, "http://127.0.0.1:5555/hook")
    assert policy.validate_url("http://a.example/").port == 80
    with pytest.raises(InvalidWebhookUrl, match="must use https or http"):
        policy.validate_url("ftp://a.example/")
    with pytest.raises(InvalidWebhookUrl, match="between 1 and 65535"):
        policy.validate_url("http://a.example:0/")
    assert {80, 443, 8080, 8443} == DEFAULT_PORTS


SECRET = st.text(alphabet="ABCDEFGHJKLMNPQRSTUVWXYZ", min_size=16, max_size=24)


@given(
    SECRET,
    st.sampled_from(
        [
            "http://hooks.example.com/h?token={}",
            "https://{}:pw@hooks.example.com/",
            "https://user:{}@hooks.example.com/",
            "https://hooks.example.com:22/{}",
            "https://hooks.example.com/h#{}",
            "https://{}.127.1/",
            "https://{}/ x",
            "https://[{}]/",
            "https://hooks.example.com/{}" + "x" * 2048,
            "gopher://{}",
            "https://{}ü.example/",
        ]
    ),
)
def test_a_url_error_never_repeats_the_url(secret: str, template: str) -> None:
    url = template.format(secret)
    with pytest.raises(InvalidWebhookUrl) as raised:
        POLICY.validate_url(url)
    error = raised.value
    shown = [str(error), error.detail, repr(error.args)] + [
        v.message + v.field + v.rule for v in error.violations
    ]
    assert not any(secret in text or secret.lower() in text for text in shown)


@given(
    st.lists(
        st.from_regex(r"[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?", fullmatch=True), min_size=1, max_size=4
    ),
    st.sampled_from(sorted(DEFAULT_PORTS)),
    st.from_regex(r"(/[A-Za-z0-9._~%!$&'()*+,;=:@-]*){0,3}", fullmatch=True),
    st.from_regex(r"[A-Za-z0-9=&%_-]*", fullmatch=True),
)
def test_valid_urls_round_trip(labels: list[str], port: int, path: str, query: str) -> None:
    host = ".".join([*labels, "example"])
    parsed = POLICY.validate_url(f"https://{host}:{port}{path}?{query}")
    assert parsed.host == host
    assert parsed.port == port
    assert parsed.target == (path or "/") + (f"?{query}" if query else "")
    assert POLICY.validate_url(str(parsed)) == parsed

"""Where a webhook may be sent: the URL a user gives, and the addresses its host resolves to.

A webhook makes the service send a request to a place the user chooses, so without rules a
user could aim it at the service's own neighbourhood (a database on 127.0.0.1, a cloud
metadata service on 169.254.169.254, an intranet on 10/8): server-side request forgery.
Two checks stop that, both pure:

- `DestinationPolicy.validate_url` takes the URL as the user gives it: https (http only if the
  operator allows it), a host name or an address literal, no user name or password, an allowed
  port, no fragment, at most `max_url_length` characters of ASCII. Its errors name the rule
  broken and never repeat the URL, which may carry a secret in its query.
- `DestinationPolicy.check_addresses` takes every address the host resolved to (the sender
  resolves it itself, just before connecting, and connects only to an address it checked) and
  refuses the lot if ANY is not a public unicast address, unless it lies in a network the
  operator allows (a receiver on 10.0.0.0/8 inside a company, 127.0.0.0/8 in tests). An IPv6
  address that stands for an IPv4 one is judged by that IPv4 address: IPv4-mapped
  (::ffff:127.0.0.1), NAT64 (64:ff9b::/96, what DNS64 answers for an IPv4-only host on an
  IPv6-only network) and 6to4 (2002::/16).

The refused ranges are listed here explicitly (IANA's special-purpose registries), and
`ipaddress`'s `is_global` is asked as well, so a range either of them knows is refused whatever
the Python version's own list says.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Sequence
from enum import StrEnum
from urllib.parse import urlsplit

import attrs

from cleanair_core.errors import Unprocessable, Violation

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

#: Ports a webhook may use unless the operator says otherwise: the web's usual ones. A port
#: bound keeps a webhook off a public host's other services (mail on 25, SSH on 22).
DEFAULT_PORTS = frozenset({443, 8443, 80, 8080})
#: Long enough for any real receiver's URL with a token in its query; a bound on what is stored.
MAX_URL_LENGTH = 2048


class Refusal(StrEnum):
    """Why an address may not receive a webhook, in words fit to show the subscription's owner
    (the address itself is left out: it may name a private network)."""

    LOOPBACK = "loopback"
    PRIVATE = "private"
    LINK_LOCAL = "link-local"
    UNSPECIFIED = "unspecified"
    MULTICAST = "multicast"
    RESERVED = "reserved"
    SHARED = "shared"  # 100.64.0.0/10, carrier-grade NAT
    DOCUMENTATION = "documentation"
    NOT_GLOBAL = "not-global"  # anything else `ipaddress` does not call global
    NO_ADDRESS = "no-address"  # the host resolved to nothing


def _networks(*pairs: tuple[str, Refusal]) -> tuple[tuple[IPNetwork, Refusal], ...]:
    return tuple((ipaddress.ip_network(cidr), refusal) for cidr, refusal in pairs)


# First match wins; IANA IPv4 and IPv6 Special-Purpose Address Registries.
_IPV4_REFUSED = _networks(
    ("0.0.0.0/8", Refusal.UNSPECIFIED),  # "this network"
    ("10.0.0.0/8", Refusal.PRIVATE),
    ("100.64.0.0/10", Refusal.SHARED),
    ("127.0.0.0/8", Refusal.LOOPBACK),
    ("169.254.0.0/16", Refusal.LINK_LOCAL),
    ("172.16.0.0/12", Refusal.PRIVATE),
    ("192.0.0.0/24", Refusal.RESERVED),  # IETF protocol assignments
    ("192.0.2.0/24", Refusal.DOCUMENTATION),
    ("192.88.99.0/24", Refusal.RESERVED),  # the retired 6to4 relay anycast
    ("192.168.0.0/16", Refusal.PRIVATE),
    ("198.18.0.0/15", Refusal.RESERVED),  # benchmarking
    ("198.51.100.0/24", Refusal.DOCUMENTATION),
    ("203.0.113.0/24", Refusal.DOCUMENTATION),
    ("224.0.0.0/4", Refusal.MULTICAST),
    ("240.0.0.0/4", Refusal.RESERVED),  # and the broadcast address 255.255.255.255
)
_IPV6_REFUSED = _networks(
    ("::/128", Refusal.UNSPECIFIED),
    ("::1/128", Refusal.LOOPBACK),
    ("64:ff9b:1::/48", Refusal.PRIVATE),  # local-use NAT64
    ("100::/64", Refusal.RESERVED),  # discard-only
    ("2001::/23", Refusal.RESERVED),  # IETF protocol assignments, Teredo among them
    ("2001:db8::/32", Refusal.DOCUMENTATION),
    ("3fff::/20", Refusal.DOCUMENTATION),
    ("fc00::/7", Refusal.PRIVATE),  # unique local
    ("fe80::/10", Refusal.LINK_LOCAL),
    ("fec0::/10", Refusal.PRIVATE),  # the retired site-local
    ("ff00::/8", Refusal.MULTICAST),
)
# Every public IPv6 unicast address lies here; anything outside it (and outside the embedding
# prefixes below) is unallocated or special.
_IPV6_GLOBAL_UNICAST = ipaddress.IPv6Network("2000::/3")
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")


def refusal_of(address: IPAddress) -> Refusal | None:
    """Why `address` may not receive a webhook, or None for a public unicast address.

    An IPv6 address standing for an IPv4 one (IPv4-mapped, NAT64 64:ff9b::/96, 6to4) is judged
    by that IPv4 address too.
    """
    if isinstance(address, ipaddress.IPv4Address):
        return _own_refusal(address)
    if address.ipv4_mapped is not None:
        return _own_refusal(address.ipv4_mapped)
    if address in _NAT64:
        # The prefix itself is outside 2000::/3 but is how an IPv6-only network reaches the
        # public IPv4 internet: only the address it carries counts.
        return _own_refusal(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    if address.sixtofour is not None:
        return _own_refusal(address.sixtofour) or _own_refusal(address)
    return _own_refusal(address)


def _own_refusal(address: IPAddress) -> Refusal | None:
    table = _IPV4_REFUSED if isinstance(address, ipaddress.IPv4Address) else _IPV6_REFUSED
    for network, refusal in table:
        if address in network:
            return refusal
    if isinstance(address, ipaddress.IPv6Address) and address not in _IPV6_GLOBAL_UNICAST:
        return Refusal.RESERVED
    if not address.is_global:
        return Refusal.NOT_GLOBAL
    return None


def _embedded_ipv4(address: IPAddress) -> ipaddress.IPv4Address | None:
    if isinstance(address, ipaddress.IPv4Address):
        return None
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return address.sixtofour


@attrs.frozen
class Refused:
    """A destination refused: `address` is the first address found at fault (for the
    operator's log, not the owner's eyes), `reason` why."""

    reason: Refusal
    address: IPAddress | None = None


class InvalidWebhookUrl(Unprocessable):
    """A webhook URL that breaks one of `DestinationPolicy`'s rules: a 422 naming the rule
    (`format` or `too_long`) on `field`, never the URL."""

    def __init__(self, message: str, *, rule: str = "format", field: str = "url") -> None:
        super().__init__(violations=[Violation(field, rule, message)])
        self.rule = rule
        self.message = message

    def __str__(self) -> str:
        return f"{self.detail}: {self.message}"


@attrs.frozen
class WebhookUrl:
    """A webhook URL that passed `DestinationPolicy.validate_url`: `host` in lower case (an
    address literal without brackets), `port` explicit, `target` the path and query to send
    (at least "/")."""

    scheme: str
    host: str
    port: int
    target: str

    @property
    def address_literal(self) -> IPAddress | None:
        """The host as an address when the URL names one, not a name to resolve."""
        try:
            return ipaddress.ip_address(self.host)
        except ValueError:
            return None

    @property
    def authority(self) -> str:
        """host[:port] as the Host header carries it (the port only when not the scheme's)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        default = 443 if self.scheme == "https" else 80
        return host if self.port == default else f"{host}:{self.port}"

    def __str__(self) -> str:
        return f"{self.scheme}://{self.authority}{self.target}"


_LABEL = re.compile(r"(?!-)[a-z0-9-]{1,63}(?<!-)")
_NUMERIC_LABEL = re.compile(r"(0x[0-9a-f]*|[0-9]+)")
_FORBIDDEN_CHARACTERS = re.compile(r"[\x00-\x20\x7f\\]")


def _valid_host(host: str, *, bracketed: bool) -> str:
    """The host in canonical form, or ValueError with the rule it breaks."""
    if bracketed:
        try:
            address = ipaddress.IPv6Address(host)
        except ValueError:
            raise ValueError("must name a host or an address") from None
        if address.scope_id:
            raise ValueError("must not name an IPv6 zone")
        return str(address)
    try:
        return str(ipaddress.IPv4Address(host))
    except ValueError:
        pass
    labels = host.split(".")
    # A name ending in a number is an IPv4 address in a form resolvers accept and browsers
    # rewrite (127.1, 0x7f.0.0.1, 2130706433): refused as ambiguous, not guessed at.
    if (
        len(host) > 253
        or not all(_LABEL.fullmatch(label) for label in labels)
        or _NUMERIC_LABEL.fullmatch(labels[-1])
    ):
        raise ValueError("must name a host or an address")
    return host


def parse_networks(cidrs: Iterable[str]) -> tuple[IPNetwork, ...]:
    """The operator's allowed networks from CIDR texts ("10.0.0.0/8", "fd00::/8"); a text that
    is not a network (or has host bits set, likely a typo) raises ValueError naming its
    position."""
    networks: list[IPNetwork] = []
    for position, cidr in enumerate(cidrs, start=1):
        try:
            networks.append(ipaddress.ip_network(cidr.strip(), strict=True))
        except ValueError:
            raise ValueError(f"allowed network {position} is not a network in CIDR form") from None
    return tuple(networks)


@attrs.frozen
class DestinationPolicy:
    """The operator's rules for webhook destinations.

    `allow_http` lets plain http through (a test receiver, a receiver inside the operator's own
    network); `allowed_ports` None allows every port; `allowed_networks` are networks whose
    addresses are allowed although not public.
    """

    allow_http: bool = False
    allowed_ports: frozenset[int] | None = DEFAULT_PORTS
    allowed_networks: tuple[IPNetwork, ...] = ()
    max_url_length: int = MAX_URL_LENGTH

    def validate_url(self, text: str, *, field: str = "url") -> WebhookUrl:
        """The URL `text` as a `WebhookUrl`, or `InvalidWebhookUrl` naming the first rule it
        breaks (on `field`)."""

        def invalid(message: str, rule: str = "format") -> InvalidWebhookUrl:
            return InvalidWebhookUrl(message, rule=rule, field=field)

        if len(text) > self.max_url_length:
            raise invalid(f"must be at most {self.max_url_length} characters", "too_long")
        if not text.isascii():
            raise invalid("must be ASCII (an international host name in its xn-- form)")
        if _FORBIDDEN_CHARACTERS.search(text):
            raise invalid("must not contain spaces, control characters or backslashes")
        try:
            parts = urlsplit(text)
        except ValueError:  # an unclosed or invalid [IPv6] literal
            raise invalid("must name a host or an address") from None
        schemes = ("https", "http") if self.allow_http else ("https",)
        if parts.scheme.lower() not in schemes:
            raise invalid("must use " + " or ".join(schemes))
        if "@" in parts.netloc:
            raise invalid("must not contain a user name or password")
        if parts.fragment or text.endswith("#"):
            raise invalid("must not contain a fragment")
        try:
            host, port = parts.hostname, parts.port
        except ValueError:
            raise invalid("must have a port between 1 and 65535") from None
        if not host:
            raise invalid("must name a host")
        try:
            host = _valid_host(host, bracketed=parts.netloc.startswith("["))
        except ValueError as error:
            raise invalid(str(error)) from None
        scheme = parts.scheme.lower()
        port = port if port is not None else (443 if scheme == "https" else 80)
        if port == 0 or (self.allowed_ports is not None and port not in self.allowed_ports):
            raise invalid(self._port_rule())
        target = parts.path or "/"
        if parts.query:
            target += "?" + parts.query
        return WebhookUrl(scheme=scheme, host=host, port=port, target=target)

    def _port_rule(self) -> str:
        if self.allowed_ports is None:
            return "must have a port between 1 and 65535"
        ports = ", ".join(str(port) for port in sorted(self.allowed_ports))
        return f"must use one of the ports {ports}"

    def check_addresses(self, addresses: Sequence[IPAddress]) -> Refused | None:
        """None when every one of `addresses` (all a host resolved to) may receive a webhook;
        else the first refused, with why. An empty list is refused: there is nothing checked to
        connect to."""
        if not addresses:
            return Refused(Refusal.NO_ADDRESS)
        for address in addresses:
            if self._allowed_network(address):
                continue
            refusal = refusal_of(address)
            if refusal is not None:
                return Refused(refusal, address)
        return None

    def _allowed_network(self, address: IPAddress) -> bool:
        candidates = [address]
        embedded = _embedded_ipv4(address)
        if embedded is not None:
            candidates.append(embedded)
        return any(
            candidate.version == network.version and candidate in network
            for candidate in candidates
            for network in self.allowed_networks
        )

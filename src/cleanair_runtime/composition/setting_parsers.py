"""Parsers of the settings' values: each turns a variable's text into its value, or raises
ValueError worded for the start-up message. Ranges are not theirs to check: a row's `Bounds`
does it (`cleanair_runtime.composition.settings`).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from pathlib import Path

from cleanair_core.access.tokens import Environment
from cleanair_core.alerts.destinations import IPNetwork, parse_networks
from cleanair_http.app_settings import ProxyNetwork

#: (south, west, north, east) in degrees.
Box = tuple[float, float, float, float]


def environment(raw: str) -> Environment:
    """`tst` or `pdn`."""
    try:
        return Environment(raw)
    except ValueError:
        raise ValueError("must be tst or pdn") from None


def whole(raw: str) -> int:
    """A whole number."""
    try:
        return int(raw)
    except ValueError:
        raise ValueError("must be a whole number") from None


def seconds(raw: str) -> float:
    """A number of seconds."""
    try:
        return float(raw)
    except ValueError:
        raise ValueError("must be a number of seconds") from None


#: URL schemes of a PostgreSQL database (anything else is a SQLite file path).
POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def database(raw: str) -> Path | str:
    """A SQLite file path, or a PostgreSQL URL kept as written (a path would fold its `//`)."""
    if raw.startswith(POSTGRES_SCHEMES):
        return raw
    return Path(raw)


def secret(raw: str) -> bytes:
    """A key of at least 32 characters, as bytes."""
    # Never echo the value: it is the server's key.
    if len(raw) < 32:
        raise ValueError("must be at least 32 characters")
    return raw.encode()


def networks(raw: str) -> tuple[ProxyNetwork, ...]:
    """IP addresses or networks, comma- or space-separated."""
    networks = []
    for part in raw.replace(",", " ").split():
        try:
            networks.append(ipaddress.ip_network(part, strict=False))
        except ValueError:
            raise ValueError(f"{part!r} is not an IP address or network") from None
    return tuple(networks)


def choice(*allowed: str) -> Callable[[str], str]:
    """A parser that takes one of `allowed`, in any case."""

    def parse(raw: str) -> str:
        value = raw.strip().lower()
        if value not in allowed:
            raise ValueError("must be one of " + ", ".join(allowed))
        return value

    return parse


def url(raw: str) -> str:
    """An http(s) URL without its trailing slash."""
    url = raw.strip().rstrip("/")
    if not url.startswith(("http://", "https://")) or len(url) < len("http://x"):
        raise ValueError("must be an http:// or https:// URL")
    return url


def origins(raw: str) -> tuple[str, ...]:
    """Browser origins, exactly as a browser sends them: `scheme://host[:port]`, no path."""
    origins = []
    for part in raw.split(","):
        origin = part.strip()
        if not origin:
            continue
        scheme, sep, host = origin.partition("://")
        if (
            scheme not in ("http", "https")
            or not sep
            or not host
            or any(c in host for c in "/?#*@ ")
            or origin != origin.lower()
        ):
            # Echoing the entry is safe: it is the operator's own configuration, not a secret.
            raise ValueError(
                f"{origin!r} is not an origin: write each as scheme://host[:port] in lower "
                "case, with no path and no wildcard"
            )
        origins.append(origin)
    return tuple(origins)


def box(raw: str) -> Box:
    """`south,west,north,east` in degrees."""
    parts = raw.split(",")
    try:
        south, west, north, east = (float(part) for part in parts)
    except ValueError:
        raise ValueError("must be four numbers: south,west,north,east (degrees)") from None
    if not (-90 <= south < north <= 90 and -180 <= west < east <= 180):
        raise ValueError(
            "must be south,west,north,east with south < north within -90..90 and "
            "west < east within -180..180"
        )
    return (south, west, north, east)


def flag(raw: str) -> bool:
    """true/false, yes/no, on/off or 1/0."""
    value = raw.strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off"}:
        return False
    raise ValueError("must be true or false")


def port(raw: str) -> int:
    """A port number, 1 to 65535."""
    # Checked here rather than by `Bounds`: the setting is unset by default, not a number.
    port = whole(raw)
    if not 1 <= port <= 65535:
        raise ValueError("must be a port number, 1 to 65535")
    return port


def host(raw: str) -> str:
    """An IP address or host name."""
    host = raw.strip()
    if not host or any(c.isspace() for c in host):
        raise ValueError("must be an IP address or a host name")
    return host


def webhook_networks(raw: str) -> tuple[IPNetwork, ...]:
    """CIDRs alert webhooks may reach although not public."""
    # Strict, unlike the trusted proxies: a CIDR with host bits set is likely a typo, and
    # here it would open a network to the service's own requests.
    return parse_networks(part for part in raw.replace(",", " ").split())


def webhook_ports(raw: str) -> frozenset[int] | None:
    """Port numbers, or `any` (None)."""
    if raw.strip().lower() == "any":
        return None
    ports = frozenset(port(part) for part in raw.replace(",", " ").split())
    if not ports:
        raise ValueError("must be port numbers, comma-separated, or any")
    return ports


def log_level(raw: str) -> str:
    """A log level, in upper case."""
    level = raw.upper()
    if level not in {"DEBUG", "INFO", "WARNING", "ERROR"}:
        raise ValueError("must be DEBUG, INFO, WARNING or ERROR")
    return level

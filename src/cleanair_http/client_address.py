"""The client's address, honouring X-Forwarded-For only from trusted proxies."""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from typing import Any

from litestar.connection import ASGIConnection

from cleanair_http.app_settings import ProxyNetwork


def _trusted(address: str, proxies: Sequence[ProxyNetwork]) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in network for network in proxies)


def client_address(
    connection: ASGIConnection[Any, Any, Any, Any], proxies: Sequence[ProxyNetwork]
) -> str:
    """The peer address, or, when the peer is a trusted proxy, the nearest untrusted hop."""
    peer = connection.client.host if connection.client else "unknown"
    if not proxies or not _trusted(peer, proxies):
        return peer
    # Every line of the header, in order: a proxy may add a line of its own rather than
    # append to the client's, and the first line alone would be the client's own words.
    forwarded = ",".join(connection.headers.getall("x-forwarded-for", []))
    hops = [hop.strip() for hop in forwarded.split(",") if hop.strip()]
    # Walk from the nearest hop outwards; the first address not ours is the client. Anything
    # further left was written by the client itself and cannot be trusted.
    for hop in reversed(hops):
        if not _trusted(hop, proxies):
            return hop
    return hops[0] if hops else peer

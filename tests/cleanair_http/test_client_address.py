"""X-Forwarded-For is honoured only from configured trusted proxies."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import pytest
from litestar import Request
from litestar.types import HTTPScope

from cleanair_http.app_settings import ProxyNetwork
from cleanair_http.client_address import client_address
from cleanair_runtime.composition.settings import Settings


def request_from(peer: str, forwarded: str | None) -> Request[Any, Any, Any]:
    headers = [] if forwarded is None else [(b"x-forwarded-for", forwarded.encode())]
    scope: dict[str, Any] = {
        "type": "http",
        "method": "POST",
        "path": "/",
        "raw_path": b"/",
        "query_string": b"",
        "headers": headers,
        "client": (peer, 40000),
        "server": ("127.0.0.1", 8000),
        "scheme": "http",
        "root_path": "",
        "app": None,
        "state": {},
    }
    # Only the keys a Request reads; a whole HTTPScope has a dozen more nothing here uses.
    return Request(cast("HTTPScope", scope))


PROXIES = Settings.from_env({"CLEANAIR_TRUSTED_PROXIES": "10.0.0.0/8, fd00::/8"}).trusted_proxies


@pytest.mark.parametrize(
    ("peer", "forwarded", "proxies", "expected"),
    [
        ("198.51.100.4", "203.0.113.7", (), "198.51.100.4"),  # no proxies configured
        ("198.51.100.4", "203.0.113.7", PROXIES, "198.51.100.4"),  # peer is not a proxy
        ("10.1.2.3", "203.0.113.7", PROXIES, "203.0.113.7"),
        ("10.1.2.3", "1.1.1.1, 203.0.113.7, 10.9.9.9", PROXIES, "203.0.113.7"),  # spoofed left
        ("10.1.2.3", None, PROXIES, "10.1.2.3"),
        ("fd00::1", "2001:db8::5", PROXIES, "2001:db8::5"),
    ],
)
def test_client_address(
    peer: str, forwarded: str | None, proxies: Sequence[ProxyNetwork], expected: str
) -> None:
    assert client_address(request_from(peer, forwarded), proxies) == expected


def test_every_line_of_the_header_counts_in_order() -> None:
    # The client sent its own line; the trusted proxy added another (HAProxy's forwardfor).
    scope = request_from("10.1.2.3", None).scope
    request: Request[Any, Any, Any] = Request(
        {
            **scope,
            "headers": [
                (b"x-forwarded-for", b"198.51.100.7"),
                (b"x-forwarded-for", b"203.0.113.9"),
            ],
        }
    )
    assert client_address(request, PROXIES) == "203.0.113.9"


def test_bad_proxy_settings_fail_clearly() -> None:
    from cleanair_runtime.composition.settings import SettingsError

    with pytest.raises(SettingsError, match="CLEANAIR_TRUSTED_PROXIES"):
        Settings.from_env({"CLEANAIR_TRUSTED_PROXIES": "not-an-ip"})

"""The server's secret key and the keyed hashes made with it (tokens, pairing codes, BSSIDs).

Shared by the access rules (tokens, pairing codes) and the air rules (imported access points),
so it sits outside both areas.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

import attrs

_MIN_KEY_BYTES = 32


@attrs.frozen(repr=False)
class TokenKeys:
    """The server's secret key for keyed hashes of tokens and pairing codes."""

    key: bytes = attrs.field()

    @key.validator
    def _long_enough(self, _: object, value: bytes) -> None:
        if len(value) < _MIN_KEY_BYTES:
            raise ValueError(f"the server key must be at least {_MIN_KEY_BYTES} bytes")

    def __repr__(self) -> str:  # never show the key in logs or tracebacks
        return "TokenKeys(<hidden>)"

    def hash_token(self, token: str) -> str:
        return self._mac(b"token:", token)

    def hash_pairing_code(self, code: str) -> str:
        return self._mac(b"pairing-code:", code)

    def hash_bssid(self, normalised_mac: str) -> str:
        """The stored form of an imported access point's BSSID (normalise it first)."""
        return self._mac(b"bssid:", normalised_mac)

    def _mac(self, domain: bytes, value: str) -> str:
        return hmac.new(self.key, domain + value.encode(), hashlib.sha256).hexdigest()


def generate_key() -> bytes:
    """A fresh server key."""
    return secrets.token_bytes(_MIN_KEY_BYTES)

"""Bearer tokens: `<prefix>_<env>_<secret>`, stored only as a keyed hash.

The secret part carries 256 random bits. The server keeps HMAC-SHA256(server key, token);
the key lives outside the database, so a stolen database yields neither tokens nor a way to
test guesses offline.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from enum import StrEnum

import attrs

TOKEN_PREFIX = "ca"  # noqa: S105 - a public marker, not a secret
_SECRET = re.compile(r"^[A-Za-z0-9_-]{43}$")
_MIN_KEY_BYTES = 32


class Environment(StrEnum):
    TEST = "tst"
    PRODUCTION = "pdn"


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


def issue_token(environment: Environment) -> str:
    """A new raw token for `environment`; show it once, store only its hash."""
    return f"{TOKEN_PREFIX}_{environment.value}_{secrets.token_urlsafe(32)}"


def token_environment(token: str) -> Environment | None:
    """The environment a well-formed token names, or None when the token is malformed."""
    parts = token.split("_", 2)
    if len(parts) != 3 or parts[0] != TOKEN_PREFIX or not _SECRET.fullmatch(parts[2]):
        return None
    try:
        return Environment(parts[1])
    except ValueError:
        return None


def same_hash(a: str, b: str) -> bool:
    """Constant-time comparison of two hex digests."""
    return hmac.compare_digest(a.encode(), b.encode())

"""Bearer tokens: `<prefix>_<env>_<secret>`, stored only as a keyed hash.

The secret part carries 256 random bits. The server keeps HMAC-SHA256(server key, token);
the key lives outside the database, so a stolen database yields neither tokens nor a way to
test guesses offline.
"""

from __future__ import annotations

import hmac
import re
import secrets
from enum import StrEnum

TOKEN_PREFIX = "ca"  # noqa: S105 - a public marker, not a secret
_SECRET = re.compile(r"^[A-Za-z0-9_-]{43}$")


class Environment(StrEnum):
    TEST = "tst"
    PRODUCTION = "pdn"


_ENVIRONMENTS = {environment.value: environment for environment in Environment}


def issue_token(environment: Environment) -> str:
    """A new raw token for `environment`; show it once, store only its hash."""
    return f"{TOKEN_PREFIX}_{environment.value}_{secrets.token_urlsafe(32)}"


def token_environment(token: str) -> Environment | None:
    """The environment a well-formed token names, or None when the token is malformed."""
    parts = token.split("_", 2)
    if len(parts) != 3 or parts[0] != TOKEN_PREFIX or not _SECRET.fullmatch(parts[2]):
        return None
    # A dict rather than `Environment(...)`: the enum's call is Python, on every request.
    return _ENVIRONMENTS.get(parts[1])


def same_hash(a: str, b: str) -> bool:
    """Constant-time comparison of two hex digests."""
    return hmac.compare_digest(a.encode(), b.encode())

"""Pairing codes: 6 digits from a CSPRNG, valid 60 s, single use, redeemed atomically."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Protocol

import attrs

PAIRING_CODE_TTL = timedelta(seconds=60)
CODE_DIGITS = 6


@attrs.frozen
class PairingCode:
    """A stored pairing code; only the keyed hash of the digits is kept."""

    code_hash: str
    user: str
    created_at: datetime
    expires_at: datetime


def new_code(randbelow: Callable[[int], int] = secrets.randbelow) -> str:
    """Six decimal digits, uniformly drawn (leading zeros kept)."""
    return f"{randbelow(10**CODE_DIGITS):0{CODE_DIGITS}d}"


class PairingCodeStore(Protocol):
    """Storage port for pairing codes."""

    def add_pairing_code(self, code: PairingCode, now: datetime) -> bool:
        """Insert; False when a live code with the same hash exists (the caller draws again).

        Dead codes with the same hash are replaced; adapters may prune expired codes here.
        """

    def redeem_pairing_code(self, code_hash: str, now: datetime) -> str | None:
        """Atomically mark a live code used and return its user; None when not redeemable.

        Of two concurrent redemptions of one code exactly one gets the user.
        """

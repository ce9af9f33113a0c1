"""Owners of connections: users (premium or not) and partners (active or not)."""

from __future__ import annotations

import re
from datetime import datetime
from enum import StrEnum
from typing import Protocol

import attrs

# Only ever used with fullmatch: with `match`, `$` also matches before a trailing newline,
# which let "bob\n" in beside "bob".
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@+-]{0,99}")


class OwnerKind(StrEnum):
    USER = "user"
    PARTNER = "partner"


@attrs.frozen
class Owner:
    """Who owns a connection, and so whose credit pool it draws from."""

    kind: OwnerKind
    name: str

    @property
    def key(self) -> str:
        """Stable key of the owner's credit pool and plans, e.g. `user:alice`."""
        return f"{self.kind.value}:{self.name}"


@attrs.frozen
class User:
    name: str
    premium: bool
    created_at: datetime


@attrs.frozen
class Partner:
    name: str
    active: bool
    created_at: datetime


def validate_account_name(name: str) -> str:
    """Account names are operator input; keep them printable and unambiguous."""
    if not _NAME.fullmatch(name):
        raise ValueError(
            "a name is 1 to 100 characters of letters, digits and . _ @ + -, "
            "starting with a letter or digit"
        )
    return name


class AccountStore(Protocol):
    """Storage port for users and partners."""

    def add_user(self, user: User) -> bool:
        """Insert; False when a user of that name exists."""

    def get_user(self, name: str) -> User | None: ...

    def list_users(self) -> list[User]:
        """Every user, by name (code point order)."""

    def set_premium(self, name: str, premium: bool) -> bool:
        """False when no such user."""

    def add_partner(self, partner: Partner) -> bool:
        """Insert; False when a partner of that name exists."""

    def get_partner(self, name: str) -> Partner | None: ...

    def list_partners(self) -> list[Partner]:
        """Every partner, active or not, by name (code point order)."""

    def set_partner_active(self, name: str, active: bool) -> bool:
        """False when no such partner."""

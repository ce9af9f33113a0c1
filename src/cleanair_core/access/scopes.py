"""Scopes: the fixed capabilities of a connection."""

from __future__ import annotations

from enum import StrEnum


class Scope(StrEnum):
    AQ_READ = "aq:read"
    AQ_ROUTES = "aq:routes"
    ROUTES_PLAN = "routes:plan"


#: What a connection created by pairing may do (contract 3.2).
USER_SCOPES: frozenset[Scope] = frozenset(Scope)


def parse_scopes(values: object) -> frozenset[Scope]:
    """Parse scope names, rejecting unknown ones with a ValueError naming the valid values."""
    if isinstance(values, str):
        values = values.split()
    if not isinstance(values, (list, tuple, set, frozenset)):
        raise ValueError("scopes must be a list of names")
    scopes: set[Scope] = set()
    for value in values:
        try:
            scopes.add(Scope(value))
        except ValueError:
            valid = ", ".join(s.value for s in Scope)
            raise ValueError(f"unknown scope (valid: {valid})") from None
    return frozenset(scopes)


def format_scopes(scopes: frozenset[Scope]) -> list[str]:
    """Scopes in a stable order (the enum's), as strings."""
    return [s.value for s in Scope if s in scopes]

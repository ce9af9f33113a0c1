"""msgspec structs of the HTTP edge (contract section 2). Core values never leave the core."""

from __future__ import annotations

from typing import Annotated

import msgspec


class RedeemPairingCode(msgspec.Struct):
    # [0-9] rather than \d: Python's \d also matches non-ASCII digits; the lengths rule out
    # the trailing newline that `$` would let through.
    code: Annotated[str, msgspec.Meta(pattern=r"^[0-9]{6}$", min_length=6, max_length=6)]
    name: Annotated[str, msgspec.Meta(min_length=1, max_length=100)]


class Connection(msgspec.Struct):
    connection_id: str
    name: str
    scopes: list[str]
    token: str


class Quota(msgspec.Struct):
    used: int
    limit: int
    remaining: int
    daily_used: int
    daily_limit: int
    daily_remaining: int


class ErrorResponse(msgspec.Struct):
    detail: str

"""POST /v1/connections/token: redeem a pairing code for a connection (contract 4.1)."""

from __future__ import annotations

from typing import Any

from litestar import Request, post
from litestar.datastructures import CacheControlHeader
from litestar.params import JSONBody

from cleanair_http import responses, schemas
from cleanair_http.auth import core_of
from cleanair_http.client_address import client_address
from cleanair_http.offloading import in_thread
from cleanair_http.openapi import error_responses


@post(
    "/v1/connections/token",
    status_code=201,
    exclude_from_auth=True,
    cache_control=CacheControlHeader(no_store=True),  # the raw token is in this response
    summary="Redeem a pairing code",
    tags=["connections"],
    responses=error_responses(
        401,
        422,
        429,
        s401="Code unknown, used, expired, or its user no longer premium (indistinguishable)",
        s429="Too many redemption attempts; see Retry-After",
    ),
)
async def redeem_pairing_code(
    request: Request[Any, Any, Any], data: JSONBody[schemas.RedeemPairingCode]
) -> schemas.Connection:
    """Exchange a 6-digit code from the companion app for a bearer token, shown only here."""
    core = core_of(request)
    address = client_address(request, request.app.state.settings.trusted_proxies)
    issued = await in_thread(lambda: core.redeem_pairing_code(data.code, data.name, address))
    return responses.connection(issued)

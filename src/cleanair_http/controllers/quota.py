"""GET /v1/quota: the caller's credit pool (contract 4.7)."""

from __future__ import annotations

from typing import Any

from litestar import Request, get

from cleanair_http import responses, schemas
from cleanair_http.auth import caller_of, core_of, requires
from cleanair_http.openapi import SECURITY, error_responses


@get(
    "/v1/quota",
    opt=requires(),
    security=SECURITY,
    summary="Read the credit pool",
    tags=["quota"],
    responses=error_responses(401, 429, s429="Rate limited; see Retry-After"),
)
async def read_quota(request: Request[Any, Any, Any]) -> schemas.Quota:
    """Credits used and remaining this month (UTC) and today (UTC). Free; any valid token."""
    core, caller = core_of(request), caller_of(request)
    quota = await core.store_calls(lambda: core.quota(caller))
    return responses.quota(quota)

"""The extension API under /ext/v1 (versioned apart from the frozen /v1): the same bearer
auth, scopes, credit pool, rate limits and error envelope as the contract's endpoints."""

from __future__ import annotations

from typing import Any

from litestar import Request, post
from litestar.params import JSONBody

from cleanair_core.air.wifi import WifiAccessPoint
from cleanair_http import extension_schemas as ext
from cleanair_http import responses
from cleanair_http.auth import authorization_of, core_of, pending_hit_of
from cleanair_http.controllers.airquality import AQ_READ, client_label_of, point_of
from cleanair_http.openapi import SECURITY, error_responses

TAG = f"extension v{ext.EXTENSION_VERSION}"


@post(
    "/ext/v1/airquality/conditions",
    status_code=200,
    opt=AQ_READ,
    security=SECURITY,
    summary="A point's conditions, with its official index",
    tags=[TAG],
    responses=error_responses(
        401,
        403,
        422,
        429,
        503,
        s422="Request validation failed (an unknown index code included), or no location "
        "could be resolved (not charged)",
    ),
)
async def point_conditions(
    request: Request[Any, Any, Any], data: JSONBody[ext.ConditionsRequest]
) -> ext.ConditionsResponse:
    """The conditions at `lat`/`lon`, else at the Wi-Fi scan's location: the Clean Air
    Score, this hour's concentrations (µg/m³), the official indexes asked for (default: the
    place's own, where the service has it, else all: `us_epa_2024`, `eu_eaqi_2024`,
    `uk_daqi`) with the averaged values each was computed from and its health advice, and
    where the numbers come from. 1 credit, scope `aq:read`, as a score."""
    point = point_of(data.lat, data.lon)
    client = client_label_of(data.client)
    scan = [WifiAccessPoint(ap.mac, ap.rssi) for ap in data.wifi or ()] if point is None else []
    result = await core_of(request).conditions(
        authorization_of(request),
        point=point,
        wifi=scan,
        client=client,
        indexes=list(data.indexes) if data.indexes is not None else None,
        pending=pending_hit_of(request),
    )
    return responses.conditions(result)


ROUTE_HANDLERS = (point_conditions,)

"""The extension API under /ext/v1 (versioned apart from the frozen /v1): the same bearer
auth, scopes, credit pool, rate limits and error envelope as the contract's endpoints."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated, Any

from litestar import Request, get, post
from litestar.params import JSONBody, PathParameter

from cleanair_core.access.scopes import Scope
from cleanair_core.air.wifi import WifiAccessPoint
from cleanair_core.geo import Point
from cleanair_core.routes.times import as_utc
from cleanair_http import extension_schemas as ext
from cleanair_http import responses
from cleanair_http.auth import authorization_of, core_of, pending_hit_of, requires
from cleanair_http.controllers.airquality import AQ_READ, client_label_of, point_of
from cleanair_http.controllers.routes import plan_id_of, wake_planners
from cleanair_http.offloading import in_thread
from cleanair_http.openapi import SECURITY, extension_error_responses

TAG = f"extension v{ext.EXTENSION_VERSION}"


@post(
    "/ext/v1/airquality/conditions",
    status_code=200,
    opt=AQ_READ,
    security=SECURITY,
    summary="A point's conditions, with its official index",
    tags=[TAG],
    responses=extension_error_responses(
        401,
        403,
        422,
        429,
        503,
        s422="Request validation failed (an unknown index code, or one named twice, "
        "included; an unknown group), or no location could be resolved (not charged)",
    ),
)
async def point_conditions(
    request: Request[Any, Any, Any], data: JSONBody[ext.ConditionsRequest]
) -> ext.ConditionsResponse:
    """The conditions at `lat`/`lon`, else at the Wi-Fi scan's location: the Clean Air
    Score, this hour's concentrations (µg/m³), the official indexes asked for (default: the
    place's own, where the service has it, else all: `us_epa_2024`, `eu_eaqi_2024`,
    `uk_daqi`) with the averaged values each was computed from and its health advice, and
    where the numbers come from. Each index carries its advice for the general population
    and each group it names (`group` asks for one group's only). 1 credit, scope `aq:read`,
    as a score."""
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
    return responses.conditions(result, data.group)


@post(
    "/ext/v1/routes/departures",
    status_code=202,
    opt=requires(Scope.ROUTES_PLAN, user_owned=True),
    security=SECURITY,
    summary="Submit a departures plan: the best time to go",
    tags=[TAG],
    responses=extension_error_responses(
        400,
        401,
        403,
        422,
        429,
        s400="Start and end are over 15 km apart, or a start time of the window is outside "
        "the window air data exists for (not charged)",
        s403="Scope routes:plan missing, owner not premium, or a partner-owned connection",
        s422="Request validation failed: `latest` before `earliest` or over 24 hours after "
        "it, or `step_minutes` outside 5-240 (not charged)",
    ),
)
async def submit_departures(
    request: Request[Any, Any, Any], data: JSONBody[ext.DeparturesRequest]
) -> ext.DeparturesSubmitted:
    """Plan the trip from `start` to `end` leaving at every `step_minutes` from `earliest`
    to `latest`, and find the departure with the least inhaled dose (25 credits, scope
    `routes:plan`, as a route plan). Answers at once with the `request_id` to poll at
    `GET /ext/v1/routes/departures/{request_id}`; the plans run in the background."""
    core, proof = core_of(request), authorization_of(request)
    plan_id = await in_thread(
        lambda: core.submit_departures(
            proof,
            start=Point(data.start.latitude, data.start.longitude),
            end=Point(data.end.latitude, data.end.longitude),
            activity=data.activity_type,
            earliest=as_utc(data.earliest),
            latest=as_utc(data.latest),
            step=timedelta(minutes=data.step_minutes),
        )
    )
    wake_planners(request)
    return responses.departures_submitted(plan_id)


@get(
    "/ext/v1/routes/departures/{request_id:str}",
    status_code=200,
    # As a route plan's poll: free, the same per-connection polling limit, no premium check.
    opt=requires(Scope.ROUTES_PLAN, premium=False, polls=True),
    security=SECURITY,
    summary="Poll a departures plan",
    tags=[TAG],
    responses=extension_error_responses(
        401,
        403,
        404,
        422,
        429,
        s403="Scope routes:plan missing",
        s404="No such departures plan, or it belongs to another user",
        s422="request_id is not a valid UUID",
        s429="Over 60 polls a minute on this connection (route plan polls included); see "
        "Retry-After",
    ),
)
async def poll_departures(
    request: Request[Any, Any, Any],
    request_id: Annotated[
        str,
        PathParameter(
            format="uuid", description="The request_id the departures plan was submitted with"
        ),
    ],
) -> ext.DeparturesPollResponse:
    """The departures plan's status, its result once `completed` (every departure's dose,
    Clean Air Score and distance, the best one with its route, and the dose saved against
    the direct route leaving at `earliest`), or its error once `failed`. Free."""
    plan_id = plan_id_of(request_id)
    core, proof = core_of(request), authorization_of(request)
    plan = await core.store_calls(lambda: core.poll_departures(proof, plan_id))
    return responses.departures_poll(plan)


ROUTE_HANDLERS = (point_conditions, submit_departures, poll_departures)

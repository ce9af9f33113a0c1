"""POST /v1/airquality/score, /forecast and /routes (contract 4.2, 4.3, 4.4)."""

from __future__ import annotations

from typing import Any

from litestar import Request, post
from litestar.params import JSONBody
from litestar.types import Scope as AsgiScope

from cleanair_core.access.scopes import Scope
from cleanair_core.air.activities import ActivityType
from cleanair_core.air.exposure import EnvironmentType
from cleanair_core.air.wifi import WifiAccessPoint
from cleanair_core.credits.attribution import CLIENT_LABEL, validate_client_label
from cleanair_core.errors import Unprocessable, Violation
from cleanair_core.geo import Point
from cleanair_core.routes.enrichment import Waypoint
from cleanair_core.service import CleanAir
from cleanair_http import responses, schemas
from cleanair_http.auth import (
    authorization_in,
    authorization_of,
    core_of,
    pending_hit_in,
    pending_hit_of,
    requires,
)
from cleanair_http.client_address import client_address
from cleanair_http.encoded import SKIP_COMPRESSION, EncodedJson
from cleanair_http.openapi import SECURITY, error_responses

AQ_READ = requires(Scope.AQ_READ, charged=True)


def point_of(lat: float | None, lon: float | None) -> Point | None:
    """Both coordinates or neither; one alone is a validation failure."""
    if lat is None and lon is None:
        return None
    if lat is None or lon is None:
        missing = "lat" if lat is None else "lon"
        raise Unprocessable(violations=[Violation(missing, "required", "lat and lon go together")])
    return Point(lat, lon)


_CLIENT_LABEL = Violation("client", "pattern", f"must match the pattern {CLIENT_LABEL.pattern}")


def client_label_of(raw: str | None) -> str | None:
    if raw is None:
        return None
    try:
        return validate_client_label(raw)
    except ValueError:
        raise Unprocessable(violations=[_CLIENT_LABEL]) from None


@post(
    "/v1/airquality/score",
    status_code=200,
    # Its answers, two integers or an error's envelope, are all far below gzip's minimum
    # size: skipping the compression middleware spares reading the request's headers for it.
    opt={**AQ_READ, SKIP_COMPRESSION: True},
    response_class=EncodedJson,
    security=SECURITY,
    summary="Score a point",
    tags=["air quality"],
    responses=error_responses(
        401,
        403,
        422,
        429,
        503,
        s422="Request validation failed, or no location could be resolved (not charged)",
    ),
)
async def score_point(
    request: Request[Any, Any, Any], data: JSONBody[schemas.ScoreRequest]
) -> schemas.ScoreResponse:
    """The Clean Air Score (0-100, 100 cleanest) at `lat`/`lon`, else at the Wi-Fi scan's
    location. 1 credit; `ttl` is the seconds until the data behind the answer next changes."""
    # Registered for the OpenAPI document and every request the score route's own path
    # (`cleanair_http.score_route`) leaves to Litestar; both answer with `score_answer`.
    return await score_answer(core_of(request), request.scope, data)


async def score_answer(
    core: CleanAir, scope: AsgiScope, data: schemas.ScoreRequest
) -> schemas.ScoreResponse:
    """What the score route answers to `data`, for the request whose scope the bearer
    middleware admitted."""
    point = point_of(data.lat, data.lon)
    client = client_label_of(data.client)
    # The scan is only turned into core values when it will be used: coordinates win.
    scan = [WifiAccessPoint(ap.mac, ap.rssi) for ap in data.wifi or ()] if point is None else []
    result = await core.score(
        authorization_in(scope),
        point=point,
        wifi=scan,
        client=client,
        pending=pending_hit_in(scope),
    )
    return responses.score(result)


@post(
    "/v1/airquality/forecast",
    status_code=200,
    opt=AQ_READ,
    security=SECURITY,
    summary="Forecast a day",
    tags=["air quality"],
    responses=error_responses(
        400,
        401,
        403,
        422,
        429,
        503,
        s400="The date is outside today .. today + 3 in the given timezone (not charged)",
        s422="Request validation failed (including an unknown timezone, a lone coordinate, "
        "or no location from the caller's address); not charged",
    ),
)
async def forecast_day(
    request: Request[Any, Any, Any], data: JSONBody[schemas.ForecastRequest]
) -> schemas.ForecastResponse:
    """Hourly Clean Air Scores and concentrations (µg/m³) for the local `date` in `timezone`.
    Without coordinates the caller's IP country gives an approximate location. 2 credits."""
    point = point_of(data.latitude, data.longitude)
    core = core_of(request)
    address = None
    if point is None:
        address = client_address(request, request.app.state.settings.trusted_proxies)
    forecast = await core.forecast(
        authorization_of(request),
        day=data.date,
        timezone=data.timezone,
        point=point,
        activity=data.activity_type or ActivityType.OTHER,
        environment=data.environment_type or EnvironmentType.OUTDOOR,
        client_address=address,
        pending=pending_hit_of(request),
    )
    return responses.forecast(forecast)


@post(
    "/v1/airquality/routes",
    status_code=200,
    opt=requires(Scope.AQ_ROUTES, charged=True),
    security=SECURITY,
    summary="Enrich a route",
    tags=["air quality"],
    responses=error_responses(
        400,
        401,
        403,
        422,
        429,
        503,
        s400="A waypoint time or start_time is over 30 days ago or beyond 84 hours ahead "
        "(not charged)",
        s422="Request validation failed (including times on some waypoints only, no times "
        "and no start_time, or recorded times going backwards); not charged",
        s503="No air-quality data for any waypoint, or the source is unavailable (not charged)",
    ),
)
async def enrich_route(
    request: Request[Any, Any, Any], data: JSONBody[schemas.EnrichRouteRequest]
) -> schemas.EnrichedRoute:
    """Measures at every waypoint at its own time, and the route's time-weighted, banded Clean
    Air Score, relative inhaled dose and mean concentrations. Give `time` on every waypoint (a
    recorded track) or on none, with `start_time`. 1 credit per waypoint."""
    waypoints = [Waypoint(Point(w.lat, w.lon), w.time) for w in data.waypoints]
    route = await core_of(request).enrich_route(
        authorization_of(request),
        waypoints=waypoints,
        start_time=data.start_time,
        activity=data.activity_type or ActivityType.OTHER,
        environment=data.environment_type or EnvironmentType.OUTDOOR,
        pending=pending_hit_of(request),
    )
    return responses.enriched_route(route)

"""msgspec structs of the HTTP edge (contract section 2). Core values never leave the core."""

from __future__ import annotations

import datetime
from typing import Annotated

import msgspec

from cleanair_core.air.activities import ActivityType
from cleanair_core.air.exposure import EnvironmentType
from cleanair_core.credits.attribution import CLIENT_LABEL
from cleanair_core.routes.enrichment import MAX_WAYPOINTS
from cleanair_core.routes.network import PlanActivityType


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


# Air quality (contract 2.3-2.6) --------------------------------------------------------------
Latitude = Annotated[float, msgspec.Meta(ge=-90.0, le=90.0)]
Longitude = Annotated[float, msgspec.Meta(ge=-180.0, le=180.0)]
#: The core's client-label rule, so a bad label is a 422 before any charge; msgspec searches
#: rather than matching the whole string, so the core re-checks it.
ClientLabel = Annotated[str, msgspec.Meta(pattern=CLIENT_LABEL.pattern, max_length=32)]
#: The strongest few access points are enough; a scan longer than this is refused (422).
MAX_SCAN = 64


class WifiAccessPoint(msgspec.Struct, forbid_unknown_fields=False):
    mac: Annotated[str, msgspec.Meta(min_length=1, max_length=32)]
    rssi: Annotated[int, msgspec.Meta(ge=-150, le=0)]


class ScoreRequest(msgspec.Struct):
    wifi: Annotated[list[WifiAccessPoint], msgspec.Meta(max_length=MAX_SCAN)] | None = None
    lat: Latitude | None = None
    lon: Longitude | None = None
    client: ClientLabel | None = None


class ScoreResponse(msgspec.Struct):
    score: Annotated[int, msgspec.Meta(ge=0, le=100)]
    ttl: int


class ForecastRequest(msgspec.Struct):
    date: datetime.date
    timezone: Annotated[str, msgspec.Meta(min_length=1, max_length=64)]
    latitude: Latitude | None = None
    longitude: Longitude | None = None
    activity_type: ActivityType | None = None
    environment_type: EnvironmentType | None = None


class ForecastResponse(msgspec.Struct):
    location: str
    timestamps: list[int] | None
    measures: dict[str, list[float | None]]


# Route enrichment (contract 2.7, 2.8) --------------------------------------------------------
class Waypoint(msgspec.Struct):
    lat: Latitude
    lon: Longitude
    #: ISO 8601; without a UTC offset it is read as UTC.
    time: datetime.datetime | None = None


class EnrichRouteRequest(msgspec.Struct):
    waypoints: Annotated[list[Waypoint], msgspec.Meta(min_length=1, max_length=MAX_WAYPOINTS)]
    start_time: datetime.datetime | None = None
    activity_type: ActivityType | None = None
    environment_type: EnvironmentType | None = None


class BandedScore(msgspec.Struct):
    score: float
    band: str
    description: str
    colour: str


class RouteSummary(msgspec.Struct):
    clean_air_score: BandedScore | None = None
    inhaled_dose: float | None = None
    average_pollutants: dict[str, float] = msgspec.field(default_factory=dict)


class EnrichedRoute(msgspec.Struct):
    waypoints: list[tuple[float, float]]
    measures: dict[str, list[float | None]]
    summary: RouteSummary


# Route plans (contract 2.10-2.12) ------------------------------------------------------------
class Location(msgspec.Struct):
    latitude: Latitude
    longitude: Longitude


class PlanRouteRequest(msgspec.Struct):
    start: Location
    end: Location
    activity_type: PlanActivityType
    #: UTC; without an offset it is read as UTC; defaults to now.
    start_time: datetime.datetime | None = None


class PlanSubmitted(msgspec.Struct):
    request_id: str


class RouteGoal(msgspec.Struct):
    title: str
    description: str


class PlannedRoute(msgspec.Struct):
    waypoints: list[tuple[float, float]]
    measures: dict[str, list[float | None]]
    summary: RouteSummary
    distance: float
    distance_delta: int
    clean_air_score_delta_pct: float
    goal: RouteGoal
    dose_delta_pct: float | None = None
    duration: float | None = None


class PlanResult(msgspec.Struct):
    activity_type: PlanActivityType
    routes: list[PlannedRoute]
    original_distance: float
    original_clean_air_score: float | None = None
    original_dose: float | None = None
    best_route_index: int = 0


class PlanPollResponse(msgspec.Struct):
    status: str
    result: PlanResult | None = None
    error: str | None = None

"""msgspec structs of the HTTP edge (contract section 2). Core values never leave the core.

Every field carries the contract's description (`msgspec.Meta(description=...)`): the OpenAPI
document, and every client generated from it, says what the contract says.
"""

from __future__ import annotations

import datetime
import uuid
from enum import StrEnum
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
    code: Annotated[
        str,
        msgspec.Meta(
            pattern=r"^[0-9]{6}$",
            min_length=6,
            max_length=6,
            description="The 6-digit pairing code from the companion app: valid for 60 "
            "seconds, single use",
        ),
    ]
    name: Annotated[
        str,
        msgspec.Meta(
            min_length=1,
            max_length=100,
            description="A label for the connection, 1 to 100 characters, none a control "
            "character (U+0000 to U+001F, U+007F to U+009F)",
        ),
    ]


class Connection(msgspec.Struct):
    connection_id: Annotated[uuid.UUID, msgspec.Meta(description="The connection's id")]
    name: Annotated[str, msgspec.Meta(description="The label supplied at redemption")]
    scopes: Annotated[
        list[str],
        msgspec.Meta(
            description="Capabilities fixed by the server: aq:read, aq:routes, routes:plan"
        ),
    ]
    token: Annotated[
        str,
        msgspec.Meta(
            description="The raw bearer token, `<prefix>_<env>_<secret>` (env `pdn` or "
            "`tst`); shown exactly once and never retrievable again (only a hash is kept)"
        ),
    ]


class Quota(msgspec.Struct):
    used: Annotated[int, msgspec.Meta(description="Credits used this month (UTC)")]
    limit: Annotated[
        int,
        msgspec.Meta(
            description="This month's pool size, in credits: the monthly pool plus any "
            "credits support granted for this month"
        ),
    ]
    remaining: Annotated[int, msgspec.Meta(description="Credits remaining this month")]
    daily_used: Annotated[int, msgspec.Meta(description="Credits used today (UTC)")]
    daily_limit: Annotated[
        int,
        msgspec.Meta(
            description="Today's burst cap, in credits: the daily burst cap plus any credits "
            "support granted for today (UTC)"
        ),
    ]
    daily_remaining: Annotated[int, msgspec.Meta(description="Credits remaining today")]


class ErrorResponse(msgspec.Struct):
    detail: Annotated[
        str,
        msgspec.Meta(
            description="What went wrong; for a 422 always `Request validation failed` (the "
            "input is never echoed)"
        ),
    ]


# Air quality (contract 2.3-2.6) --------------------------------------------------------------
Latitude = Annotated[
    float, msgspec.Meta(ge=-90.0, le=90.0, description="WGS-84 latitude in degrees, -90 to 90")
]
Longitude = Annotated[
    float,
    msgspec.Meta(ge=-180.0, le=180.0, description="WGS-84 longitude in degrees, -180 to 180"),
]
#: The core's client-label rule, so a bad label is a 422 before any charge; msgspec searches
#: rather than matching the whole string, so the core re-checks it.
ClientLabel = Annotated[
    str,
    msgspec.Meta(
        pattern=CLIENT_LABEL.pattern,
        max_length=32,
        description="Self-identification for usage attribution: a recognised label is "
        "counted as `client:<name>`, any other as the endpoint's own; never changes the answer",
    ),
]
#: The strongest few access points are enough; a scan longer than this is refused (422).
MAX_SCAN = 64
_ACTIVITY = "The activity, which sets the breathing rate (and the speed); default `other`"
_ENVIRONMENT = "Where the air is breathed; default `outdoor`"
_MEASURES_NOTE = (
    "`clean_air_score` (0-100, higher is cleaner) or a pollutant's concentration in µg/m³ "
    "(typically pm25, pm10, no2, o3, so2); only measures with data appear"
)


class WifiAccessPoint(msgspec.Struct, forbid_unknown_fields=False):
    mac: Annotated[
        str, msgspec.Meta(min_length=1, max_length=32, description="The access point's BSSID")
    ]
    rssi: Annotated[
        int, msgspec.Meta(ge=-150, le=0, description="Signal strength in dBm (negative)")
    ]


class ScoreRequest(msgspec.Struct):
    wifi: (
        Annotated[
            list[WifiAccessPoint],
            msgspec.Meta(
                max_length=MAX_SCAN,
                description="A Wi-Fi scan, strongest access point first, resolved "
                "server-side to a coarse point; used only without lat/lon",
            ),
        ]
        | None
    ) = None
    lat: Latitude | None = None
    lon: Longitude | None = None
    client: ClientLabel | None = None


class ScoreResponse(msgspec.Struct):
    score: Annotated[
        int,
        msgspec.Meta(ge=0, le=100, description="Clean Air Score: 100 is cleanest, 0 is worst"),
    ]
    ttl: Annotated[
        int,
        msgspec.Meta(
            description="Seconds until the client should ask again (the data "
            "behind the answer changes then)"
        ),
    ]


class ForecastRequest(msgspec.Struct):
    date: Annotated[
        datetime.date,
        msgspec.Meta(description="The local day to forecast, within the 4-day forecast window"),
    ]
    timezone: Annotated[
        str,
        msgspec.Meta(min_length=1, max_length=64, description="IANA timezone name of the date"),
    ]
    latitude: Latitude | None = None
    longitude: Longitude | None = None
    activity_type: Annotated[ActivityType | None, msgspec.Meta(description=_ACTIVITY)] = None
    environment_type: Annotated[EnvironmentType | None, msgspec.Meta(description=_ENVIRONMENT)] = (
        None
    )


# Fields the contract marks not required have defaults, so the document says so; the service
# always sends them all.
class ForecastResponse(msgspec.Struct):
    location: Annotated[
        str, msgspec.Meta(description="Human-readable name of the forecast location")
    ]
    timestamps: Annotated[
        list[int] | None,
        msgspec.Meta(description="The shared hourly time axis, in epoch seconds"),
    ] = None
    measures: Annotated[
        dict[str, list[float | None]],
        msgspec.Meta(
            description="Per measure, values parallel to `timestamps` (element i is the value "
            f"at timestamps[i]; null marks an hour with no value). Keys: {_MEASURES_NOTE}"
        ),
    ] = msgspec.field(default_factory=dict)


# Route enrichment (contract 2.7, 2.8) --------------------------------------------------------
class Waypoint(msgspec.Struct):
    lat: Latitude
    lon: Longitude
    #: ISO 8601; without a UTC offset it is read as UTC.
    time: Annotated[
        datetime.datetime | None,
        msgspec.Meta(
            description="When the waypoint was passed (ISO 8601; UTC without an offset): on "
            "every waypoint (a recorded track) or on none"
        ),
    ] = None


class EnrichRouteRequest(msgspec.Struct):
    waypoints: Annotated[
        list[Waypoint],
        msgspec.Meta(
            min_length=1,
            max_length=MAX_WAYPOINTS,
            description="The route, 1 to 100 waypoints in order",
        ),
    ]
    start_time: Annotated[
        datetime.datetime | None,
        msgspec.Meta(
            description="When the route starts (UTC without an offset); required when the "
            "waypoints carry no times, which are then derived from the activity's speed"
        ),
    ] = None
    activity_type: Annotated[ActivityType | None, msgspec.Meta(description=_ACTIVITY)] = None
    environment_type: Annotated[EnvironmentType | None, msgspec.Meta(description=_ENVIRONMENT)] = (
        None
    )


class BandedScore(msgspec.Struct):
    score: Annotated[float, msgspec.Meta(description="Clean Air Score, 0-100, higher is cleaner")]
    band: Annotated[str, msgspec.Meta(description="The band's number, as a string")]
    description: Annotated[
        str, msgspec.Meta(description="The band's label, from Excellent to Very Poor")
    ]
    colour: Annotated[str, msgspec.Meta(description="The band's colour")]


class RouteSummary(msgspec.Struct):
    clean_air_score: Annotated[
        BandedScore | None,
        msgspec.Meta(description="The route's time-weighted Clean Air Score, banded"),
    ] = None
    inhaled_dose: Annotated[
        float | None,
        msgspec.Meta(
            description="Relative, unitless exposure dose over the route's duration: higher "
            "means more inhaled risk; comparable across routes and with a plan's doses"
        ),
    ] = None
    average_pollutants: Annotated[
        dict[str, float],
        msgspec.Meta(
            description="Mean concentration per pollutant (pm25, no2, o3, so2, pm10, pm1, "
            "co2, tvoc, tvoc_index), µg/m³"
        ),
    ] = msgspec.field(default_factory=dict)


_WAYPOINTS = "One [lat, lon] pair per waypoint, in order"
_ROUTE_MEASURES = (
    "Per measure, values parallel to `waypoints` (element i describes waypoints[i] at its "
    "time; null marks a waypoint where the measure could not be computed). Keys: "
    f"{_MEASURES_NOTE}; the score is adjusted for the activity and environment"
)
_SUMMARY = "The route as a whole"


class EnrichedRoute(msgspec.Struct, kw_only=True):
    waypoints: Annotated[list[tuple[float, float]], msgspec.Meta(description=_WAYPOINTS)]
    measures: Annotated[
        dict[str, list[float | None]], msgspec.Meta(description=_ROUTE_MEASURES)
    ] = msgspec.field(default_factory=dict)
    summary: Annotated[RouteSummary, msgspec.Meta(description=_SUMMARY)]


# Route plans (contract 2.10-2.12) ------------------------------------------------------------
class Location(msgspec.Struct):
    latitude: Latitude
    longitude: Longitude


class PlanRouteRequest(msgspec.Struct):
    start: Annotated[Location, msgspec.Meta(description="Where the route starts")]
    end: Annotated[
        Location,
        msgspec.Meta(description="Where it ends: at most 15 km from `start` in a straight line"),
    ]
    activity_type: Annotated[
        PlanActivityType, msgspec.Meta(description="How the route is travelled")
    ]
    #: UTC; without an offset it is read as UTC; defaults to now.
    start_time: Annotated[
        datetime.datetime | None,
        msgspec.Meta(description="When the trip starts (UTC without an offset); default now"),
    ] = None


class PlanSubmitted(msgspec.Struct):
    request_id: Annotated[
        uuid.UUID,
        msgspec.Meta(description="The plan's id, to poll at GET /v1/routes/{request_id}"),
    ]


class RouteGoal(msgspec.Struct):
    title: Annotated[str, msgspec.Meta(description="Why the alternative was surfaced, briefly")]
    description: Annotated[
        str, msgspec.Meta(description="Why the alternative was surfaced, in a sentence")
    ]


class PlannedRoute(msgspec.Struct, kw_only=True):
    waypoints: Annotated[list[tuple[float, float]], msgspec.Meta(description=_WAYPOINTS)]
    measures: Annotated[
        dict[str, list[float | None]], msgspec.Meta(description=_ROUTE_MEASURES)
    ] = msgspec.field(default_factory=dict)
    summary: Annotated[RouteSummary, msgspec.Meta(description=_SUMMARY)]
    distance: Annotated[float, msgspec.Meta(description="Total route distance in metres")]
    distance_delta: Annotated[
        int,
        msgspec.Meta(description="Difference from the baseline in metres; positive is longer"),
    ]
    clean_air_score_delta_pct: Annotated[
        float,
        msgspec.Meta(description="Percentage improvement in Clean Air Score over the baseline"),
    ]
    goal: Annotated[
        RouteGoal,
        msgspec.Meta(description="A human-readable reason the alternative was surfaced"),
    ]
    dose_delta_pct: Annotated[
        float | None,
        msgspec.Meta(
            description="Percentage less pollution inhaled than on the baseline (positive is "
            "cleaner); null when there is no comparable baseline"
        ),
    ] = None
    duration: Annotated[float | None, msgspec.Meta(description="Estimated duration in seconds")] = (
        None
    )


_NO_BASELINE = "null when no comparable baseline was available"


class PlanResult(msgspec.Struct):
    activity_type: Annotated[
        PlanActivityType, msgspec.Meta(description="The activity the plan was made for")
    ]
    routes: Annotated[
        list[PlannedRoute], msgspec.Meta(description="The routes, cleaner alternatives first")
    ]
    original_distance: Annotated[
        float, msgspec.Meta(description="The baseline (direct) route's distance in metres")
    ]
    original_clean_air_score: Annotated[
        float | None,
        msgspec.Meta(description=f"The baseline route's Clean Air Score; {_NO_BASELINE}"),
    ] = None
    original_dose: Annotated[
        float | None,
        msgspec.Meta(description=f"The baseline route's inhaled dose; {_NO_BASELINE}"),
    ] = None
    best_route_index: Annotated[
        int,
        msgspec.Meta(
            description="Index in `routes` of the route with the lowest inhaled dose, falling "
            "back to the highest Clean Air Score"
        ),
    ] = 0


class PlanRouteStatus(StrEnum):
    """The contract's PlanRouteStatus (section 3.1); the core's plan status by another name,
    so the document names the enum as the contract does."""

    PENDING = "pending"
    COMPLETED = "completed"
    FAILED = "failed"


class PlanPollResponse(msgspec.Struct):
    status: Annotated[PlanRouteStatus, msgspec.Meta(description="Where the plan is in its life")]
    result: Annotated[
        PlanResult | None, msgspec.Meta(description="The plan, once status is `completed`")
    ] = None
    error: Annotated[
        str | None, msgspec.Meta(description="Why the plan failed, once status is `failed`")
    ] = None

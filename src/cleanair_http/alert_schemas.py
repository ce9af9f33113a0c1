"""msgspec structs of the alert subscriptions' endpoints (`/ext/v1/alerts`, issue 32): what
they accept and answer, with every field's units and bounds (docs/alerts.md).

The target (a place or a trip) and the kind (observed or forecast) are tagged unions: an
object whose `type` names which one it is, so a client and a generated model tell them
apart by one field.
"""

from __future__ import annotations

import datetime
import uuid
from typing import Annotated, Literal

import msgspec

from cleanair_core.alerts.subscriptions import (
    DEFAULT_HYSTERESIS_CATEGORIES,
    DEFAULT_HYSTERESIS_HOURS,
    MAX_HYSTERESIS_HOURS,
    MAX_SUBSCRIPTIONS_PER_USER,
)
from cleanair_core.routes.network import PlanActivityType
from cleanair_http.extension_schemas import IndexCode
from cleanair_http.schemas import Latitude, Location, Longitude

#: The longest IANA zone name accepted (the longest in the database is 32 characters).
MAX_ZONE_NAME = 64
#: The longest webhook URL accepted (`destinations.MAX_URL_LENGTH`).
MAX_WEBHOOK_URL = 2048
#: The most categories an index has (US AQI and EAQI: 6, numbered 0 to 5).
MAX_THRESHOLD = 5
#: Hours and minutes on a 24-hour clock: the local wall-clock times of a subscription.
WALL_TIME = r"^([01][0-9]|2[0-3]):[0-5][0-9]$"

WallTime = Annotated[
    str,
    msgspec.Meta(
        pattern=WALL_TIME,
        description="A local wall-clock time, `HH:MM` on a 24-hour clock, read in the "
        "subscription's `timezone`",
    ),
]
Direction = Literal["worse", "better"]
Audience = Literal["general", "sensitive"]
TargetDay = Literal["today", "tomorrow"]


class PlaceTarget(msgspec.Struct, tag="place", tag_field="type"):
    """Alerts on the air at one point."""

    lat: Latitude
    lon: Longitude


class TripTarget(msgspec.Struct, tag="trip", tag_field="type"):
    """Alerts on a usual trip, made at a local time on some days of the week."""

    start: Annotated[Location, msgspec.Meta(description="Where the trip starts")]
    end: Annotated[
        Location,
        msgspec.Meta(description="Where it ends: at most 15 km from `start` in a straight line"),
    ]
    activity_type: Annotated[
        PlanActivityType, msgspec.Meta(description="How the trip is travelled")
    ]
    departure: Annotated[
        str,
        msgspec.Meta(
            pattern=WALL_TIME,
            description="The usual local departure time, `HH:MM`, in the subscription's `timezone`",
        ),
    ]
    days: Annotated[
        list[Annotated[int, msgspec.Meta(ge=1, le=7)]],
        msgspec.Meta(
            min_length=1,
            max_length=7,
            description="The ISO weekdays the trip is made, 1 (Monday) to 7 (Sunday), each once",
        ),
    ]


class ObservedKind(msgspec.Struct, tag="observed", tag_field="type"):
    """Alert when the current hour crosses the threshold, once per episode, and send an
    all-clear when the air has been back on the other side for the hysteresis."""

    hysteresis_categories: Annotated[
        int,
        msgspec.Meta(
            ge=1,
            le=MAX_THRESHOLD,
            description="How many categories on the good side of the threshold an hour must "
            "be to count towards the all-clear; the threshold must leave that many",
        ),
    ] = DEFAULT_HYSTERESIS_CATEGORIES
    hysteresis_hours: Annotated[
        int,
        msgspec.Meta(
            ge=1,
            le=MAX_HYSTERESIS_HOURS,
            description="How many observed hours in a row must be that far on the good side "
            "for the episode to end (its all-clear)",
        ),
    ] = DEFAULT_HYSTERESIS_HOURS


class ForecastKind(msgspec.Struct, tag="forecast", tag_field="type"):
    """At a local time each day, alert when the worst forecast hour of the target day is
    past the threshold: at most once a day, unless the forecast worsens by a category."""

    target_day: Annotated[
        TargetDay,
        msgspec.Meta(description="Which local day the forecast is about, seen from `send_at`"),
    ]
    send_at: Annotated[
        str,
        msgspec.Meta(
            pattern=WALL_TIME,
            description="When to send it: a local time, `HH:MM`, in the subscription's `timezone`",
        ),
    ]


class QuietHours(msgspec.Struct):
    """A daily local period in which alerts wait (an alert whose episode ended meanwhile is
    dropped); it wraps midnight when `end` comes before `start`."""

    start: Annotated[
        str, msgspec.Meta(pattern=WALL_TIME, description="Where it starts (included), `HH:MM`")
    ]
    end: Annotated[
        str,
        msgspec.Meta(
            pattern=WALL_TIME, description="Where it ends (excluded), `HH:MM`; not `start`"
        ),
    ]


_TARGET = "A place (`type` `place`, with `lat` and `lon`) or a usual trip (`type` `trip`)"
_INDEX = (
    "The official index the threshold is on; null: the place's own official index (for a "
    "trip, its start's), in which case the threshold must fit every index (0 to 3)"
)
_THRESHOLD = (
    "A category of the index, 0 the best: its categories or bands counted from 0, not its "
    "number (US AQI and EAQI 0-5, DAQI's bands 0-3)"
)
_DIRECTION = (
    "`worse`: alert when the category is at or above the threshold; `better` (good-air "
    "alerts): at or below it"
)
_AUDIENCE = (
    "Whose advice alerts carry: the index's `general` advice, or its advice for `sensitive` groups"
)
_KIND = (
    "`observed` (the current hour crosses the threshold, with an all-clear) or `forecast` "
    "(a day's worst forecast hour, sent at a local time)"
)
_TIMEZONE = "An IANA timezone name (`Europe/Paris`): local times and quiet hours are read in it"
_QUIET = "A daily period in which alerts wait; null for none"
_WEBHOOK = (
    "Where each event is POSTed, signed after Standard Webhooks: https, a public host, "
    "ports 443, 8443, 80 or 8080 unless the operator allows more; null for a feed-only "
    "subscription"
)


class SubscriptionRequest(msgspec.Struct, kw_only=True):
    target: Annotated[PlaceTarget | TripTarget, msgspec.Meta(description=_TARGET)]
    index: Annotated[IndexCode | None, msgspec.Meta(description=_INDEX)] = None
    threshold: Annotated[int, msgspec.Meta(ge=0, le=MAX_THRESHOLD, description=_THRESHOLD)]
    direction: Annotated[Direction, msgspec.Meta(description=_DIRECTION)] = "worse"
    audience: Annotated[Audience, msgspec.Meta(description=_AUDIENCE)] = "general"
    kind: Annotated[ObservedKind | ForecastKind, msgspec.Meta(description=_KIND)]
    timezone: Annotated[
        str, msgspec.Meta(min_length=1, max_length=MAX_ZONE_NAME, description=_TIMEZONE)
    ]
    quiet_hours: Annotated[QuietHours | None, msgspec.Meta(description=_QUIET)] = None
    webhook_url: (
        Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_WEBHOOK_URL, description=_WEBHOOK)]
        | None
    ) = None


class AlertSubscription(msgspec.Struct, kw_only=True):
    id: Annotated[uuid.UUID, msgspec.Meta(description="The subscription's id")]
    created_at: Annotated[datetime.datetime, msgspec.Meta(description="When it was created (UTC)")]
    target: Annotated[PlaceTarget | TripTarget, msgspec.Meta(description=_TARGET)]
    index: Annotated[IndexCode | None, msgspec.Meta(description=_INDEX)]
    threshold: Annotated[int, msgspec.Meta(ge=0, le=MAX_THRESHOLD, description=_THRESHOLD)]
    direction: Annotated[Direction, msgspec.Meta(description=_DIRECTION)]
    audience: Annotated[Audience, msgspec.Meta(description=_AUDIENCE)]
    kind: Annotated[ObservedKind | ForecastKind, msgspec.Meta(description=_KIND)]
    timezone: Annotated[str, msgspec.Meta(description=_TIMEZONE)]
    quiet_hours: Annotated[QuietHours | None, msgspec.Meta(description=_QUIET)]
    webhook_url: Annotated[str | None, msgspec.Meta(description=_WEBHOOK)]
    previous_secret_valid_until: Annotated[
        datetime.datetime | None,
        msgspec.Meta(
            description="After a rotation, until when the previous webhook secret signs "
            "beside the current one (UTC; past once the overlap is over); null before any "
            "rotation"
        ),
    ]
    status: Annotated[
        Literal["active", "disabled"],
        msgspec.Meta(
            description="`active`, or `disabled` (an endpoint that kept failing, an "
            "operator): a disabled subscription sends nothing more; delete it and create "
            "another"
        ),
    ]
    disabled_reason: Annotated[
        str | None,
        msgspec.Meta(description="Why it was disabled, once `status` is `disabled`"),
    ]
    disabled_at: Annotated[
        datetime.datetime | None,
        msgspec.Meta(description="When it was disabled (UTC), once `status` is `disabled`"),
    ]


class SubscriptionCreated(msgspec.Struct):
    subscription: Annotated[AlertSubscription, msgspec.Meta(description="As stored")]
    webhook_secret: Annotated[
        str | None,
        msgspec.Meta(
            description="The webhook's signing secret, `whsec_` and base64 (Standard "
            "Webhooks): shown this once, never again (rotate it for a new one); null for a "
            "subscription without a webhook"
        ),
    ]


class SubscriptionList(msgspec.Struct):
    subscriptions: Annotated[
        list[AlertSubscription],
        msgspec.Meta(description="The user's subscriptions, oldest first"),
    ]
    limit: Annotated[
        int,
        msgspec.Meta(
            description="How many subscriptions a user may hold, disabled ones included "
            f"({MAX_SUBSCRIPTIONS_PER_USER})"
        ),
    ]


class SecretRotated(msgspec.Struct):
    subscription: Annotated[AlertSubscription, msgspec.Meta(description="As rotated")]
    webhook_secret: Annotated[
        str,
        msgspec.Meta(
            description="The new signing secret, `whsec_` and base64: shown this once; "
            "deliveries are signed with it from now on"
        ),
    ]
    previous_secret_valid_until: Annotated[
        datetime.datetime,
        msgspec.Meta(
            description="Until then (UTC; 24 hours from the rotation) deliveries carry a "
            "signature with the previous secret too, so the receiver may switch at any time "
            "before"
        ),
    ]

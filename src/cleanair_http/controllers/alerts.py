"""The alert subscriptions under /ext/v1/alerts (issue 32; docs/alerts.md): create, list,
show, delete, and rotate a webhook secret. The extension's bearer auth, rate limit and error
envelope; scope `aq:read` and a user-owned connection; free of credits.

Creating and rotating need a premium owner; listing, showing and deleting do not, so a user
whose plan lapsed can still see and stop what they set up (as a plan already paid for may
still be polled).
"""

from __future__ import annotations

import uuid
from datetime import time
from typing import Annotated, Any

from litestar import Request, delete, get, post
from litestar.params import JSONBody, PathParameter

from cleanair_core.access.scopes import Scope
from cleanair_core.alerts.events import Direction
from cleanair_core.alerts.subscriptions import (
    MAX_SUBSCRIPTIONS_PER_USER,
    Audience,
    Forecast,
    Kind,
    Observed,
    Place,
    Subscription,
    Target,
    TargetDay,
    Trip,
)
from cleanair_core.errors import Unprocessable, Violation
from cleanair_core.geo import Point
from cleanair_core.routes.network import PlanActivityType
from cleanair_core.use_cases.alerts import NewSubscription
from cleanair_http import alert_schemas as schemas
from cleanair_http.auth import authorization_of, core_of, requires
from cleanair_http.extension_schemas import EXTENSION_VERSION
from cleanair_http.offloading import in_thread
from cleanair_http.openapi import SECURITY, extension_error_responses
from cleanair_http.schemas import Location

SUBSCRIPTIONS = "/ext/v1/alerts/subscriptions"
TAG = f"extension v{EXTENSION_VERSION}"

#: Creating and rotating: the owner must be premium.
_CHANGES = requires(Scope.AQ_READ, user_owned=True)
#: Listing, showing and deleting what the user already holds: premium or not.
_HOLDS = requires(Scope.AQ_READ, premium=False, user_owned=True)
_S403 = "Scope aq:read missing, or a partner-owned connection"
_S403_PREMIUM = "Scope aq:read missing, owner not premium, or a partner-owned connection"
_S404 = "No such subscription, or it belongs to another user"
_S422_ID = "subscription_id is not a valid UUID"
_S429 = "Over the connection's rate limit (as any call); see Retry-After"

SubscriptionId = Annotated[
    str,
    PathParameter(format="uuid", description="The subscription's id, as created"),
]


@post(
    SUBSCRIPTIONS,
    status_code=201,
    opt=_CHANGES,
    security=SECURITY,
    summary="Subscribe to alerts on a place or a trip",
    tags=[TAG],
    responses=extension_error_responses(
        401,
        403,
        422,
        429,
        s403=f"{_S403_PREMIUM}; a trip also needs scope routes:plan",
        s422="Request validation failed (an unknown timezone, a threshold past the index's "
        "categories, a webhook URL the destination rules refuse, ...), or the user already "
        f'holds {MAX_SUBSCRIPTIONS_PER_USER} subscriptions (one entry: field `""`, rule '
        "`maximum`)",
        s429=_S429,
    ),
)
async def create_subscription(
    request: Request[Any, Any, Any], data: JSONBody[schemas.SubscriptionRequest]
) -> schemas.SubscriptionCreated:
    """Be told when the air at a place, or on a usual trip, crosses a category of an
    official index: as the hours are observed (one alert per episode, then an all-clear) or
    from a day's forecast at a local time. Free of credits (the alerts are charged as they
    are sent). With a `webhook_url`, the answer carries the webhook's signing secret, shown
    this once."""
    new = new_subscription(data)
    core, proof = core_of(request), authorization_of(request)
    created = await in_thread(lambda: core.create_subscription(proof, new))
    secret = None if created.secret is None else created.secret.as_text()
    return schemas.SubscriptionCreated(subscription_of(created.subscription), secret)


@get(
    SUBSCRIPTIONS,
    status_code=200,
    opt=_HOLDS,
    security=SECURITY,
    summary="List the user's alert subscriptions",
    tags=[TAG],
    responses=extension_error_responses(401, 403, 429, s403=_S403, s429=_S429),
)
async def list_subscriptions(request: Request[Any, Any, Any]) -> schemas.SubscriptionList:
    """Every subscription of the connection's user (made through any of its connections),
    oldest first, with its status; never a webhook secret. Free."""
    core, proof = core_of(request), authorization_of(request)
    held = await core.store_calls(lambda: core.list_subscriptions(proof))
    return schemas.SubscriptionList([subscription_of(s) for s in held], MAX_SUBSCRIPTIONS_PER_USER)


@get(
    f"{SUBSCRIPTIONS}/{{subscription_id:str}}",
    status_code=200,
    opt=_HOLDS,
    security=SECURITY,
    summary="Show an alert subscription",
    tags=[TAG],
    responses=extension_error_responses(
        401, 403, 404, 422, 429, s403=_S403, s404=_S404, s422=_S422_ID, s429=_S429
    ),
)
async def show_subscription(
    request: Request[Any, Any, Any], subscription_id: SubscriptionId
) -> schemas.AlertSubscription:
    """The subscription as stored, with its status (and, once disabled, why and when);
    never its webhook secret. Free."""
    found_id = subscription_id_of(subscription_id)
    core, proof = core_of(request), authorization_of(request)
    found = await core.store_calls(lambda: core.get_subscription(proof, found_id))
    return subscription_of(found)


@delete(
    f"{SUBSCRIPTIONS}/{{subscription_id:str}}",
    status_code=204,
    opt=_HOLDS,
    security=SECURITY,
    summary="Delete an alert subscription",
    tags=[TAG],
    responses=extension_error_responses(
        401, 403, 404, 422, 429, s403=_S403, s404=_S404, s422=_S422_ID, s429=_S429
    ),
)
async def delete_subscription(
    request: Request[Any, Any, Any], subscription_id: SubscriptionId
) -> None:
    """Stop the subscription's alerts and free its place under the per-user limit. Free."""
    found_id = subscription_id_of(subscription_id)
    core, proof = core_of(request), authorization_of(request)
    await core.store_calls(lambda: core.delete_subscription(proof, found_id))


@post(
    f"{SUBSCRIPTIONS}/{{subscription_id:str}}/rotate-secret",
    status_code=200,
    opt=_CHANGES,
    security=SECURITY,
    summary="Rotate a subscription's webhook secret",
    tags=[TAG],
    responses=extension_error_responses(
        401,
        403,
        404,
        422,
        429,
        s403=_S403_PREMIUM,
        s404=_S404,
        s422=f'{_S422_ID}, or the subscription has no webhook (one entry: field `""`, rule '
        "`invalid`)",
        s429=_S429,
    ),
)
async def rotate_secret(
    request: Request[Any, Any, Any], subscription_id: SubscriptionId
) -> schemas.SecretRotated:
    """A new signing secret for the subscription's webhook, shown this once. For 24 hours
    each delivery is signed with the new and the previous secret, so the receiver may switch
    at any time in between; after that, with the new one only. Free."""
    found_id = subscription_id_of(subscription_id)
    core, proof = core_of(request), authorization_of(request)
    rotated = await core.store_calls(lambda: core.rotate_subscription_secret(proof, found_id))
    return schemas.SecretRotated(
        subscription_of(rotated.subscription), rotated.secret.as_text(), rotated.previous_until
    )


ROUTE_HANDLERS = (
    create_subscription,
    list_subscriptions,
    show_subscription,
    delete_subscription,
    rotate_secret,
)

_SUBSCRIPTION_ID = Violation("subscription_id", "format", "must be a UUID in its hyphenated form")
_REPEATED_DAY = Violation("target.days", "unique", "must not name a day twice")


def subscription_id_of(text: str) -> uuid.UUID:
    """The subscription id a path names; Unprocessable unless it is a UUID in its canonical
    hyphenated form (any case)."""
    try:
        found = uuid.UUID(text)
    except ValueError:
        raise Unprocessable(violations=[_SUBSCRIPTION_ID]) from None
    if str(found) != text.lower():  # braces, urn: or no hyphens: not the uuid format
        raise Unprocessable(violations=[_SUBSCRIPTION_ID])
    return found


def new_subscription(data: schemas.SubscriptionRequest) -> NewSubscription:
    """The core's request from the body (whose types and bounds msgspec checked); the core
    checks the rest."""
    quiet = data.quiet_hours
    return NewSubscription(
        target=_target(data.target),
        index=data.index,
        threshold=data.threshold,
        direction=Direction(data.direction),
        audience=Audience(data.audience),
        kind=_kind(data.kind),
        timezone=data.timezone,
        quiet_hours=None if quiet is None else (_time(quiet.start), _time(quiet.end)),
        webhook_url=data.webhook_url,
    )


def _target(target: schemas.PlaceTarget | schemas.TripTarget) -> Target:
    if isinstance(target, schemas.PlaceTarget):
        return Place(Point(target.lat, target.lon))
    if len(set(target.days)) != len(target.days):
        raise Unprocessable(violations=[_REPEATED_DAY])
    return Trip(
        start=Point(target.start.latitude, target.start.longitude),
        end=Point(target.end.latitude, target.end.longitude),
        activity=PlanActivityType(target.activity_type),
        departure=_time(target.departure),
        days=frozenset(target.days),
    )


def _kind(kind: schemas.ObservedKind | schemas.ForecastKind) -> Kind:
    if isinstance(kind, schemas.ObservedKind):
        return Observed(kind.hysteresis_categories, kind.hysteresis_hours)
    return Forecast(TargetDay(kind.target_day), _time(kind.send_at))


def _time(text: str) -> time:
    # The schema's pattern let through `HH:MM` alone.
    hours, minutes = text.split(":")
    return time(int(hours), int(minutes))


def _hhmm(value: time) -> str:
    return f"{value.hour:02d}:{value.minute:02d}"


def subscription_of(subscription: Subscription) -> schemas.AlertSubscription:
    """A stored subscription as the API shows it: never its secret."""
    quiet = subscription.quiet_hours
    disabled = subscription.disabled
    return schemas.AlertSubscription(
        id=subscription.id,
        created_at=subscription.created_at,
        target=_shown_target(subscription.target),
        index=subscription.index,  # type: ignore[arg-type]  # a code: checked at creation
        threshold=subscription.threshold,
        direction=subscription.direction.value,
        audience=subscription.audience.value,
        kind=_shown_kind(subscription.kind),
        timezone=subscription.timezone,
        quiet_hours=None
        if quiet is None
        else schemas.QuietHours(_hhmm(quiet.start), _hhmm(quiet.end)),
        webhook_url=subscription.webhook_url,
        previous_secret_valid_until=subscription.previous_generation_until,
        status=subscription.status.value,
        disabled_reason=None if disabled is None else disabled.reason,
        disabled_at=None if disabled is None else disabled.at,
    )


def _shown_target(target: Target) -> schemas.PlaceTarget | schemas.TripTarget:
    if isinstance(target, Place):
        return schemas.PlaceTarget(target.point.lat, target.point.lon)
    return schemas.TripTarget(
        start=Location(target.start.lat, target.start.lon),
        end=Location(target.end.lat, target.end.lon),
        activity_type=target.activity,
        departure=_hhmm(target.departure),
        days=sorted(target.days),
    )


def _shown_kind(kind: Kind) -> schemas.ObservedKind | schemas.ForecastKind:
    if isinstance(kind, Observed):
        return schemas.ObservedKind(kind.hysteresis_categories, kind.hysteresis_hours)
    return schemas.ForecastKind(kind.target_day.value, _hhmm(kind.send_at))

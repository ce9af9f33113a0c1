"""POST /v1/routes and GET /v1/routes/{request_id}: asynchronous route plans (4.5, 4.6)."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from litestar import Request, get, post
from litestar.params import JSONBody, PathParameter

from cleanair_core.access.scopes import Scope
from cleanair_core.errors import Unprocessable, Violation
from cleanair_core.geo import Point
from cleanair_http import responses, schemas
from cleanair_http.auth import authorization_of, core_of, requires
from cleanair_http.offloading import in_thread
from cleanair_http.openapi import SECURITY, error_responses


@post(
    "/v1/routes",
    status_code=202,
    opt=requires(Scope.ROUTES_PLAN, user_owned=True),
    security=SECURITY,
    summary="Submit a route plan",
    tags=["route plans"],
    responses=error_responses(
        400,
        401,
        403,
        422,
        429,
        s400="Start and end are over 15 km apart, or start_time is outside the window air "
        "data exists for (not charged)",
        s403="Scope routes:plan missing, owner not premium, or a partner-owned connection",
    ),
)
async def submit_plan(
    request: Request[Any, Any, Any], data: JSONBody[schemas.PlanRouteRequest]
) -> schemas.PlanSubmitted:
    """Plan cleaner routes between `start` and `end` (25 credits). Answers at once with the
    `request_id` to poll; the plan runs in the background."""
    core, proof = core_of(request), authorization_of(request)
    plan_id = await in_thread(
        lambda: core.submit_plan(
            proof,
            start=Point(data.start.latitude, data.start.longitude),
            end=Point(data.end.latitude, data.end.longitude),
            activity=data.activity_type,
            start_time=data.start_time,
        )
    )
    wake_planners(request)
    return responses.plan_submitted(plan_id)


@get(
    "/v1/routes/{request_id:str}",
    status_code=200,
    # A lapsed user may still collect a plan already paid for: no premium check.
    opt=requires(Scope.ROUTES_PLAN, premium=False, polls=True),
    security=SECURITY,
    summary="Poll a route plan",
    tags=["route plans"],
    responses=error_responses(
        401,
        403,
        404,
        422,
        429,
        s403="Scope routes:plan missing",
        s404="No such plan, or it belongs to another user",
        s422="request_id is not a valid UUID",
        s429="Over 60 polls a minute on this connection; see Retry-After",
    ),
)
async def poll_plan(
    request: Request[Any, Any, Any],
    # Checked here rather than typed uuid.UUID: Litestar would answer a malformed id with
    # 400, the contract says 422; the document still says what is expected.
    request_id: Annotated[
        str,
        PathParameter(format="uuid", description="The request_id the plan was submitted with"),
    ],
) -> schemas.PlanPollResponse:
    """The plan's status, its result once `completed`, or its error once `failed`. Free, and
    open to any connection of the owning user, premium or not."""
    plan_id = plan_id_of(request_id)
    core, proof = core_of(request), authorization_of(request)
    plan = await core.store_calls(lambda: core.poll_plan(proof, plan_id))
    return responses.plan_poll(plan)


_REQUEST_ID = Violation("request_id", "format", "must be a UUID in its hyphenated form")


def plan_id_of(request_id: str) -> uuid.UUID:
    """The plan id a poll's path names; Unprocessable unless it is a UUID in its canonical
    hyphenated form (any case)."""
    try:
        plan_id = uuid.UUID(request_id)
    except ValueError:
        raise Unprocessable(violations=[_REQUEST_ID]) from None
    if str(plan_id) != request_id.lower():  # braces, urn: or no hyphens: not the uuid format
        raise Unprocessable(violations=[_REQUEST_ID])
    return plan_id


def wake_planners(request: Request[Any, Any, Any]) -> None:
    """A plan (of either kind) was stored: wake the plan runners, where the app was given a
    way to (`create_app`'s `wake_planners`)."""
    wake = request.app.state.wake_planners
    if wake is not None:
        wake()

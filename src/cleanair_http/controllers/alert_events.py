"""The alert feed under /ext/v1 (issue 32): a user's alert events in order, for clients that
poll rather than receive webhooks."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from litestar import Request, get
from litestar.params import Parameter

from cleanair_core.access.scopes import Scope
from cleanair_core.errors import Unprocessable, Violation
from cleanair_core.use_cases.alert_feed import DEFAULT_FEED_PAGE, MAX_FEED_PAGE, FeedPage
from cleanair_http.alert_feed_schemas import AlertFeedEvent, AlertFeedPage
from cleanair_http.auth import authorization_of, core_of, requires
from cleanair_http.controllers.extension import TAG
from cleanair_http.openapi import SECURITY, extension_error_responses

# Plain ASCII digits only: `int()` would also take "+5", " 5" and other scripts' digits.
_MAX_DIGITS = 18


@get(
    "/ext/v1/alerts/events",
    status_code=200,
    # Polled like a plan: free, the same per-connection polling limit, no premium check (a
    # user whose plan lapsed still reads what was sent).
    opt=requires(Scope.AQ_READ, premium=False, user_owned=True, polls=True),
    security=SECURITY,
    summary="Read the alert feed",
    tags=[TAG],
    responses=extension_error_responses(
        401,
        403,
        422,
        429,
        s403="Scope aq:read missing, or a partner-owned connection",
        s422=f"`after` is not an integer of 0 or more, or `limit` not one of 1-{MAX_FEED_PAGE}",
        s429="Over 60 polls a minute on this connection (plan polls included); see Retry-After",
    ),
)
async def alert_events(
    request: Request[Any, Any, Any],
    after: Annotated[
        str | None,
        Parameter(
            description="The cursor of the last event read (`next_after` of the previous "
            "page); 0 or absent for the first"
        ),
    ] = None,
    limit: Annotated[
        str | None,
        Parameter(
            description=f"The most events to answer, 1-{MAX_FEED_PAGE} (default "
            f"{DEFAULT_FEED_PAGE})"
        ),
    ] = None,
) -> AlertFeedPage:
    """The user's alert events after the cursor `after`, in the order they were decided,
    with their webhook bodies. Every connection of the user reads the events of all the
    user's subscriptions. Free, as a plan's poll."""
    page_after = _count("after", after, 0)
    page_limit = _count("limit", limit, DEFAULT_FEED_PAGE)
    core, proof = core_of(request), authorization_of(request)
    page = await core.store_calls(lambda: core.read_alert_feed(proof, page_after, page_limit))
    return _page(page)


def _count(name: str, text: str | None, default: int) -> int:
    """A query parameter's whole number; Unprocessable (naming only the parameter) unless it
    is a plain decimal."""
    if text is None:
        return default
    if not (text.isascii() and text.isdigit()) or len(text) > _MAX_DIGITS:
        raise Unprocessable(violations=[Violation(name, "type", "must be a whole number")])
    return int(text)


def _page(page: FeedPage) -> AlertFeedPage:
    return AlertFeedPage(
        events=[
            AlertFeedEvent(
                cursor=entry.cursor,
                id=entry.event_id,
                subscription_id=entry.subscription_id,
                recorded_at=entry.created_at,
                payload=msgspec.json.decode(entry.payload),
            )
            for entry in page.events
        ],
        next_after=page.next_after,
        more=page.more,
    )


ROUTE_HANDLERS = (alert_events,)

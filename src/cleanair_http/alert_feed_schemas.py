"""msgspec structs of the alert feed (`GET /ext/v1/alerts/events`, issue 32)."""

from __future__ import annotations

import datetime
import uuid
from typing import Annotated, Any

import msgspec


class AlertFeedEvent(msgspec.Struct):
    cursor: Annotated[
        int,
        msgspec.Meta(
            ge=1,
            description="The event's place in the user's feed, from 1 with no gaps; ask for "
            "the events `after` it next",
        ),
    ]
    id: Annotated[
        uuid.UUID,
        msgspec.Meta(
            description="The event's stable id; its webhook's `webhook-id` is `msg_` and "
            "this id, so an event received both ways, or twice, is known as one"
        ),
    ]
    subscription_id: Annotated[uuid.UUID, msgspec.Meta(description="The subscription it is for")]
    recorded_at: Annotated[
        datetime.datetime, msgspec.Meta(description="When the service decided it (UTC)")
    ]
    payload: Annotated[
        dict[str, Any],
        msgspec.Meta(
            description="What the webhook sends as its body: `type`, `timestamp` and `data` "
            '(docs/alerts.md, "Messages")'
        ),
    ]


class AlertFeedPage(msgspec.Struct):
    events: Annotated[
        list[AlertFeedEvent], msgspec.Meta(description="The events after the cursor, in order")
    ]
    next_after: Annotated[
        int,
        msgspec.Meta(
            ge=0,
            description="The cursor to ask for next: the last event's, or the one asked for "
            "when the page is empty",
        ),
    ]
    more: Annotated[
        bool,
        msgspec.Meta(description="Whether more events were already there after this page"),
    ]

"""Many alert subscriptions that all alert at once, for the tests of concurrent alert workers
(issue 32: "two workers on PostgreSQL never decide the same event twice").

Each is a forecast place subscription on today's worst hour at or past category 0 (always),
sent from 00:00 local time (already past), as `tests/e2e/test_alert_processes.py` makes one
through the API: its first evaluation records exactly one event, charged one credit.
Subscriptions are stored through the store API, not the HTTP API, whose rate limits would
make a few hundred creations slow.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, time

from cleanair_core.air.indexes import eu_eaqi
from cleanair_core.alerts.events import Direction
from cleanair_core.alerts.subscriptions import (
    MAX_SUBSCRIPTIONS_PER_USER,
    Audience,
    Forecast,
    Place,
    Subscription,
    TargetDay,
)
from cleanair_core.geo import Point

#: Grid cells 0.01 degrees apart around Helsinki: a few cells, many subscriptions in each.
HELSINKI = Point(60.1699, 24.9384)


def away_from_midnight(at: datetime) -> str:
    """A fixed-offset IANA zone (`Etc/GMT-3` is UTC+3) whose clock reads about noon at
    `at`: a "today" forecast made then stays about one local day however long a slow test
    takes, whatever the hour it runs at."""
    offset = 12 - at.astimezone(UTC).hour  # -11 .. 12
    if offset == 0:
        return "Etc/GMT"
    # The Etc zones' signs are POSIX's, the reverse of ISO 8601's.
    return f"Etc/GMT{'-' if offset > 0 else '+'}{abs(offset)}"


def alerting_at_once(
    owner: str,
    created_at: datetime,
    *,
    point: Point = HELSINKI,
    webhook_url: str | None = None,
    timezone: str | None = None,
) -> Subscription:
    """A subscription of `owner` whose first evaluation alerts: today's forecast, from
    00:00 in `timezone` (default: one where `created_at` is about noon), at or past the
    EAQI's lowest category."""
    return Subscription(
        id=uuid.uuid4(),
        owner=owner,
        connection_id=f"connection-of-{owner}",
        created_at=created_at,
        target=Place(point),
        index=eu_eaqi.CODE,
        threshold=0,
        direction=Direction.WORSE,
        audience=Audience.GENERAL,
        kind=Forecast(TargetDay.TODAY, send_at=time(0)),
        timezone=timezone or away_from_midnight(created_at),
        webhook_url=webhook_url,
    )


def workload(
    owners: Sequence[str],
    created_at: datetime,
    *,
    per_owner: int = MAX_SUBSCRIPTIONS_PER_USER,
    origin: Point = HELSINKI,
    cells: int = 3,
    webhook_url: str | None = None,
    webhook_every: int = 3,
    seed: int = 32,
    timezone: str | None = None,
) -> list[Subscription]:
    """`per_owner` subscriptions for each of `owners` (at most the per-user limit), spread
    over `cells` cells northwards from `origin`'s, every `webhook_every`-th with
    `webhook_url` (when given), shuffled: workers claim by cell and id, so one claim, and
    one transaction, holds several owners' subscriptions in an order unrelated to the
    owners'."""
    made = []
    for number in range(len(owners) * per_owner):
        point = Point(origin.lat + 0.01 * (number % cells), origin.lon)
        url = webhook_url if number % webhook_every == 0 else None
        owner = owners[number % len(owners)]
        made.append(
            alerting_at_once(owner, created_at, point=point, webhook_url=url, timezone=timezone)
        )
    random.Random(seed).shuffle(made)
    return made

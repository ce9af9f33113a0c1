"""The stored form of an alert subscription, shared by the SQLite and PostgreSQL adapters: one
row of `subscriptions` (its evaluator state, `state` and `state_version`, is read apart).

A place keeps its point in `lat`/`lon`; a trip its start there, its end in `end_lat`/`end_lon`
and its activity, departure and days (ISO weekdays as digits, `12345`). The observed kind
fills the hysteresis columns, the forecast kind `target_day` and `send_at`. Wall-clock times
are ISO text (`21:00:00`). Each adapter passes how it stores an instant (SQLite: seconds
since the epoch; PostgreSQL: TIMESTAMPTZ as it is). The webhook secret is not a column: it is
derived from the server key and `secret_generation` (`cleanair_core.alerts.webhook_secrets`).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from datetime import datetime, time
from typing import Any

from cleanair_core.alerts.events import Direction
from cleanair_core.alerts.quiet_hours import QuietHours
from cleanair_core.alerts.subscriptions import (
    Audience,
    Disabled,
    Forecast,
    Kind,
    Observed,
    Place,
    Status,
    Subscription,
    Target,
    TargetDay,
    Trip,
)
from cleanair_core.geo import Point
from cleanair_core.routes.network import PlanActivityType

#: The columns `subscription_from_row` reads and `subscription_row` writes, in their order.
SUBSCRIPTION_COLUMNS = (
    "id, owner, connection_id, created_at, target, lat, lon, end_lat, end_lon, activity, "
    "departure, days, index_code, threshold, direction, audience, kind, "
    "hysteresis_categories, hysteresis_hours, target_day, send_at, timezone, quiet_start, "
    "quiet_end, webhook_url, secret_generation, previous_generation_until, disabled_reason, "
    "disabled_at"
)
COLUMN_COUNT = SUBSCRIPTION_COLUMNS.count(",") + 1
#: Which rows are of a status: a disabled subscription has a reason.
_STATUS_CONDITIONS = {
    Status.ACTIVE: " AND disabled_reason IS NULL",
    Status.DISABLED: " AND disabled_reason IS NOT NULL",
}


def page_query(placeholder: str, status: Status | None) -> str:
    """The SELECT of one page of `all_subscriptions`, with two parameters (written
    `placeholder`): the id to start after, the empty text for the first page (every id comes
    after it), and the page's size. Ids are the lower-case text of UUIDs, all of one length
    with their hyphens in the same places, so the bytewise order of the text (SQLite's
    BINARY, PostgreSQL's "C" collation of the column) is the UUIDs' order, as
    `uuid.UUID` compares them; the primary key's index serves the scan."""
    only = "" if status is None else _STATUS_CONDITIONS[status]
    return (
        f"SELECT {SUBSCRIPTION_COLUMNS} FROM subscriptions "  # noqa: S608
        f"WHERE id > {placeholder}{only} ORDER BY id LIMIT {placeholder}"
    )


def subscription_row(
    subscription: Subscription, stored: Callable[[datetime], Any]
) -> tuple[Any, ...]:
    """The values of `SUBSCRIPTION_COLUMNS` for `subscription`, instants as `stored`."""

    def maybe(at: datetime | None) -> Any:
        return None if at is None else stored(at)

    target = subscription.target
    if isinstance(target, Place):
        where: tuple[Any, ...] = ("place", target.point.lat, target.point.lon)
        where += (None, None, None, None, None)
    else:
        where = ("trip", target.start.lat, target.start.lon, target.end.lat, target.end.lon)
        days = "".join(str(day) for day in sorted(target.days))
        where += (target.activity.value, target.departure.isoformat(), days)
    kind = subscription.kind
    if isinstance(kind, Observed):
        how: tuple[Any, ...] = ("observed", kind.hysteresis_categories, kind.hysteresis_hours)
        how += (None, None)
    else:
        how = ("forecast", None, None, kind.target_day.value, kind.send_at.isoformat())
    quiet = subscription.quiet_hours
    disabled = subscription.disabled
    return (
        str(subscription.id),
        subscription.owner,
        subscription.connection_id,
        stored(subscription.created_at),
        *where,
        subscription.index,
        subscription.threshold,
        subscription.direction.value,
        subscription.audience.value,
        *how,
        subscription.timezone,
        None if quiet is None else quiet.start.isoformat(),
        None if quiet is None else quiet.end.isoformat(),
        subscription.webhook_url,
        subscription.secret_generation,
        maybe(subscription.previous_generation_until),
        None if disabled is None else disabled.reason,
        None if disabled is None else stored(disabled.at),
    )


def subscription_from_row(row: Sequence[Any], instant: Callable[[Any], datetime]) -> Subscription:
    """The subscription a row of `SUBSCRIPTION_COLUMNS` holds, instants read with `instant`."""
    (
        subscription_id,
        owner,
        connection_id,
        created_at,
        target_kind,
        lat,
        lon,
        end_lat,
        end_lon,
        activity,
        departure,
        days,
        index_code,
        threshold,
        direction,
        audience,
        kind_name,
        hysteresis_categories,
        hysteresis_hours,
        target_day,
        send_at,
        timezone,
        quiet_start,
        quiet_end,
        webhook_url,
        secret_generation,
        previous_generation_until,
        disabled_reason,
        disabled_at,
    ) = row
    target: Target
    if target_kind == "place":
        target = Place(Point(lat, lon))
    else:
        target = Trip(
            start=Point(lat, lon),
            end=Point(end_lat, end_lon),
            activity=PlanActivityType(str(activity)),
            departure=time.fromisoformat(str(departure)),
            days=frozenset(int(day) for day in str(days)),
        )
    kind: Kind
    if kind_name == "observed":
        kind = Observed(int(hysteresis_categories), int(hysteresis_hours))
    else:
        kind = Forecast(TargetDay(str(target_day)), time.fromisoformat(str(send_at)))
    quiet = (
        None
        if quiet_start is None
        else QuietHours(time.fromisoformat(str(quiet_start)), time.fromisoformat(str(quiet_end)))
    )
    return Subscription(
        id=uuid.UUID(str(subscription_id)),
        owner=str(owner),
        connection_id=str(connection_id),
        created_at=instant(created_at),
        target=target,
        index=None if index_code is None else str(index_code),
        threshold=int(threshold),
        direction=Direction(str(direction)),
        audience=Audience(str(audience)),
        kind=kind,
        timezone=str(timezone),
        quiet_hours=quiet,
        webhook_url=None if webhook_url is None else str(webhook_url),
        secret_generation=int(secret_generation),
        previous_generation_until=(
            None if previous_generation_until is None else instant(previous_generation_until)
        ),
        disabled=(
            None
            if disabled_reason is None
            else Disabled(str(disabled_reason), instant(disabled_at))
        ),
    )

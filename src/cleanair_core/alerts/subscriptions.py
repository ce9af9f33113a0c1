"""Alert subscriptions: what a user asked to be told about, its validation and the storage
port (issue 32; docs/alerts.md, "Subscriptions").

A subscription watches a place or a trip on an official index, past a threshold category in a
direction, either as the hours are observed (episodes with an all-clear) or as a day's
forecast at a local sending time. It belongs to a user (`owner`, the user's name, as a plan's
owner is) and remembers the connection that made it. Its webhook secret is never stored: see
`webhook_secrets`.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from datetime import datetime, time
from enum import StrEnum
from typing import Protocol, TypeAlias
from zoneinfo import ZoneInfo

import attrs

from cleanair_core.air.indexes import eu_eaqi, uk_daqi, us_epa
from cleanair_core.alerts.destinations import DestinationPolicy, InvalidWebhookUrl
from cleanair_core.alerts.events import Direction
from cleanair_core.alerts.quiet_hours import QuietHours
from cleanair_core.errors import Unprocessable, Violation
from cleanair_core.geo import Point, distance_m
from cleanair_core.routes.network import PlanActivityType
from cleanair_core.routes.plans import MAX_PLAN_DISTANCE_M

#: Subscriptions one user may hold, disabled ones included (deleting one frees its place).
#: Each is evaluated every hour and may send a webhook: the bound keeps one user's share of
#: that work small, and is still far above the three place alerts and a trip alert the issue
#: sizes the credit pool for.
MAX_SUBSCRIPTIONS_PER_USER = 20
#: An observed episode ends after this many hours in a row ...
DEFAULT_HYSTERESIS_HOURS = 2
#: ... each this many categories on the good side of the threshold.
DEFAULT_HYSTERESIS_CATEGORIES = 1
#: The longest hysteresis: past two days, an all-clear comes too late to tell anything.
MAX_HYSTERESIS_HOURS = 48
#: Categories of each official index alerts can name (0 is the best); a category is the
#: index's band (EAQI, DAQI) or category (US AQI), not its number.
INDEX_CATEGORIES: dict[str, int] = {
    us_epa.CODE: len(us_epa.CATEGORIES),
    eu_eaqi.CODE: len(eu_eaqi.BANDS),
    uk_daqi.CODE: len(uk_daqi.BANDS),
}
#: Without a named index the place's own official index applies, which is known only where
#: the place is: the threshold must then be valid on every index.
DEFAULT_INDEX_CATEGORIES = min(INDEX_CATEGORIES.values())
#: What an IANA zone name looks like; the upper-case start leaves out the files of a zone
#: directory that are not zones (`localtime`, `posixrules`).
_ZONE_NAME = re.compile(r"[A-Z][A-Za-z0-9_+-]*(/[A-Za-z0-9_+-]+){0,2}")
_MAX_ZONE_NAME = 64


class Audience(StrEnum):
    """Whose advice an alert carries: the index's general advice, or its advice for
    sensitive groups (people with heart or lung conditions, children, older adults)."""

    GENERAL = "general"
    SENSITIVE = "sensitive"


class TargetDay(StrEnum):
    """Which local day a forecast alert is about, seen from its sending time."""

    TODAY = "today"
    TOMORROW = "tomorrow"


class Status(StrEnum):
    ACTIVE = "active"
    DISABLED = "disabled"


@attrs.frozen
class Place:
    """Alerts on the air at one point."""

    point: Point


@attrs.frozen
class Trip:
    """Alerts on a usual trip: from `start` to `end` by `activity`, leaving at the local
    wall-clock time `departure` on the ISO weekdays `days` (1 is Monday, 7 Sunday)."""

    start: Point
    end: Point
    activity: PlanActivityType
    departure: time
    days: frozenset[int]


Target: TypeAlias = Place | Trip


@attrs.frozen
class Observed:
    """Alert when the current hour crosses the threshold; the episode ends (an all-clear)
    after `hysteresis_hours` hours in a row at least `hysteresis_categories` categories
    back on the good side (`episodes`)."""

    hysteresis_categories: int = DEFAULT_HYSTERESIS_CATEGORIES
    hysteresis_hours: int = DEFAULT_HYSTERESIS_HOURS


@attrs.frozen
class Forecast:
    """At the local wall-clock time `send_at`, alert when the worst forecast hour of
    `target_day` is past the threshold (`forecasts`)."""

    target_day: TargetDay
    send_at: time


Kind: TypeAlias = Observed | Forecast


@attrs.frozen
class Disabled:
    """Why and when a subscription stopped (an endpoint that kept failing, an operator):
    `reason` is shown to its owner."""

    reason: str
    at: datetime


@attrs.frozen(kw_only=True)
class Subscription:
    """One alert subscription. `index` None is the place's own official index. The webhook
    is signed with the secret of `secret_generation`, and while a rotation's overlap runs
    (until `previous_generation_until`) with the previous generation's too; `webhook_url`
    None is a feed-only subscription. `disabled` None is an active one."""

    id: uuid.UUID
    owner: str
    connection_id: str
    created_at: datetime
    target: Target
    index: str | None
    threshold: int
    direction: Direction
    audience: Audience
    kind: Kind
    timezone: str
    quiet_hours: QuietHours | None = None
    webhook_url: str | None = None
    secret_generation: int = 1
    previous_generation_until: datetime | None = None
    disabled: Disabled | None = None

    @property
    def status(self) -> Status:
        return Status.ACTIVE if self.disabled is None else Status.DISABLED

    @property
    def zone(self) -> ZoneInfo:
        """The subscription's timezone (valid once `check_subscription` passed)."""
        return ZoneInfo(self.timezone)


def categories_of(index: str | None) -> int:
    """How many categories a threshold may name on `index` (a known code or None)."""
    return DEFAULT_INDEX_CATEGORIES if index is None else INDEX_CATEGORIES[index]


def is_zone_name(name: str) -> bool:
    """Whether `name` is an IANA timezone this machine knows (`Europe/Paris`, `UTC`)."""
    if len(name) > _MAX_ZONE_NAME or not _ZONE_NAME.fullmatch(name):
        return False
    try:
        ZoneInfo(name)
    except (ValueError, KeyError, OSError):  # ZoneInfoNotFoundError is a KeyError
        return False
    return True


def check_subscription(subscription: Subscription, policy: DestinationPolicy) -> None:
    """Raise Unprocessable listing every rule `subscription` breaks (its fields by their
    names in the model, dotted: `target.days`, `kind.send_at`), never its values."""
    violations = list(_violations(subscription, policy))
    if violations:
        raise Unprocessable(violations=violations)


def _violations(subscription: Subscription, policy: DestinationPolicy) -> Sequence[Violation]:
    found: list[Violation] = []
    target = subscription.target
    if isinstance(target, Trip):
        found += _trip_violations(target)
    index = subscription.index
    known_index = index is None or index in INDEX_CATEGORIES
    if not known_index:
        codes = ", ".join(f'"{code}"' for code in INDEX_CATEGORIES)
        found.append(Violation("index", "enum", f"must be one of {codes}"))
    threshold = subscription.threshold
    if threshold < 0:
        found.append(Violation("threshold", "minimum", "must be at least 0"))
    elif known_index and threshold >= categories_of(index):
        found.append(Violation("threshold", "maximum", _threshold_bound(index)))
    kind = subscription.kind
    if isinstance(kind, Observed):
        found += _observed_violations(kind, subscription.direction, threshold, index)
    elif not _is_wall_time(kind.send_at):
        found.append(Violation("kind.send_at", "format", "must be a local time without a zone"))
    if not is_zone_name(subscription.timezone):
        found.append(
            Violation("timezone", "format", "must be an IANA timezone name, e.g. Europe/Paris")
        )
    if subscription.webhook_url is not None:
        try:
            policy.validate_url(subscription.webhook_url, field="webhook_url")
        except InvalidWebhookUrl as error:
            found += error.violations
    return found


def _threshold_bound(index: str | None) -> str:
    most = categories_of(index) - 1
    if index is None:
        return f"must be at most {most} without a named index (name one for more)"
    return f"must be at most {most} on that index"


def _trip_violations(trip: Trip) -> list[Violation]:
    found: list[Violation] = []
    if distance_m(trip.start, trip.end) > MAX_PLAN_DISTANCE_M:
        kilometres = round(MAX_PLAN_DISTANCE_M / 1000)
        found.append(
            Violation("target.end", "maximum", f"must be at most {kilometres} km from start")
        )
    if not _is_wall_time(trip.departure):
        found.append(Violation("target.departure", "format", "must be a local time without a zone"))
    if not trip.days:
        found.append(Violation("target.days", "too_short", "must name at least one day"))
    elif not trip.days <= set(range(1, 8)):
        found.append(
            Violation("target.days", "enum", "must be ISO weekdays, 1 (Monday) to 7 (Sunday)")
        )
    return found


def _observed_violations(
    kind: Observed, direction: Direction, threshold: int, index: str | None
) -> list[Violation]:
    found: list[Violation] = []
    if kind.hysteresis_categories < 1:
        found.append(Violation("kind.hysteresis_categories", "minimum", "must be at least 1"))
    elif index is None or index in INDEX_CATEGORIES:
        # The all-clear needs a category that many steps back on the good side of the
        # threshold: with none, an episode could never end.
        room = threshold if direction is Direction.WORSE else categories_of(index) - 1 - threshold
        if 0 <= threshold < categories_of(index) and kind.hysteresis_categories > room:
            found.append(
                Violation(
                    "kind.hysteresis_categories",
                    "maximum",
                    "must leave that many categories on the other side of the threshold",
                )
            )
    if kind.hysteresis_hours < 1:
        found.append(Violation("kind.hysteresis_hours", "minimum", "must be at least 1"))
    elif kind.hysteresis_hours > MAX_HYSTERESIS_HOURS:
        found.append(
            Violation("kind.hysteresis_hours", "maximum", f"must be at most {MAX_HYSTERESIS_HOURS}")
        )
    return found


def _is_wall_time(value: time) -> bool:
    return value.tzinfo is None


class TooManySubscriptions(Unprocessable):
    """A user who already holds `MAX_SUBSCRIPTIONS_PER_USER` subscriptions asked for another."""

    def __init__(self, limit: int) -> None:
        super().__init__(
            "Too many alert subscriptions",
            violations=[Violation("", "maximum", f"at most {limit} subscriptions per user")],
        )
        self.limit = limit


def checked_page_limit(limit: int) -> int:
    """`limit` if a page of `SubscriptionStore.all_subscriptions` may hold that many; else
    ValueError (SQLite would read a negative limit as none, PostgreSQL refuse it)."""
    if limit < 1:
        raise ValueError("a page holds at least 1 subscription")
    return limit


@attrs.frozen
class StoredState:
    """The evaluator's state of a subscription as stored: `blob` is the JSON of its
    `ObservedState` or `ForecastState` (`alert_states`), None before its first evaluation;
    `version` counts the saves (0 before the first), for compare-and-set."""

    version: int
    blob: str | None


class SubscriptionStore(Protocol):
    """Alert subscriptions shared by every process on one database, and each one's
    evaluator state."""

    def add_subscription(
        self, subscription: Subscription, limit: int = MAX_SUBSCRIPTIONS_PER_USER
    ) -> None:
        """Store a new subscription (state version 0, no state) unless its owner already
        holds `limit`: the count and the insert are one transaction, so concurrent creations
        in any process never leave more. TooManySubscriptions (nothing stored) over the
        limit, DuplicateEntry when its id is taken."""
        ...

    def get_subscription(self, subscription_id: uuid.UUID, owner: str) -> Subscription | None:
        """The subscription with that id if `owner` holds it; None otherwise (another user's
        is not found)."""
        ...

    def list_subscriptions(self, owner: str) -> list[Subscription]:
        """`owner`'s subscriptions, oldest first (`created_at`, then the id's text)."""
        ...

    def find_subscription(self, subscription_id: uuid.UUID) -> Subscription | None:
        """The subscription with that id whoever its owner (for operators); None when there
        is none."""
        ...

    def all_subscriptions(
        self, after: uuid.UUID | None, limit: int, *, status: Status | None = None
    ) -> list[Subscription]:
        """One page of every owner's subscriptions in id order: at most `limit` (at least 1;
        ValueError otherwise) whose id comes after `after` (None: from the first), only
        those of `status` when given. The next page starts after the last id of this one; a
        page shorter than `limit` is the last. Each page is its own read, so a subscription
        added during a scan is seen only if its id comes after the page being read (the next
        scan sees it), and one deleted during it is not seen again."""
        ...

    def delete_subscription(self, subscription_id: uuid.UUID, owner: str) -> bool:
        """Delete `owner`'s subscription and its state; False when `owner` holds none by
        that id."""
        ...

    def disable_subscription(self, subscription_id: uuid.UUID, reason: str, at: datetime) -> bool:
        """Disable an active subscription, keeping why and when for its owner (the outbox
        and operators call this, whoever the owner); False when there is no such active
        subscription (a disabled one keeps its first reason)."""
        ...

    def rotate_subscription_secret(
        self, subscription_id: uuid.UUID, owner: str, previous_until: datetime
    ) -> Subscription | None:
        """Move `owner`'s subscription to its next secret generation, the previous one
        signing too until `previous_until`; the subscription as rotated (whose generation
        gives the new secret), or None when `owner` holds none by that id. Two rotations
        at once each get a generation of their own."""
        ...

    def load_subscription_state(self, subscription_id: uuid.UUID) -> StoredState | None:
        """The subscription's evaluator state; None when there is no such subscription."""
        ...

    def save_subscription_state(
        self, subscription_id: uuid.UUID, expected_version: int, blob: str
    ) -> bool:
        """Replace the state with `blob` if its version is still `expected_version`,
        counting one more version; False (nothing written) when another save came first or
        the subscription is gone. Of two workers saving from the same version, one wins."""
        ...

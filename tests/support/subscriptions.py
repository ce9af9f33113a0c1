"""Alert subscriptions for tests: a plain one to build on, and hypothesis strategies drawing
valid ones of every shape (place or trip, observed or forecast, with or without an index,
quiet hours and a webhook)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, time

from hypothesis import strategies as st

from cleanair_core.alerts.events import Direction
from cleanair_core.alerts.quiet_hours import QuietHours
from cleanair_core.alerts.subscriptions import (
    INDEX_CATEGORIES,
    MAX_HYSTERESIS_HOURS,
    Audience,
    Disabled,
    Forecast,
    Kind,
    Observed,
    Place,
    Subscription,
    Target,
    TargetDay,
    Trip,
    categories_of,
)
from cleanair_core.geo import Point
from cleanair_core.routes.network import PlanActivityType

# Microseconds on purpose: instants must survive the round trip through each adapter.
T0 = datetime(2026, 11, 28, 7, 30, 15, 250_000, tzinfo=UTC)
PARIS = Point(48.8566, 2.3522)
ZONES = (
    "Europe/Paris",
    "UTC",
    "America/New_York",
    "Asia/Kolkata",
    "Australia/Lord_Howe",
    "Etc/GMT+5",
    "America/Argentina/Buenos_Aires",
)
REASONS = ("status 404 on 20 deliveries in a row", "disabled by an operator")
URLS = ("https://hooks.example.com/alerts", "https://example.org:8443/in?token=s3cr3t")


def make_subscription(
    owner: str = "alice",
    *,
    created_at: datetime = T0,
    subscription_id: uuid.UUID | None = None,
    webhook_url: str | None = URLS[0],
) -> Subscription:
    """An observed place subscription on the EAQI, worse than "Moderate"."""
    return Subscription(
        id=subscription_id or uuid.uuid4(),
        owner=owner,
        connection_id=str(uuid.uuid4()),
        created_at=created_at,
        target=Place(PARIS),
        index="eu_eaqi_2024",
        threshold=3,
        direction=Direction.WORSE,
        audience=Audience.GENERAL,
        kind=Observed(),
        timezone="Europe/Paris",
        quiet_hours=QuietHours(time(22), time(7)),
        webhook_url=webhook_url,
    )


wall_times = st.times()
# Whole microseconds in UTC, as every adapter gives instants back.
instants = st.datetimes(
    min_value=datetime(2001, 1, 1),  # noqa: DTZ001 - hypothesis takes naive bounds
    max_value=datetime(2100, 1, 1),  # noqa: DTZ001
    timezones=st.just(UTC),
)
points = st.builds(
    Point,
    st.floats(min_value=-60, max_value=60, allow_nan=False),
    st.floats(min_value=-170, max_value=170, allow_nan=False),
)


@st.composite
def trips(draw: st.DrawFn) -> Trip:
    start = draw(points)
    # Up to 0.05 degrees either way: at most some 8 km, inside the 15 km a trip may span.
    offset = st.floats(min_value=-0.05, max_value=0.05, allow_nan=False)
    end = Point(start.lat + draw(offset), start.lon + draw(offset))
    return Trip(
        start=start,
        end=end,
        activity=draw(st.sampled_from(PlanActivityType)),
        departure=draw(wall_times),
        days=draw(st.frozensets(st.integers(min_value=1, max_value=7), min_size=1)),
    )


targets: st.SearchStrategy[Target] = st.one_of(st.builds(Place, points), trips())
quiet_hours = st.none() | st.tuples(wall_times, wall_times).filter(lambda p: p[0] != p[1]).map(
    lambda p: QuietHours(*p)
)


@st.composite
def subscriptions(draw: st.DrawFn, owner: str | None = None) -> Subscription:
    """A valid subscription of any shape (`check_subscription` passes under the default
    destination policy)."""
    index = draw(st.none() | st.sampled_from(sorted(INDEX_CATEGORIES)))
    count = categories_of(index)
    direction = draw(st.sampled_from(Direction))
    kind: Kind
    if draw(st.booleans()):
        # An episode must be able to end: the hysteresis leaves room on the good side.
        if direction is Direction.WORSE:
            threshold = draw(st.integers(min_value=1, max_value=count - 1))
            room = threshold
        else:
            threshold = draw(st.integers(min_value=0, max_value=count - 2))
            room = count - 1 - threshold
        kind = Observed(
            draw(st.integers(min_value=1, max_value=room)),
            draw(st.integers(min_value=1, max_value=MAX_HYSTERESIS_HOURS)),
        )
    else:
        threshold = draw(st.integers(min_value=0, max_value=count - 1))
        kind = Forecast(draw(st.sampled_from(TargetDay)), draw(wall_times))
    generation = draw(st.integers(min_value=1, max_value=1000))
    return Subscription(
        id=draw(st.uuids()),
        owner=owner if owner is not None else draw(st.sampled_from(["alice", "bob", "Zoë"])),
        connection_id=str(draw(st.uuids())),
        created_at=draw(instants),
        target=draw(targets),
        index=index,
        threshold=threshold,
        direction=direction,
        audience=draw(st.sampled_from(Audience)),
        kind=kind,
        timezone=draw(st.sampled_from(ZONES)),
        quiet_hours=draw(quiet_hours),
        webhook_url=draw(st.none() | st.sampled_from(URLS)),
        secret_generation=generation,
        previous_generation_until=None if generation == 1 else draw(st.none() | instants),
        disabled=draw(st.none() | st.builds(Disabled, st.sampled_from(REASONS), instants)),
    )

"""Alert subscriptions, pure: validation names every broken field and rule (never a value),
webhook secrets derived from the server key verify with the reference library
(`standardwebhooks`), and the evaluator state survives its JSON form."""

from __future__ import annotations

import hashlib
import hmac
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from typing import Self
from unittest import mock

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from standardwebhooks import webhooks
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from cleanair_core.alerts.alert_states import (
    AlertState,
    MalformedState,
    decode_state,
    encode_state,
)
from cleanair_core.alerts.destinations import DestinationPolicy
from cleanair_core.alerts.episodes import ObservedState
from cleanair_core.alerts.events import AlertEvent, Direction, EventKind
from cleanair_core.alerts.forecasts import ForecastState
from cleanair_core.alerts.signatures import SigningSecret, message_id, sign
from cleanair_core.alerts.subscriptions import (
    DEFAULT_INDEX_CATEGORIES,
    MAX_HYSTERESIS_HOURS,
    Disabled,
    Forecast,
    Observed,
    Place,
    Status,
    Subscription,
    TargetDay,
    Trip,
    check_subscription,
    is_zone_name,
)
from cleanair_core.alerts.webhook_secrets import (
    SECRET_DOMAIN,
    signing_secrets,
    webhook_secret,
)
from cleanair_core.errors import Unprocessable, Violation
from cleanair_core.geo import Point
from cleanair_core.keys import TokenKeys
from cleanair_core.routes.network import PlanActivityType
from support.subscriptions import T0, instants, make_subscription, subscriptions

POLICY = DestinationPolicy()
KEYS = TokenKeys(bytes(range(32)))


def violations(subscription: Subscription) -> list[Violation]:
    try:
        check_subscription(subscription, POLICY)
    except Unprocessable as error:
        return list(error.violations)
    return []


# -- validation -------------------------------------------------------------------------------

Breaker = Callable[[Subscription], Subscription]


def _trip(subscription: Subscription) -> Trip:
    assert isinstance(subscription.target, Trip)
    return subscription.target


def _far_end(s: Subscription) -> Subscription:
    start = _trip(s).start
    end = Point(start.lat + (1.0 if start.lat < 0 else -1.0), start.lon)  # some 111 km
    return attrs.evolve(s, target=attrs.evolve(_trip(s), end=end))


def _observed(s: Subscription) -> Observed:
    assert isinstance(s.kind, Observed)
    return s.kind


def _forecast(s: Subscription) -> Forecast:
    assert isinstance(s.kind, Forecast)
    return s.kind


#: Per field: how to break it, and whether it applies to a subscription. The breakages keep
#: clear of one another: each names its own field only, whatever else is broken.
BREAKERS: dict[str, tuple[Breaker, Callable[[Subscription], bool]]] = {
    "target.end": (_far_end, lambda s: isinstance(s.target, Trip)),
    "target.departure": (
        lambda s: attrs.evolve(s, target=attrs.evolve(_trip(s), departure=time(8, tzinfo=UTC))),
        lambda s: isinstance(s.target, Trip),
    ),
    "target.days": (
        lambda s: attrs.evolve(s, target=attrs.evolve(_trip(s), days=frozenset({0, 3}))),
        lambda s: isinstance(s.target, Trip),
    ),
    "index": (lambda s: attrs.evolve(s, index="us_aqi"), lambda s: True),
    "threshold": (lambda s: attrs.evolve(s, threshold=-1), lambda s: True),
    "kind.hysteresis_categories": (
        lambda s: attrs.evolve(s, kind=attrs.evolve(_observed(s), hysteresis_categories=0)),
        lambda s: isinstance(s.kind, Observed),
    ),
    "kind.hysteresis_hours": (
        lambda s: attrs.evolve(
            s, kind=attrs.evolve(_observed(s), hysteresis_hours=MAX_HYSTERESIS_HOURS + 1)
        ),
        lambda s: isinstance(s.kind, Observed),
    ),
    "kind.send_at": (
        lambda s: attrs.evolve(s, kind=attrs.evolve(_forecast(s), send_at=time(21, tzinfo=UTC))),
        lambda s: isinstance(s.kind, Forecast),
    ),
    "timezone": (lambda s: attrs.evolve(s, timezone="Mars/Olympus_Mons"), lambda s: True),
    "webhook_url": (
        lambda s: attrs.evolve(s, webhook_url="http://hooks.example.com/secret-token"),
        lambda s: True,
    ),
}


@settings(max_examples=300, deadline=None)
@given(subscriptions())
def test_a_valid_subscription_passes(subscription: Subscription) -> None:
    check_subscription(subscription, POLICY)


@settings(max_examples=300, deadline=None)
@given(subscription=subscriptions(), data=st.data())
def test_every_broken_field_is_named_once_and_no_value_is_echoed(
    subscription: Subscription, data: st.DataObject
) -> None:
    applicable = sorted(field for field, (_, applies) in BREAKERS.items() if applies(subscription))
    broken = data.draw(st.sets(st.sampled_from(applicable), min_size=1))
    for field in broken:
        subscription = BREAKERS[field][0](subscription)
    found = violations(subscription)
    assert sorted(v.field for v in found) == sorted(broken)
    for violation in found:
        for value in ("Mars", "secret-token", "us_aqi"):
            assert value not in violation.message


def test_the_threshold_must_be_a_category_of_its_index() -> None:
    forecast = Forecast(TargetDay.TOMORROW, time(21))
    on_daqi = attrs.evolve(make_subscription(), index="uk_daqi", kind=forecast)
    assert violations(attrs.evolve(on_daqi, threshold=3)) == []
    assert violations(attrs.evolve(on_daqi, threshold=4)) == [
        Violation("threshold", "maximum", "must be at most 3 on that index")
    ]
    on_eaqi = attrs.evolve(on_daqi, index="eu_eaqi_2024")
    assert violations(attrs.evolve(on_eaqi, threshold=5)) == []
    assert violations(attrs.evolve(on_eaqi, threshold=6))[0].rule == "maximum"


def test_without_an_index_the_threshold_must_fit_every_index() -> None:
    default = attrs.evolve(make_subscription(), index=None)
    assert violations(attrs.evolve(default, threshold=DEFAULT_INDEX_CATEGORIES - 1)) == []
    assert violations(attrs.evolve(default, threshold=DEFAULT_INDEX_CATEGORIES)) == [
        Violation(
            "threshold",
            "maximum",
            f"must be at most {DEFAULT_INDEX_CATEGORIES - 1} without a named index "
            "(name one for more)",
        )
    ]


@pytest.mark.parametrize(
    ("direction", "threshold", "categories", "valid"),
    [
        (Direction.WORSE, 3, 3, True),  # clears at 0
        (Direction.WORSE, 3, 4, False),  # would need -1
        (Direction.WORSE, 0, 1, False),  # always past: could never end
        (Direction.BETTER, 4, 1, True),  # EAQI: clears at 5, the last category
        (Direction.BETTER, 5, 1, False),  # the last category: nothing beyond
    ],
)
def test_the_hysteresis_leaves_a_category_for_the_episode_to_end_in(
    direction: Direction, threshold: int, categories: int, valid: bool
) -> None:
    subscription = attrs.evolve(
        make_subscription(),
        direction=direction,
        threshold=threshold,
        kind=Observed(hysteresis_categories=categories),
    )
    expected = [] if valid else ["kind.hysteresis_categories"]
    assert [v.field for v in violations(subscription)] == expected


def test_a_trip_needs_a_day_and_at_most_15_km() -> None:
    paris, lyon = Point(48.8566, 2.3522), Point(45.764, 4.8357)
    trip = Trip(paris, lyon, PlanActivityType.CYCLING, time(8), frozenset())
    assert violations(attrs.evolve(make_subscription(), target=trip)) == [
        Violation("target.end", "maximum", "must be at most 15 km from start"),
        Violation("target.days", "too_short", "must name at least one day"),
    ]


@pytest.mark.parametrize(
    "name", ["Europe/Paris", "UTC", "Etc/GMT+5", "America/Argentina/Buenos_Aires"]
)
def test_iana_zone_names_are_accepted(name: str) -> None:
    assert is_zone_name(name)


@pytest.mark.parametrize(
    "name",
    ["", "Europe", "localtime", "posixrules", "../etc/passwd", "/etc/localtime", "Nope/Zone",
     "Europe/Paris\x00", "europe/paris", "A" * 300],
)  # fmt: skip
def test_what_is_not_a_zone_is_refused(name: str) -> None:
    assert not is_zone_name(name)


def test_a_new_subscription_is_active_and_a_disabled_one_says_why() -> None:
    subscription = make_subscription()
    assert subscription.status is Status.ACTIVE
    assert isinstance(subscription.target, Place)
    disabled = attrs.evolve(subscription, disabled=Disabled("status 410", T0))
    assert disabled.status is Status.DISABLED


# -- webhook secrets --------------------------------------------------------------------------


@contextmanager
def reference_clock(instant: datetime) -> Iterator[None]:
    """The reference library's clock at `instant` (it reads `datetime.now` itself)."""

    class Frozen(datetime):
        @classmethod
        def now(cls, tz: tzinfo | None = None) -> Self:
            return cls.fromtimestamp(instant.timestamp(), tz)

    with mock.patch.object(webhooks, "datetime", Frozen):
        yield


def verifies(secret: SigningSecret, payload: bytes, headers: dict[str, str]) -> bool:
    with reference_clock(T0):
        try:
            Webhook(secret.as_text()).verify(payload, headers, json_parse=False)
        except WebhookVerificationError:
            return False
    return True


def test_the_secret_is_the_documented_hmac() -> None:
    subscription_id = uuid.UUID("5b7cd0a4-1c2d-4e5f-8a9b-0c1d2e3f4a5b")
    expected = hmac.new(
        KEYS.key,
        b"cleanair webhook secret" + subscription_id.bytes + b"\x00\x00\x00\x02",
        hashlib.sha256,
    ).digest()
    assert SECRET_DOMAIN == b"cleanair webhook secret"
    assert webhook_secret(KEYS, subscription_id, 2).key == expected
    assert webhook_secret(KEYS, subscription_id, 2).as_text().startswith("whsec_")


@settings(max_examples=100, deadline=None)
@given(
    subscription_id=st.uuids(),
    generation=st.integers(min_value=1, max_value=2**32 - 2),
    payload=st.text().map(str.encode),
)
def test_the_reference_library_verifies_a_derived_secrets_signature(
    subscription_id: uuid.UUID, generation: int, payload: bytes
) -> None:
    secret = webhook_secret(KEYS, subscription_id, generation)
    headers = sign([secret], message_id(str(uuid.uuid4())), T0, payload)
    assert verifies(secret, payload, headers)
    # Another generation, another subscription, another server key: another secret.
    others = [
        webhook_secret(KEYS, subscription_id, generation + 1),
        webhook_secret(KEYS, uuid.UUID(int=subscription_id.int ^ 1), generation),
        webhook_secret(TokenKeys(bytes(range(1, 33))), subscription_id, generation),
    ]
    for other in others:
        assert other.key != secret.key
        assert not verifies(other, payload, headers)


@pytest.mark.parametrize("generation", [0, -1, 2**32])
def test_a_generation_outside_four_bytes_is_refused(generation: int) -> None:
    with pytest.raises(ValueError, match="generation"):
        webhook_secret(KEYS, uuid.uuid4(), generation)


def test_during_a_rotations_overlap_both_generations_sign_then_only_the_new() -> None:
    subscription_id = uuid.uuid4()
    until = T0 + timedelta(hours=24)
    old, new = (webhook_secret(KEYS, subscription_id, g) for g in (1, 2))
    during = signing_secrets(KEYS, subscription_id, 2, until, T0)
    assert [s.key for s in during] == [new.key, old.key]
    headers = sign(during, message_id("evt-1"), T0, b"{}")
    assert verifies(old, b"{}", headers)
    assert verifies(new, b"{}", headers)
    after = signing_secrets(KEYS, subscription_id, 2, until, until)
    assert [s.key for s in after] == [new.key]
    assert not verifies(old, b"{}", sign(after, message_id("evt-1"), T0, b"{}"))
    # A subscription never rotated signs with its first generation only.
    assert [s.key for s in signing_secrets(KEYS, subscription_id, 1, None, T0)] == [old.key]


# -- the evaluator state's JSON ---------------------------------------------------------------

days = st.dates(min_value=date(2001, 1, 1), max_value=date(2099, 12, 31))
small = st.integers(min_value=0, max_value=10_000)


@st.composite
def events(draw: st.DrawFn) -> AlertEvent:
    return AlertEvent(
        id=draw(st.uuids()),
        kind=draw(st.sampled_from(EventKind)),
        subscription_id=draw(st.uuids()),
        category=draw(small),
        decided_at=draw(instants),
        due_at=draw(instants),
        hour=draw(st.none() | instants),
        target_day=draw(st.none() | days),
        episode=draw(st.none() | small),
    )


pending = st.lists(events(), max_size=4).map(tuple)
states: st.SearchStrategy[AlertState] = st.one_of(
    st.builds(ObservedState, st.none() | instants, small, st.booleans(), small, pending),
    st.builds(ForecastState, st.none() | days, st.none() | small, pending),
)


@settings(max_examples=300, deadline=None)
@given(states)
def test_a_state_survives_its_json(state: AlertState) -> None:
    blob = encode_state(state)
    decoded = decode_state(blob)
    assert decoded == state
    assert type(decoded) is type(state)
    assert encode_state(decoded) == blob


def test_new_states_have_their_own_json() -> None:
    assert decode_state(encode_state(ObservedState())) == ObservedState()
    assert decode_state(encode_state(ForecastState())) == ForecastState()
    assert encode_state(ForecastState()) == (
        '{"kind":"forecast","v":1,"target_day":null,"alerted":null,"pending":[]}'
    )


@pytest.mark.parametrize(
    "blob",
    [
        "",
        "[]",
        "{}",
        '{"kind":"observed","v":2,"pending":[]}',
        '{"kind":"weekly","v":1,"pending":[]}',
        '{"kind":"forecast","v":1,"target_day":"tomorrow","alerted":null,"pending":[]}',
        '{"kind":"observed","v":1,"last_hour":"2026-11-28T07:00:00","episodes":0,'
        '"open":false,"clear_hours":0,"pending":[]}',
        '{"kind":"observed","v":1,"last_hour":null,"episodes":"1","open":false,'
        '"clear_hours":0,"pending":[]}',
    ],
)
def test_unreadable_state_is_one_error(blob: str) -> None:
    with pytest.raises(MalformedState):
        decode_state(blob)

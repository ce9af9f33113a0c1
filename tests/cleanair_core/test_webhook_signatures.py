"""Standard Webhooks signatures, proved by the specification's reference library
(`standardwebhooks`): what we sign, it verifies; what is tampered with, it refuses."""

from __future__ import annotations

import base64
import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from typing import Self
from unittest import mock
from zoneinfo import ZoneInfo

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from standardwebhooks import webhooks
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from cleanair_core.alerts.signatures import (
    MAX_SECRET_BYTES,
    MIN_SECRET_BYTES,
    MalformedSecret,
    SigningSecret,
    generate_secret,
    message_id,
    parse_secret,
    sign,
)

# Written from the specification: `whsec_` and standard base64 of the secret's bytes.
SECRET_SHAPE = re.compile(r"whsec_[A-Za-z0-9+/]+={0,2}")
# One signature: `v1,` and the base64 of a 32-byte HMAC-SHA256 (44 characters, one `=`).
SIGNATURE_SHAPE = re.compile(r"v1,[A-Za-z0-9+/]{43}=")
AT = datetime(2026, 11, 28, 7, 30, 15, tzinfo=UTC)
KEY = bytes(range(32))

keys = st.binary(min_size=MIN_SECRET_BYTES, max_size=MAX_SECRET_BYTES)
# The reference library decodes the body as UTF-8 before it verifies it: our bodies are JSON.
payloads = st.text().map(str.encode)
event_ids = st.one_of(st.uuids().map(str), st.from_regex(r"[A-Za-z0-9_-]{1,64}", fullmatch=True))
timestamps = st.datetimes(
    # Hypothesis takes naive bounds and applies `timezones` to what it draws.
    min_value=datetime(2001, 1, 1),  # noqa: DTZ001
    max_value=datetime(2100, 1, 1),  # noqa: DTZ001
    timezones=st.timezones(),
)
# The reference library refuses a timestamp more than 5 minutes from its clock; keep inside,
# with a margin for the whole second the header is floored to.
skews = st.integers(min_value=-290, max_value=290).map(lambda s: timedelta(seconds=s))


@contextmanager
def reference_clock(instant: datetime) -> Iterator[None]:
    """The reference library's clock set to `instant`: it reads `datetime.now` itself, and
    these tests must not depend on when they run."""

    class Frozen(datetime):
        @classmethod
        def now(cls, tz: tzinfo | None = None) -> Self:
            return cls.fromtimestamp(instant.timestamp(), tz)

    with mock.patch.object(webhooks, "datetime", Frozen):
        yield


def verifies(secret: str, payload: bytes, headers: dict[str, str], now: datetime) -> bool:
    """Whether the reference library, its clock at `now`, accepts the request."""
    with reference_clock(now):
        try:
            Webhook(secret).verify(payload, headers, json_parse=False)
        except WebhookVerificationError:
            return False
    return True


# -- signing, as the reference library sees it ------------------------------------------------
@settings(max_examples=200, deadline=None)
@given(key=keys, event_id=event_ids, timestamp=timestamps, payload=payloads, skew=skews)
# The second of a repeated or skipped hour (fold=1): adding to it in its own zone resets the
# fold and moves the instant by an hour, so the reference clock is set from UTC.
@example(
    key=KEY,
    event_id="e",
    timestamp=datetime(2001, 3, 25, 2, 0, fold=1, tzinfo=ZoneInfo("Europe/Belgrade")),
    payload=b"{}",
    skew=timedelta(seconds=-1),
)
@example(
    key=KEY,
    event_id="e",
    timestamp=datetime(2001, 10, 28, 2, 30, fold=1, tzinfo=ZoneInfo("Europe/Belgrade")),
    payload=b"{}",
    skew=timedelta(seconds=1),
)
def test_the_reference_library_verifies_what_we_sign(
    key: bytes, event_id: str, timestamp: datetime, payload: bytes, skew: timedelta
) -> None:
    secret = SigningSecret(key)
    headers = sign([secret], message_id(event_id), timestamp, payload)
    assert verifies(secret.as_text(), payload, headers, timestamp.astimezone(UTC) + skew)


@settings(max_examples=100, deadline=None)
@given(key=keys, event_id=event_ids, timestamp=timestamps, payload=payloads)
def test_our_signature_is_the_reference_librarys(
    key: bytes, event_id: str, timestamp: datetime, payload: bytes
) -> None:
    secret = SigningSecret(key)
    headers = sign([secret], message_id(event_id), timestamp, payload)
    reference = Webhook(secret.as_text()).sign(
        message_id(event_id), timestamp.astimezone(UTC).replace(tzinfo=None), payload.decode()
    )
    assert headers["webhook-signature"] == reference


def test_the_headers_are_the_specifications_three() -> None:
    event = str(uuid.UUID(int=7))
    headers = sign([SigningSecret(KEY)], message_id(event), AT, b'{"type":"alert"}')
    assert list(headers) == ["webhook-id", "webhook-timestamp", "webhook-signature"]
    assert headers["webhook-id"] == f"msg_{event}"
    assert headers["webhook-timestamp"] == "1795851015"  # 2026-11-28T07:30:15Z
    assert SIGNATURE_SHAPE.fullmatch(headers["webhook-signature"])


@pytest.mark.parametrize(
    "timestamp",
    [
        AT + timedelta(microseconds=999_999),  # never rounded up to the next second
        AT.astimezone(timezone(timedelta(hours=-5))),  # the same instant elsewhere
        datetime(2026, 11, 28, 9, 30, 15, 1, tzinfo=timezone(timedelta(hours=2))),
    ],
)
def test_the_timestamp_is_the_instants_whole_seconds(timestamp: datetime) -> None:
    headers = sign([SigningSecret(KEY)], "msg_1", timestamp, b"")
    assert headers["webhook-timestamp"] == "1795851015"


def test_the_same_event_signs_the_same_at_the_same_time() -> None:
    """A retry at the same second is byte for byte the same request: de-duplicable."""
    first = sign([SigningSecret(KEY)], message_id("e1"), AT, b"{}")
    assert sign([SigningSecret(KEY)], message_id("e1"), AT, b"{}") == first


# -- rotation ---------------------------------------------------------------------------------
@settings(max_examples=100, deadline=None)
@given(
    rotation=st.lists(keys, min_size=2, max_size=3, unique=True),
    outsider=keys,
    event_id=event_ids,
    payload=payloads,
)
def test_each_secret_of_a_rotation_verifies_alone(
    rotation: list[bytes], outsider: bytes, event_id: str, payload: bytes
) -> None:
    secrets = [SigningSecret(key) for key in rotation]
    headers = sign(secrets, message_id(event_id), AT, payload)
    signatures = headers["webhook-signature"].split(" ")
    assert len(signatures) == len(secrets)
    assert all(SIGNATURE_SHAPE.fullmatch(s) for s in signatures)
    for secret in secrets:
        assert verifies(secret.as_text(), payload, headers, AT)
    if outsider not in rotation:
        assert not verifies(SigningSecret(outsider).as_text(), payload, headers, AT)


def test_a_rotations_signatures_are_each_secrets_own_in_order() -> None:
    new, old = SigningSecret(KEY), SigningSecret(KEY[::-1])
    both = sign([new, old], "msg_1", AT, b"{}")["webhook-signature"]
    alone = [sign([s], "msg_1", AT, b"{}")["webhook-signature"] for s in (new, old)]
    assert both == " ".join(alone)


# -- tampering --------------------------------------------------------------------------------
@settings(max_examples=100, deadline=None)
@given(key=keys, event_id=event_ids, payload=payloads, extra=st.text(min_size=1).map(str.encode))
def test_a_tampered_payload_fails(key: bytes, event_id: str, payload: bytes, extra: bytes) -> None:
    secret = SigningSecret(key)
    headers = sign([secret], message_id(event_id), AT, payload)
    assert not verifies(secret.as_text(), payload + extra, headers, AT)
    assert not verifies(secret.as_text(), extra + payload, headers, AT)


@settings(max_examples=100, deadline=None)
@given(key=keys, event_id=event_ids, other=event_ids, payload=payloads)
def test_a_tampered_id_fails(key: bytes, event_id: str, other: str, payload: bytes) -> None:
    secret = SigningSecret(key)
    headers = sign([secret], message_id(event_id), AT, payload)
    if other != event_id:
        assert not verifies(
            secret.as_text(), payload, {**headers, "webhook-id": message_id(other)}, AT
        )


@settings(max_examples=100, deadline=None)
@given(
    key=keys,
    payload=payloads,
    shift=st.integers(min_value=-200, max_value=200).filter(bool),
)
def test_a_tampered_timestamp_fails(key: bytes, payload: bytes, shift: int) -> None:
    secret = SigningSecret(key)
    headers = sign([secret], "msg_1", AT, payload)
    moved = str(int(headers["webhook-timestamp"]) + shift)  # still inside the tolerance
    assert not verifies(secret.as_text(), payload, {**headers, "webhook-timestamp": moved}, AT)


def test_another_secret_fails() -> None:
    headers = sign([SigningSecret(KEY)], "msg_1", AT, b"{}")
    assert not verifies(SigningSecret(KEY[::-1]).as_text(), b"{}", headers, AT)


def test_a_stale_attempt_fails_and_a_retry_signed_now_verifies() -> None:
    """The timestamp is the attempt's: a retry is signed again at its own time."""
    secret = SigningSecret(KEY)
    late = AT + timedelta(hours=1)
    stale = sign([secret], "msg_1", AT, b"{}")
    assert not verifies(secret.as_text(), b"{}", stale, late)
    assert verifies(secret.as_text(), b"{}", sign([secret], "msg_1", late, b"{}"), late)


# -- secrets ----------------------------------------------------------------------------------
def test_a_generated_secret_has_the_specifications_form() -> None:
    generated = [generate_secret() for _ in range(50)]
    assert len({s.key for s in generated}) == 50
    for secret in generated:
        assert len(secret.key) == 32
        assert SECRET_SHAPE.fullmatch(secret.as_text())
        assert parse_secret(secret.as_text()) == secret


@pytest.mark.parametrize("size", [MIN_SECRET_BYTES, 33, MAX_SECRET_BYTES])
def test_a_secret_of_any_allowed_size_can_be_generated(size: int) -> None:
    assert len(generate_secret(size).key) == size


@pytest.mark.parametrize("size", [0, MIN_SECRET_BYTES - 1, MAX_SECRET_BYTES + 1])
def test_a_secret_outside_the_specifications_sizes_is_refused(size: int) -> None:
    with pytest.raises(ValueError, match="24 to 64"):
        generate_secret(size)
    with pytest.raises(MalformedSecret, match="24 to 64"):
        SigningSecret(bytes(size))


@given(key=keys)
def test_the_secret_format_round_trips(key: bytes) -> None:
    text = SigningSecret(key).as_text()
    assert SECRET_SHAPE.fullmatch(text)
    assert parse_secret(text).key == key
    assert parse_secret(text).as_text() == text
    assert parse_secret(text.rstrip("=")).key == key  # padding lost in a copy and paste


def test_a_secret_never_shows_in_its_repr() -> None:
    secret = SigningSecret(KEY)
    body = secret.as_text().removeprefix("whsec_")
    assert body not in repr(secret)
    assert KEY.hex() not in repr(secret)
    assert str(KEY) not in repr(secret)


def _body(n: int) -> str:
    return base64.b64encode(bytes(range(n))).decode()


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        ("", "starts with whsec_"),
        (_body(32), "starts with whsec_"),  # the bare base64, prefix forgotten
        ("WHSEC_" + _body(32), "starts with whsec_"),
        ("whsk_" + _body(32), "starts with whsec_"),  # the asymmetric scheme's, not ours
        ("whsec_", "24 to 64"),
        ("whsec_" + _body(MIN_SECRET_BYTES - 1), "24 to 64"),
        ("whsec_" + _body(MAX_SECRET_BYTES + 1), "24 to 64"),
        ("whsec_" + _body(32)[:-2] + "-_", "standard base64"),  # base64url, not base64
        ("whsec_" + _body(32)[:10] + " " + _body(32)[10:], "standard base64"),
        ("whsec_" + _body(32) + "\n", "standard base64"),
        ("whsec_" + _body(32)[:-3], "standard base64"),  # 41 characters: not base64
        ("whsec_" + "é" * 40, "standard base64"),
    ],
)
def test_a_malformed_secret_is_refused_naming_the_rule(text: str, rule: str) -> None:
    with pytest.raises(MalformedSecret, match=rule) as raised:
        parse_secret(text)
    assert_no_echo(raised.value, text)


@settings(max_examples=300, deadline=None)
@given(text=st.one_of(st.text(), st.text().map("whsec_".__add__)))
def test_parsing_any_text_refuses_it_without_echo_or_accepts_it(text: str) -> None:
    try:
        secret = parse_secret(text)
    except MalformedSecret as error:
        assert_no_echo(error, text)
    else:
        assert MIN_SECRET_BYTES <= len(secret.key) <= MAX_SECRET_BYTES


def assert_no_echo(error: MalformedSecret, text: str) -> None:
    """Neither the error's message nor its chain carries the secret (nor its body, when
    that is long enough to tell from the rule's own words)."""
    body = text.removeprefix("whsec_")
    said = f"{error!s} {error!r} {error.args!r}"
    if len(body) >= 8:
        assert body not in said
        assert body.strip() not in said
    assert error.__cause__ is None
    assert error.__suppress_context__ or error.__context__ is None


# -- message ids ------------------------------------------------------------------------------
def test_a_message_id_is_msg_and_the_events_id() -> None:
    event = uuid.uuid4()
    assert message_id(str(event)) == f"msg_{event}"
    assert message_id("ev_2KWPBgLlAfxdpx2AI54pPJ85f4W") == "msg_ev_2KWPBgLlAfxdpx2AI54pPJ85f4W"


@pytest.mark.parametrize(
    "event_id",
    ["", "a.b", "1674087231.x", "a b", "a,b", "a\r\nX-Injected: 1", "é", "a" * 253],
)
def test_an_id_that_would_make_signatures_ambiguous_or_headers_unsafe_is_refused(
    event_id: str,
) -> None:
    with pytest.raises(ValueError, match="letters, digits") as raised:
        message_id(event_id)
    if event_id:
        assert event_id not in str(raised.value)


@pytest.mark.parametrize("webhook_id", ["", "msg_a.b", "msg_a b", "msg_a\r\n", "m" * 257])
def test_signing_refuses_such_an_id_too(webhook_id: str) -> None:
    with pytest.raises(ValueError, match="letters, digits"):
        sign([SigningSecret(KEY)], webhook_id, AT, b"")


def test_the_longest_id_is_accepted() -> None:
    assert len(message_id("a" * 252)) == 256
    assert sign([SigningSecret(KEY)], "m" * 256, AT, b"")["webhook-id"] == "m" * 256


def test_signing_needs_a_secret_and_an_aware_timestamp() -> None:
    with pytest.raises(ValueError, match="at least one secret"):
        sign([], "msg_1", AT, b"")
    with pytest.raises(ValueError, match="timezone-aware"):
        sign([SigningSecret(KEY)], "msg_1", AT.replace(tzinfo=None), b"")

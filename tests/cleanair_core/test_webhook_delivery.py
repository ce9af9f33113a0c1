"""A webhook delivery's values: its headers kept to what HTTP allows, Retry-After read."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cleanair_core.alerts.delivery import MAX_RETRY_AFTER, Delivery, parse_retry_after

NOW = datetime(2026, 11, 28, 7, 0, 0, tzinfo=UTC)


def test_a_delivery_takes_ordinary_headers() -> None:
    headers = (("content-type", "application/json"), ("webhook-id", "msg_1"))
    assert Delivery("https://a.example/", headers, b"{}").headers == headers


@pytest.mark.parametrize(
    "header",
    [
        ("Host", "internal.example"),
        ("content-length", "0"),
        ("Transfer-Encoding", "chunked"),
        ("Connection", "close"),
        ("bad name", "x"),
        ("", "x"),
        ("x-a", "one\r\nX-Injected: two"),
        ("x-a", "line\nbreak"),
        ("x-a", "non-ascii é"),
    ],
)
def test_a_delivery_refuses_headers_that_could_smuggle_or_redirect(
    header: tuple[str, str],
) -> None:
    with pytest.raises(ValueError, match="header") as raised:
        Delivery("https://a.example/", (header,), b"{}")
    assert "Injected" not in str(raised.value)


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("120", 120.0),
        (" 0 ", 0.0),
        ("86400", MAX_RETRY_AFTER),
        ("86401", MAX_RETRY_AFTER),
        ("9" * 5000, MAX_RETRY_AFTER),  # no int() of a huge string
        ("Sat, 28 Nov 2026 07:01:30 GMT", 90.0),
        ("Sat, 28 Nov 2026 06:00:00 GMT", 0.0),  # a date already past: now
        ("Mon, 01 Jan 2080 00:00:00 GMT", MAX_RETRY_AFTER),
        ("-5", None),
        ("1.5", None),
        ("soon", None),
        ("", None),
        ("١٢", None),  # digits, but not ASCII ones
    ],
)
def test_retry_after_is_seconds_or_an_http_date(value: str, seconds: float | None) -> None:
    assert parse_retry_after(value, NOW) == seconds


@given(st.integers(min_value=0, max_value=10**9))
def test_retry_after_seconds_are_read_and_clamped(seconds: int) -> None:
    assert parse_retry_after(str(seconds), NOW) == min(seconds, MAX_RETRY_AFTER)


@given(st.integers(min_value=-(10**7), max_value=10**7))
def test_retry_after_dates_are_read_against_now(offset: int) -> None:
    when = NOW + timedelta(seconds=offset)
    expected = min(max(offset, 0), MAX_RETRY_AFTER)
    assert parse_retry_after(format_datetime(when, usegmt=True), NOW) == expected


@given(st.text(max_size=40))
def test_retry_after_never_raises(value: str) -> None:
    seconds = parse_retry_after(value, NOW)
    assert seconds is None or 0 <= seconds <= MAX_RETRY_AFTER

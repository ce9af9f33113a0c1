"""Fixed, epoch-aligned rate-limit windows and their Retry-After."""

from __future__ import annotations

import math
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cleanair_core.access.accounts import Owner, OwnerKind
from cleanair_core.access.connections import Caller
from cleanair_core.access.scopes import USER_SCOPES
from cleanair_core.clock import ManualClock
from cleanair_core.credits.rate_limits import RateLimit, enforce
from cleanair_core.errors import RateLimited
from cleanair_core.keys import TokenKeys
from cleanair_core.policy import Policy
from cleanair_core.ports import Store
from cleanair_core.service import CleanAir
from cleanair_storage.memory import MemoryStore

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# 2026-03-02 08:00 UTC starts a minute, an hour and a 10-minute window.
ALIGNED = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)


def seconds_to_next_window(at: datetime, window: int) -> int:
    """Computed from the epoch with exact timedelta arithmetic, rounded up."""
    elapsed = at - EPOCH
    into_window = elapsed % timedelta(seconds=window)
    return math.ceil((timedelta(seconds=window) - into_window).total_seconds())


def retry_after_of_excess(store: Store, rule: RateLimit, subject: str, at: datetime) -> int:
    with pytest.raises(RateLimited) as raised:
        enforce(store, rule, subject, at)
    return raised.value.retry_after


def test_limit_allows_n_then_refuses(store: Store) -> None:
    rule = RateLimit("test", 5)
    at = ALIGNED + timedelta(seconds=15.25)
    for _ in range(5):
        enforce(store, rule, "conn-1", at)
    assert retry_after_of_excess(store, rule, "conn-1", at) == 45
    assert retry_after_of_excess(store, rule, "conn-1", at + timedelta(seconds=44)) == 1


def test_next_window_is_allowed_again(store: Store) -> None:
    rule = RateLimit("test", 2)
    at = ALIGNED + timedelta(seconds=59.9)
    enforce(store, rule, "conn-1", at)
    enforce(store, rule, "conn-1", at)
    assert retry_after_of_excess(store, rule, "conn-1", at) == 1
    next_window = ALIGNED + timedelta(minutes=1)
    enforce(store, rule, "conn-1", next_window)
    enforce(store, rule, "conn-1", next_window)
    assert retry_after_of_excess(store, rule, "conn-1", next_window) == 60


def test_subjects_and_rules_count_apart(store: Store) -> None:
    first, second = RateLimit("first", 1), RateLimit("second", 1)
    enforce(store, first, "a", ALIGNED)
    enforce(store, first, "b", ALIGNED)
    enforce(store, second, "a", ALIGNED)
    with pytest.raises(RateLimited):
        enforce(store, first, "a", ALIGNED)
    with pytest.raises(RateLimited):
        enforce(store, second, "a", ALIGNED)


def test_long_windows_align_to_the_epoch(store: Store) -> None:
    rule = RateLimit("hourly", 1, window_seconds=3600)
    at = ALIGNED + timedelta(minutes=20, seconds=30)
    enforce(store, rule, "x", at)
    assert retry_after_of_excess(store, rule, "x", at) == 39 * 60 + 30


@pytest.mark.parametrize(("limit", "window"), [(0, 60), (-1, 60), (1, 0), (5, -60)])
def test_rules_need_a_positive_limit_and_window(limit: int, window: int) -> None:
    with pytest.raises(ValueError, match="positive"):
        RateLimit("bad", limit, window)


@given(
    limit=st.integers(1, 8),
    window=st.sampled_from([1, 7, 60, 600, 3600]),
    offset=st.integers(0, 10**12),
)
def test_limit_and_retry_after_for_any_instant(limit: int, window: int, offset: int) -> None:
    store = MemoryStore()
    rule = RateLimit("any", limit, window)
    at = ALIGNED + timedelta(microseconds=offset)
    for _ in range(limit):
        enforce(store, rule, "s", at)
    retry = retry_after_of_excess(store, rule, "s", at)
    assert retry == seconds_to_next_window(at, window)
    assert 1 <= retry <= window
    # Retrying after Retry-After seconds always lands in a fresh window.
    enforce(store, rule, "s", at + timedelta(seconds=retry))


def test_service_limits_requests_per_connection(store: Store) -> None:
    clock = ManualClock(ALIGNED + timedelta(seconds=30))
    core = CleanAir(
        store, TokenKeys(b"rate-limit-tests-key-of-32-bytes!"), Policy(requests_per_minute=3), clock
    )
    alice = Caller(uuid.uuid4(), Owner(OwnerKind.USER, "alice"), USER_SCOPES)
    bob = Caller(uuid.uuid4(), Owner(OwnerKind.USER, "alice"), USER_SCOPES)
    for _ in range(3):
        core.enforce_rate_limit(alice)
    with pytest.raises(RateLimited) as raised:
        core.enforce_rate_limit(alice)
    assert raised.value.retry_after == 30
    core.enforce_rate_limit(bob)  # another connection of the same owner has its own count
    # A different rule is a different counter.
    core.enforce_rate_limit(alice, Policy().plan_polls)
    clock.advance(30)
    core.enforce_rate_limit(alice)

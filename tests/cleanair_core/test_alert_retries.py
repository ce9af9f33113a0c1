"""The retry schedule and the disabling rules, on injected time and random numbers: back-off
growing in expectation, never before a receiver's Retry-After, attempts covering at least a
day after the event was recorded and none after, and when a subscription is disabled."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cleanair_core.alerts.delivery import Outcome, OutcomeKind
from cleanair_core.alerts.retries import (
    DEFAULT_POLICY,
    RetryPolicy,
    Verdict,
    backoff,
    decide,
)

RECORDED = datetime(2026, 11, 28, 9, 10, tzinfo=UTC)
DAY = timedelta(hours=24)
SERVER_ERROR = Outcome(OutcomeKind.RETRY, "status 503", 503)
NOT_FOUND = Outcome(OutcomeKind.FAILED, "status 404", 404)
GONE = Outcome(OutcomeKind.GONE, "status 410", 410)

uniform = st.floats(min_value=0.0, max_value=1.0, exclude_max=True)
failures = st.integers(min_value=1, max_value=40)
policies = st.builds(
    RetryPolicy,
    window=st.integers(min_value=1, max_value=72).map(lambda h: timedelta(hours=h)),
    first_delay=st.integers(min_value=1, max_value=600).map(lambda s: timedelta(seconds=s)),
    factor=st.floats(min_value=1.5, max_value=8.0),
    longest_delay=st.integers(min_value=600, max_value=12 * 3600).map(
        lambda s: timedelta(seconds=s)
    ),
    jitter=st.floats(min_value=0.0, max_value=0.3),
    longest_retry_after=st.integers(min_value=0, max_value=24 * 3600).map(
        lambda s: timedelta(seconds=s)
    ),
)
# The receiver's Retry-After, as the sender gives it: 0 to a day, or none.
retry_afters = st.none() | st.floats(min_value=0.0, max_value=86400.0)


def expected(policy: RetryPolicy, n: int) -> float:
    """The mean back-off after n failures, over an even grid of the random number."""
    grid = [(i + 0.5) / 200 for i in range(200)]
    return sum(backoff(policy, n, constant(u)).total_seconds() for u in grid) / len(grid)


def constant(u: float) -> Callable[[], float]:
    return lambda: u


def test_the_default_schedule_starts_within_seconds_and_settles_at_six_hours() -> None:
    middle = [backoff(DEFAULT_POLICY, n, lambda: 0.5).total_seconds() for n in range(1, 10)]
    assert middle == [5, 20, 80, 320, 1280, 5120, 20480, 21600, 21600]


@given(policies, failures)
def test_the_back_off_grows_in_expectation(policy: RetryPolicy, n: int) -> None:
    assert expected(policy, n + 1) >= expected(policy, n) - 1e-6
    longest = policy.longest_delay.total_seconds()
    if expected(policy, n) < longest / policy.factor:
        # Below the bound, each failure multiplies the mean wait by the factor.
        assert expected(policy, n + 1) == pytest.approx(expected(policy, n) * policy.factor)


@given(failures, uniform, uniform)
def test_with_the_default_jitter_every_draw_waits_longer_until_the_bound(
    n: int, u: float, v: float
) -> None:
    later = backoff(DEFAULT_POLICY, n + 1, lambda: u)
    now = backoff(DEFAULT_POLICY, n, lambda: v)
    if later.total_seconds() < DEFAULT_POLICY.longest_delay.total_seconds() * 0.75:
        assert later > now


@given(policies, failures, uniform)
def test_the_jitter_stays_within_its_bounds(policy: RetryPolicy, n: int, u: float) -> None:
    middle = backoff(policy, n, lambda: 0.5).total_seconds()
    drawn = backoff(policy, n, lambda: u).total_seconds()
    assert middle * (1 - policy.jitter) - 1e-6 <= drawn <= middle * (1 + policy.jitter) + 1e-6
    assert drawn <= policy.longest_delay.total_seconds() * (1 + policy.jitter) + 1e-6


@given(
    policies,
    st.integers(min_value=0, max_value=3),
    st.floats(min_value=0.0, max_value=0.999),
    retry_afters,
    uniform,
)
def test_a_retry_is_never_before_retry_after_nor_past_the_window_unless_asked(
    policy: RetryPolicy, failed_before: int, into: float, retry_after: float | None, u: float
) -> None:
    now = RECORDED + policy.window * into
    outcome = Outcome(OutcomeKind.RETRY, "status 429", 429, retry_after)
    decision = decide(
        outcome,
        recorded_at=RECORDED,
        failed_before=failed_before,
        now=now,
        random=lambda: u,
        policy=policy,
    )
    assert decision.verdict is Verdict.RETRY
    assert decision.disable is None
    assert decision.error == "status 429"
    at = decision.next_attempt_at
    assert at is not None
    assert at > now
    end = RECORDED + policy.window
    if retry_after is None:
        assert at <= end
    else:
        asked = min(timedelta(seconds=retry_after), policy.longest_retry_after)
        assert at >= now + asked
        assert at <= max(end, now + asked)


def attempts_until_given_up(
    policy: RetryPolicy, draws: list[float], outcome: Outcome = SERVER_ERROR
) -> tuple[list[datetime], str | None]:
    """The attempts made for a delivery that always fails with `outcome`, each at once when
    due, and the reason the subscription is disabled when it is given up."""
    attempts = [RECORDED]
    for n in range(1000):
        decision = decide(
            outcome,
            recorded_at=RECORDED,
            failed_before=n,
            now=attempts[-1],
            random=constant(draws[n % len(draws)]),
            policy=policy,
        )
        if decision.verdict is Verdict.GIVE_UP:
            return attempts, decision.disable
        assert decision.next_attempt_at is not None
        attempts.append(decision.next_attempt_at)
    raise AssertionError("never given up")


@given(policies, st.lists(uniform, min_size=1, max_size=30))
def test_attempts_cover_the_window_and_stop_there(policy: RetryPolicy, draws: list[float]) -> None:
    attempts, disabled = attempts_until_given_up(policy, draws)
    end = RECORDED + policy.window
    assert attempts == sorted(attempts)
    assert attempts[-1] == end  # the last attempt at the window's end, none after
    assert all(a < end for a in attempts[:-1])
    assert disabled is not None
    assert "every attempt" in disabled


def test_the_default_policy_tries_for_a_day_in_about_eleven_attempts() -> None:
    for u in (0.0, 0.5, 0.999):
        attempts, disabled = attempts_until_given_up(DEFAULT_POLICY, [u])
        assert attempts[-1] - attempts[0] == DAY
        assert 10 <= len(attempts) <= 13
        assert disabled == "the webhook failed every attempt for 24 hours (last: status 503)"


@given(st.lists(uniform, min_size=1, max_size=30), st.floats(min_value=0.0, max_value=86400.0))
def test_a_late_retry_after_adds_one_last_attempt_at_most(
    draws: list[float], retry_after: float
) -> None:
    slow = Outcome(OutcomeKind.RETRY, "status 503", 503, retry_after)
    attempts, _ = attempts_until_given_up(DEFAULT_POLICY, draws, slow)
    end = RECORDED + DEFAULT_POLICY.window
    assert attempts[-1] >= end
    assert attempts[-1] <= end + DEFAULT_POLICY.longest_retry_after
    assert all(a < end for a in attempts[:-1])


# -- giving up and disabling ------------------------------------------------------------------
def test_a_2xx_is_delivered() -> None:
    decision = decide(
        Outcome(OutcomeKind.DELIVERED, "status 200", 200),
        recorded_at=RECORDED,
        failed_before=7,
        now=RECORDED + DAY,
        random=lambda: 0.5,
    )
    assert decision.verdict is Verdict.DELIVERED
    assert (decision.error, decision.disable, decision.next_attempt_at) == (None, None, None)


@pytest.mark.parametrize("failed_before", [0, 3, 10])
def test_410_gone_gives_up_and_disables_at_once(failed_before: int) -> None:
    decision = decide(
        GONE, recorded_at=RECORDED, failed_before=failed_before, now=RECORDED, random=lambda: 0.5
    )
    assert decision.verdict is Verdict.GIVE_UP
    assert decision.error == "status 410"
    assert decision.disable == "the webhook answered 410 Gone, asking for no more deliveries"


def test_one_404_is_retried_not_disabled() -> None:
    decision = decide(
        NOT_FOUND, recorded_at=RECORDED, failed_before=0, now=RECORDED, random=lambda: 0.5
    )
    assert decision.verdict is Verdict.RETRY
    assert decision.disable is None
    assert decision.next_attempt_at == RECORDED + timedelta(seconds=5)


def test_a_permanent_failure_disables_at_the_fifth_failed_attempt_in_a_row() -> None:
    attempts, disabled = attempts_until_given_up(DEFAULT_POLICY, [0.5], NOT_FOUND)
    assert len(attempts) == DEFAULT_POLICY.permanent_after == 5
    # Minutes of the same answer, not a deployment's blip: 5 + 20 + 80 + 320 seconds.
    assert attempts[-1] - attempts[0] == timedelta(seconds=425)
    assert disabled == "the webhook failed 5 attempts in a row (last: status 404)"


@given(st.integers(min_value=0, max_value=30), st.sampled_from([SERVER_ERROR, NOT_FOUND, GONE]))
def test_the_reason_an_owner_reads_names_the_last_answer_and_nothing_else(
    failed_before: int, outcome: Outcome
) -> None:
    decision = decide(
        outcome,
        recorded_at=RECORDED,
        failed_before=failed_before,
        now=RECORDED + DAY,
        random=lambda: 0.5,
    )
    assert decision.verdict is Verdict.GIVE_UP
    assert decision.disable is not None
    assert decision.disable.isascii()
    assert len(decision.disable) < 120
    if outcome is not GONE:
        assert decision.disable.endswith(f"(last: {outcome.reason})")


def test_a_back_off_needs_a_failure() -> None:
    with pytest.raises(ValueError, match="failure"):
        backoff(DEFAULT_POLICY, 0, lambda: 0.5)


def test_a_huge_failure_count_does_not_overflow() -> None:
    assert backoff(DEFAULT_POLICY, 10**6, lambda: 0.5) == DEFAULT_POLICY.longest_delay

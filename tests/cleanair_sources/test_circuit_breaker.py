"""The circuit breaker alone: closed, open, half-open with one trial, on an injected clock."""

from __future__ import annotations

import pytest

from cleanair_core.errors import SourceUnavailable
from cleanair_core.metrics import Upstream
from cleanair_sources.circuit_breaker import BreakerState, CircuitBreaker


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def state(breaker: CircuitBreaker) -> BreakerState:
    # A call, not the property: mypy would keep a narrowed property across calls changing it.
    return breaker.state


def fail(breaker: CircuitBreaker) -> None:
    with pytest.raises(SourceUnavailable), breaker.call():
        raise SourceUnavailable()


def opened(clock: Clock) -> CircuitBreaker:
    breaker = CircuitBreaker(Upstream.OPEN_METEO, "test", failures=2, cooldown=10, monotonic=clock)
    fail(breaker)
    fail(breaker)
    return breaker


def test_it_opens_after_the_failures_in_a_row_and_refuses_until_the_cooldown_ends() -> None:
    clock = Clock()
    breaker = opened(clock)
    assert state(breaker) == BreakerState.OPEN

    clock.now += 9.5
    with pytest.raises(SourceUnavailable) as refused, breaker.call():
        pytest.fail("an open breaker let a call through")
    assert refused.value.retry_after == 1

    clock.now += 0.5
    assert state(breaker) == BreakerState.HALF_OPEN


def test_half_open_lets_one_trial_through_and_refuses_the_others_while_it_runs() -> None:
    clock = Clock()
    breaker = opened(clock)
    clock.now += 10

    # The trial, and a second caller while it runs.
    with breaker.call(), pytest.raises(SourceUnavailable), breaker.call():
        pytest.fail("a second call went through during the trial")

    assert state(breaker) == BreakerState.CLOSED


def test_a_trial_whose_caller_went_away_frees_the_slot() -> None:
    clock = Clock()
    breaker = opened(clock)
    clock.now += 10

    with pytest.raises(KeyboardInterrupt), breaker.call():
        raise KeyboardInterrupt  # as a cancellation would: says nothing of the upstream

    assert state(breaker) == BreakerState.HALF_OPEN
    with breaker.call():
        pass
    assert state(breaker) == BreakerState.CLOSED


def test_a_failed_trial_opens_it_for_another_cooldown() -> None:
    clock = Clock()
    breaker = opened(clock)
    clock.now += 10

    fail(breaker)

    assert state(breaker) == BreakerState.OPEN
    clock.now += 9.9
    assert state(breaker) == BreakerState.OPEN


def test_opening_and_closing_are_logged_with_the_upstream_and_cause(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    breaker = opened(clock)
    clock.now += 10
    with breaker.call():
        pass

    opening, closing = (r for r in caplog.records if r.name == "cleanair.sources.circuit_breaker")
    assert opening.__dict__["upstream"] == "open_meteo"
    assert opening.__dict__["cause"] == "SourceUnavailable"
    assert "circuit open" in opening.getMessage()
    assert "circuit closed" in closing.getMessage()


@pytest.mark.parametrize("options", [{"failures": 0}, {"cooldown": 0}])
def test_nonsense_options_are_refused(options: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="must be"):
        CircuitBreaker(Upstream.OPEN_METEO, "test", **options)  # type: ignore[arg-type]

"""When a failed webhook delivery is tried again, when it is given up, and when its
subscription is disabled (issue 32; docs/alerts.md, "Retries and disabling").

Pure functions of an attempt's `Outcome`, the delivery's history (when its event was
recorded, how many attempts failed before), the time of the attempt and a random number
given in: the delivery loop passes its clock's time and its random source, tests theirs.

The schedule follows the Standard Webhooks recommendation (exponential back-off with random
jitter, attempts spanning at least a day; its example runs 5 s, 5 min, 30 min, 2 h, 5 h,
10 h, ...): the n-th retry waits `first_delay * factor ** (n - 1)`, at most `longest_delay`,
times a jitter factor drawn from `1 - jitter .. 1 + jitter`, so receivers recovering from an
outage are not hit by every delivery at the same instant. Attempts go on until `window`
after the event was recorded, and the last one is made at that instant (a wait that would
pass it is cut short), so an endpoint that is down for less than the window always gets the
event; after an attempt at or past the window's end the delivery is given up.

A receiver's `Retry-After` (429, 503) is honoured up to `longest_retry_after`: the next
attempt is never earlier than it asked, within that bound, even when that passes the window's
end (one attempt more, the last).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from enum import StrEnum

import attrs

from cleanair_core.alerts.delivery import Outcome, OutcomeKind

#: A uniform random number in [0, 1): `random.random`, or a test's.
Random = Callable[[], float]


@attrs.frozen(kw_only=True)
class RetryPolicy:
    """How failed deliveries are retried and when a subscription is disabled.

    `window`: attempts go on until this long after the event was recorded (24 h: a
    receiver down for a night or a weekend day still gets the day's alerts; an air-quality
    alert a day late tells little, so going on for days, as payment webhooks do, buys
    nothing). `first_delay`, `factor`, `longest_delay`, `jitter`: the back-off. With the
    defaults the retries come after about 5 s, 20 s, 80 s, 5 min, 21 min, 85 min, 5.7 h,
    then every 6 h, and the last at the window's end: 11 attempts in a day, give or take one
    for the jitter.
    `permanent_after`: a permanent failure (a 4xx but 408, 410 and 429, a redirect, a
    refused address) disables the subscription once it is the `permanent_after`-th failed
    attempt in a row of a delivery; before that it is retried like any failure.
    """

    window: timedelta = timedelta(hours=24)
    first_delay: timedelta = timedelta(seconds=5)
    factor: float = attrs.field(default=4.0, validator=attrs.validators.ge(1.0))
    longest_delay: timedelta = timedelta(hours=6)
    jitter: float = attrs.field(
        default=0.25, validator=[attrs.validators.ge(0.0), attrs.validators.lt(1.0)]
    )
    longest_retry_after: timedelta = timedelta(hours=6)
    permanent_after: int = attrs.field(default=5, validator=attrs.validators.ge(1))


DEFAULT_POLICY = RetryPolicy()


def backoff(policy: RetryPolicy, failures: int, random: Random) -> timedelta:
    """The wait after the `failures`-th failed attempt in a row (1 after the first), with
    jitter from `random`: grows by `factor` per failure up to `longest_delay`, whose
    jittered value is its mean."""
    if failures < 1:
        raise ValueError("a back-off follows at least one failure")
    longest = policy.longest_delay.total_seconds()
    seconds = policy.first_delay.total_seconds()
    # Multiplied step by step and stopped at the bound: factor ** failures could overflow.
    for _ in range(failures - 1):
        seconds *= policy.factor
        if seconds >= longest:
            seconds = longest
            break
    spread = 1.0 - policy.jitter + 2.0 * policy.jitter * min(max(random(), 0.0), 1.0)
    return timedelta(seconds=seconds * spread)


class Verdict(StrEnum):
    """What becomes of a delivery after one attempt."""

    DELIVERED = "delivered"
    RETRY = "retry"  # due again at `Decision.next_attempt_at`
    GIVE_UP = "give_up"  # failed for good; the subscription is disabled when `disable` says


@attrs.frozen
class Decision:
    """A delivery's fate after an attempt: the verdict, the next attempt's time (RETRY
    only), the attempt's error for the outbox (None when delivered) and, when the
    subscription is to be disabled, the reason its owner reads."""

    verdict: Verdict
    next_attempt_at: datetime | None = None
    error: str | None = None
    disable: str | None = None


def decide(
    outcome: Outcome,
    *,
    recorded_at: datetime,
    failed_before: int,
    now: datetime,
    random: Random,
    policy: RetryPolicy = DEFAULT_POLICY,
) -> Decision:
    """What to do with a delivery whose attempt at `now` came to `outcome`. The delivery's
    event was recorded at `recorded_at` and its `failed_before` earlier attempts all failed
    (a pending delivery's attempts: any success ends it).

    - delivered: done.
    - 410 Gone: given up, and the subscription disabled at once: the receiver asked never
      to be sent this again (the Standard Webhooks rule).
    - a permanent failure (`FAILED`: 404, 401, a redirect, a refused address): retried like
      any failure until it is the `permanent_after`-th failed attempt in a row, then given
      up and the subscription disabled. One 404 does not disable: receivers answer 404 or
      401 for a minute while they deploy or rotate their own credentials, and a disabled
      subscription stays disabled until its owner acts, so one blip would silence every
      later alert. Minutes of the same answer are not a blip.
    - any other failure: retried on the schedule until the window ends; an attempt at or
      past its end that fails gives the delivery up and disables the subscription (a day
      of failures is an endpoint that is not there).
    """
    if outcome.kind is OutcomeKind.DELIVERED:
        return Decision(Verdict.DELIVERED)
    error = outcome.reason
    failures = failed_before + 1
    if outcome.kind is OutcomeKind.GONE:
        return Decision(
            Verdict.GIVE_UP,
            error=error,
            disable="the webhook answered 410 Gone, asking for no more deliveries",
        )
    if outcome.kind is OutcomeKind.FAILED and failures >= policy.permanent_after:
        return Decision(
            Verdict.GIVE_UP,
            error=error,
            disable=f"the webhook failed {failures} attempts in a row (last: {error})",
        )
    end = recorded_at + policy.window
    if now >= end:
        hours = round(policy.window.total_seconds() / 3600)
        span = "an hour" if hours == 1 else f"{hours} hours"
        return Decision(
            Verdict.GIVE_UP,
            error=error,
            disable=f"the webhook failed every attempt for {span} (last: {error})",
        )
    return Decision(
        Verdict.RETRY,
        next_attempt_at=next_attempt(outcome, failures, end, now, random, policy),
        error=error,
    )


def next_attempt(
    outcome: Outcome,
    failures: int,
    end: datetime,
    now: datetime,
    random: Random,
    policy: RetryPolicy = DEFAULT_POLICY,
) -> datetime:
    """When to try again after the `failures`-th failed attempt in a row, at `now`, before
    the window's `end`: after the back-off, cut to `end`, but never before the receiver's
    `Retry-After` (up to `longest_retry_after`)."""
    at = min(now + backoff(policy, failures, random), end)
    if outcome.retry_after is not None:
        asked = timedelta(seconds=max(outcome.retry_after, 0.0))
        at = max(at, now + min(asked, policy.longest_retry_after))
    return at

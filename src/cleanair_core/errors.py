"""Errors that carry meaning; the HTTP layer maps each to one status in one place."""

from __future__ import annotations

import math
from collections.abc import Sequence
from enum import StrEnum

import attrs


class CleanAirError(Exception):
    """Base of every error the core raises on purpose."""

    detail = "Error"

    def __init__(self, detail: str | None = None) -> None:
        if detail is not None:
            self.detail = detail
        super().__init__(self.detail)


# 400 -----------------------------------------------------------------------------------------
class OutsideForecastWindow(CleanAirError):
    """A forecast date outside today .. today + 3 in the request's timezone."""

    detail = "The date is outside the forecast window: today to today + 3 in that timezone"


class OutsideDataWindow(CleanAirError):
    """A route time more than 30 days ago or beyond the 84-hour forecast horizon."""

    detail = "Route times must lie between 30 days ago and 84 hours from now"


class PlanTooLong(CleanAirError):
    """A route plan whose start and end are farther apart than the contract allows."""

    detail = "The direct distance between start and end is over 15 km"


# 401 -----------------------------------------------------------------------------------------
class NotAuthenticated(CleanAirError):
    """Missing, malformed, unknown, revoked or wrong-environment token."""

    detail = "Invalid or missing bearer token"


class InvalidPairingCode(CleanAirError):
    """Unknown, used, expired or lapsed pairing code; the causes are deliberately one error."""

    detail = "Invalid or expired pairing code"


# 403 -----------------------------------------------------------------------------------------
class Forbidden(CleanAirError):
    """The caller is known but may not do this."""

    detail = "Forbidden"


class MissingScope(Forbidden):
    def __init__(self, scope: str) -> None:
        super().__init__(f"Token lacks the required scope {scope}")
        self.scope = scope


class NotPremium(Forbidden):
    detail = "The owner of this connection has no premium plan"


class PartnerConnectionRefused(Forbidden):
    detail = "Partner connections cannot do this"


# 404 -----------------------------------------------------------------------------------------
class NotFound(CleanAirError):
    detail = "Not found"


# 422 -----------------------------------------------------------------------------------------
@attrs.frozen
class Violation:
    """One rule a request broke, in words fit to show its client: `field` is a dotted path
    into the request (`start.latitude`, `wifi.0.mac`; "" for the whole body), `rule` one of
    a small vocabulary (docs/api-choices.md) and `message` the rule and its bound. Built from
    the schema and the rule alone: never from the value, which is not echoed."""

    field: str
    rule: str
    message: str


class Unprocessable(CleanAirError):
    """A request that is well-formed but cannot be acted on; the input is never echoed.
    `violations` name the fields and rules that failed, where they are known."""

    detail = "Request validation failed"

    def __init__(self, detail: str | None = None, *, violations: Sequence[Violation] = ()) -> None:
        super().__init__(detail)
        self.violations = tuple(violations)


class LocationUnresolved(Unprocessable):
    """Neither coordinates, nor the Wi-Fi scan, nor the caller's address gave a location."""

    detail = "No location could be resolved from the request"


# 429 -----------------------------------------------------------------------------------------
class Limit(StrEnum):
    """The limit behind a 429, in the contract's words: the rate limit, the daily burst cap
    or the monthly credit pool."""

    RATE_LIMIT = "rate_limit"
    DAILY_BURST = "daily_burst"
    MONTHLY_POOL = "monthly_pool"


class TooManyRequests(CleanAirError):
    """Base of the 429s; `retry_after` is whole seconds until the blocking window resets."""

    limit = Limit.RATE_LIMIT

    def __init__(self, retry_after: int, detail: str | None = None) -> None:
        super().__init__(detail)
        self.retry_after = max(1, int(retry_after))


class RateLimited(TooManyRequests):
    detail = "Rate limit exceeded"


class CreditsExhausted(TooManyRequests):
    detail = "Credit limit exhausted"

    def __init__(
        self, retry_after: int, detail: str | None = None, limit: Limit = Limit.MONTHLY_POOL
    ) -> None:
        super().__init__(retry_after, detail)
        self.limit = limit


# 503 -----------------------------------------------------------------------------------------
#: Seconds a client is asked to wait after a 503 whose cause gives no better guess: long
#: enough not to hammer a struggling dependency, short enough to notice its recovery.
RETRY_AFTER_UNAVAILABLE = 5


class SourceUnavailable(CleanAirError):
    """An upstream data source or dependent service did not answer usefully; `retry_after`
    is whole seconds until trying again makes sense (how long a circuit breaker stays open,
    or `RETRY_AFTER_UNAVAILABLE`)."""

    detail = "A dependent service is unavailable"

    def __init__(
        self, detail: str | None = None, *, retry_after: float = RETRY_AFTER_UNAVAILABLE
    ) -> None:
        super().__init__(detail)
        self.retry_after = max(1, math.ceil(retry_after))


class StoreUnavailable(SourceUnavailable):
    """The database cannot be used now (busy past its timeout, gone, or failing); nothing
    was written by the operation that raised it."""

    detail = "The service's database is unavailable; try again shortly"


# Route plans: a plan the planner rejects fails with a reason and is refunded ------------------
class PlanRejected(CleanAirError):
    """The planner cannot plan this route (no street data near an end, no path, ...)."""

    detail = "The route cannot be planned"


# Storage port errors -------------------------------------------------------------------------


class DuplicateEntry(ValueError):
    """A storage port refused an insert: the store already holds an entry with the same key
    (a connection's id or token hash, a plan's id). Every adapter raises this one error, never
    its driver's own; the store is unchanged."""


# Operator errors (CLI and embedding; never reach an HTTP client) ----------------------------
class OperatorError(CleanAirError):
    """A management command could not be carried out (unknown user, duplicate, ...)."""

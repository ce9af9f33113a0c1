"""Errors that carry meaning; the HTTP layer maps each to one status in one place."""

from __future__ import annotations


class CleanAirError(Exception):
    """Base of every error the core raises on purpose."""

    detail = "Error"

    def __init__(self, detail: str | None = None) -> None:
        if detail is not None:
            self.detail = detail
        super().__init__(self.detail)


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


# 429 -----------------------------------------------------------------------------------------
class TooManyRequests(CleanAirError):
    """Base of the 429s; `retry_after` is whole seconds until the blocking window resets."""

    def __init__(self, retry_after: int, detail: str | None = None) -> None:
        super().__init__(detail)
        self.retry_after = max(1, int(retry_after))


class RateLimited(TooManyRequests):
    detail = "Rate limit exceeded"


class CreditsExhausted(TooManyRequests):
    detail = "Credit limit exhausted"


# 503 -----------------------------------------------------------------------------------------
class SourceUnavailable(CleanAirError):
    """An upstream data source or dependent service did not answer usefully."""

    detail = "A dependent service is unavailable"


# Operator errors (CLI and embedding; never reach an HTTP client) ----------------------------
class OperatorError(CleanAirError):
    """A management command could not be carried out (unknown user, duplicate, ...)."""

"""Sending one webhook: what goes out (`Delivery`), what came of it (`Outcome`), and the port
that does it (`WebhookSender`; `cleanair_sources.webhook_sender` is the adapter).

The sender makes one attempt and says what it means; retrying, back-off and disabling a
subscription whose endpoint keeps failing are the outbox's decisions, made from `Outcome`.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from enum import StrEnum
from typing import Protocol

import attrs

#: The longest wait a receiver's Retry-After can ask for; longer answers are cut to this, so
#: a receiver cannot park a delivery for years.
MAX_RETRY_AFTER = 24 * 3600.0

_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # RFC 9110 field name
_FIELD_VALUE = re.compile(r"[\t\x20-\x7e]*")  # visible ASCII, spaces and tabs: no CR or LF
# The sender writes these from the request itself; a delivery setting them could smuggle a
# second request or reach another virtual host than the URL's.
_RESERVED_HEADERS = frozenset(
    {"host", "content-length", "transfer-encoding", "connection", "upgrade", "te", "trailer"}
)


def _check_headers(
    _instance: object, _attribute: object, headers: tuple[tuple[str, str], ...]
) -> None:
    for name, value in headers:
        if not _TOKEN.fullmatch(name) or name.lower() in _RESERVED_HEADERS:
            raise ValueError("a delivery header has a name that is invalid or the sender's own")
        if not _FIELD_VALUE.fullmatch(value):
            raise ValueError("a delivery header's value holds a character a header cannot")


@attrs.frozen
class Delivery:
    """One webhook request: POST `body` to `url` with `headers` (the Standard Webhooks ones,
    a content type). `url` is the subscription's URL as stored; the sender validates it again
    against the operator's current policy before sending. Header names must be HTTP tokens and
    not ones the sender writes itself (Host, Content-Length, ...); values one line of ASCII."""

    url: str
    headers: tuple[tuple[str, str], ...] = attrs.field(validator=_check_headers)
    body: bytes


class OutcomeKind(StrEnum):
    """What one attempt means for the delivery."""

    DELIVERED = "delivered"  # a 2xx
    RETRY = "retry"  # worth trying again later: 408, 429, 5xx, a timeout, DNS, the network
    FAILED = "failed"  # the same request would fail again: other 4xx, a redirect, a refused URL
    GONE = "gone"  # 410 Gone: the receiver asks never to be sent this again


@attrs.frozen
class Outcome:
    """What came of one attempt. `reason` is a short word or phrase fit for the subscription's
    owner ("status 404", "timeout", "redirect", "address refused: loopback"); `status` the HTTP
    status when a response came; `retry_after` the seconds the receiver asked to wait (429 and
    503 with a Retry-After), else None."""

    kind: OutcomeKind
    reason: str
    status: int | None = None
    retry_after: float | None = None


class WebhookSender(Protocol):
    """Sends deliveries, one attempt each. An implementation holds resources: `aclose` releases
    them, after which `send` may not be called."""

    async def send(self, delivery: Delivery) -> Outcome:
        """Attempt `delivery` once; every failure is an `Outcome`, never an exception (but
        cancellation, which is the caller's)."""
        ...

    async def aclose(self) -> None:
        """Release what the sender holds; idempotent."""
        ...


def parse_retry_after(value: str, now: datetime) -> float | None:
    """Seconds to wait from a Retry-After value (RFC 9110: whole seconds, or an HTTP date read
    against `now`), clamped to 0 .. `MAX_RETRY_AFTER`; None when it is neither."""
    text = value.strip()
    if text.isascii() and text.isdigit():
        # A digit string of any length is valid; beyond the cap its exact value is irrelevant.
        return MAX_RETRY_AFTER if len(text) > 6 else min(float(int(text)), MAX_RETRY_AFTER)
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:  # "-0000": the date is UTC with no claim about the local zone
        when = when.replace(tzinfo=UTC)
    seconds = (when - now).total_seconds()
    if not math.isfinite(seconds):
        return None
    return min(max(seconds, 0.0), MAX_RETRY_AFTER)

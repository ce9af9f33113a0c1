"""A history request's page tokens: opaque to the client, tamper-evident, and bound to the
request that paid for the span.

A token names the span (its first hour and count, fixed when the first page was paid for),
the offset of the next page, when the span was paid for, the connection that asked and a
digest of the request's body. It is signed with the server key (HMAC-SHA256, its own domain),
so a token edited to start elsewhere, widen the span or serve another point, another
connection's token, and a token sent with another request's body are all refused: a token
only ever pages through the span already charged. It lasts `TOKEN_LIFETIME` from the first
page.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import attrs

from cleanair_core.air.history import HistorySpan
from cleanair_core.errors import Unprocessable, Violation
from cleanair_core.geo import Point

#: How long after the first page (the one charged) its tokens serve the rest of the span.
TOKEN_LIFETIME = timedelta(hours=1)
_DOMAIN = b"history-page:v1:"
_MAC_BYTES = 16
_FOREIGN = Violation("page_token", "invalid", "is not a page token of this request")
_EXPIRED = Violation("page_token", "invalid", "has expired: ask again without it")


@attrs.frozen
class HistoryCursor:
    """Where a paid span's paging stands: the span, the next page's offset and when the span
    was paid for."""

    span: HistorySpan
    offset: int
    paid_at: datetime


def request_digest(
    point: Point, start: datetime, end: datetime | None, indexes: Sequence[str] | None
) -> str:
    """A digest of what a history request asks for, page aside, as sent: every page of a
    span must ask for the same."""
    canonical = json.dumps(
        [
            repr(point.lat),
            repr(point.lon),
            start.isoformat(),
            None if end is None else end.isoformat(),
            None if indexes is None else list(indexes),
        ],
        separators=(",", ":"),
    )
    return hashlib.sha256(canonical.encode()).hexdigest()[:32]


def page_token(key: bytes, connection: str, digest: str, cursor: HistoryCursor) -> str:
    """The token of the page at `cursor`, for `connection` asking the request of `digest`."""
    span = cursor.span
    payload = json.dumps(
        [
            connection,
            digest,
            int(span.first.timestamp()),
            span.count,
            span.step_seconds,
            cursor.offset,
            int(cursor.paid_at.timestamp()),
        ],
        separators=(",", ":"),
    ).encode()
    body = _encode(payload)
    return f"{body}.{_encode(_mac(key, body))}"


def read_page_token(
    key: bytes, token: str, connection: str, digest: str, now: datetime
) -> HistoryCursor:
    """The cursor `token` holds; Unprocessable (`page_token`, `invalid`) unless it was made
    by this server for `connection` and this request, and is not over `TOKEN_LIFETIME` old."""
    body, _, mac = token.partition(".")
    try:
        given = _decode(mac)
        valid = hmac.compare_digest(given, _mac(key, body))
        fields = json.loads(_decode(body)) if valid else None
    except (ValueError, binascii.Error):
        fields = None
    cursor = _cursor(fields, connection, digest)
    if cursor is None:
        raise Unprocessable(violations=[_FOREIGN])
    if now - cursor.paid_at > TOKEN_LIFETIME:
        raise Unprocessable(violations=[_EXPIRED])
    return cursor


def _cursor(fields: object, connection: str, digest: str) -> HistoryCursor | None:
    """The cursor of a signed payload, None unless it is this connection's and request's."""
    if not isinstance(fields, list) or len(fields) != 7:
        return None
    owner, asked, first, count, step, offset, paid = fields
    if owner != connection or asked != digest:
        return None
    numbers = (first, count, step, offset, paid)
    if not all(isinstance(n, int) and not isinstance(n, bool) for n in numbers):
        return None
    if not (count >= 1 and step >= 1 and 0 < offset < count):
        return None
    span = HistorySpan(datetime.fromtimestamp(first, UTC), count, step)
    return HistoryCursor(span, offset, datetime.fromtimestamp(paid, UTC))


def _mac(key: bytes, body: str) -> bytes:
    return hmac.new(key, _DOMAIN + body.encode(), hashlib.sha256).digest()[:_MAC_BYTES]


def _encode(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))

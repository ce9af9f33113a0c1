"""Webhook signatures after the Standard Webhooks specification (standardwebhooks.com, 1.0.0).

A webhook carries three headers: `webhook-id` (the event's id, the same on every retry, so a
receiver can de-duplicate on it), `webhook-timestamp` (the attempt's time in integer Unix
seconds, so a receiver can refuse replays) and `webhook-signature`: `v1,` and the base64 of the
HMAC-SHA256 of `{id}.{timestamp}.{payload}` under the endpoint's secret. While a secret is
rotated the request is signed with the old and the new one, the signatures separated by a
space, so a receiver holding either verifies it and the rotation needs no downtime.

A secret is shown to its owner as `whsec_` followed by the base64 of 24 to 64 random bytes
(the specification's range). Nothing here echoes a secret: not in errors, not in `repr`.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from secrets import token_bytes

import attrs

#: How a secret is told from other strings (the specification's prefix for HMAC secrets).
SECRET_PREFIX = "whsec_"  # noqa: S105 - a public marker, not a secret
#: The specification's bounds on a secret's random bytes (192 to 512 bits).
MIN_SECRET_BYTES = 24
MAX_SECRET_BYTES = 64
#: A fresh secret's size: 256 bits, the size of the HMAC-SHA256 block's output.
DEFAULT_SECRET_BYTES = 32

#: The prefix of a message id, the convention of the specification's examples.
MESSAGE_ID_PREFIX = "msg_"
#: Bound on a message id's length: it is a header value, and an event's id is far shorter.
MAX_MESSAGE_ID_LENGTH = 256

ID_HEADER = "webhook-id"
TIMESTAMP_HEADER = "webhook-timestamp"
SIGNATURE_HEADER = "webhook-signature"

# The signed content joins id, timestamp and payload with full stops, so the specification
# forbids a `.` in the id: with one, two different (id, timestamp) pairs could sign the same
# bytes. Letters, digits, `_` and `-` also keep the header free of spaces, commas and line
# breaks.
_ID_CHARACTERS = re.compile(r"[A-Za-z0-9_-]+")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_SIGNATURE_VERSION = "v1"


class MalformedSecret(ValueError):
    """A webhook secret that is not `whsec_` and the base64 of 24 to 64 bytes. The message
    names the broken rule, never the secret."""


@attrs.frozen(repr=False)
class SigningSecret:
    """An endpoint's signing secret: its random bytes."""

    key: bytes = attrs.field()

    @key.validator
    def _within_bounds(self, _: object, value: bytes) -> None:
        if not MIN_SECRET_BYTES <= len(value) <= MAX_SECRET_BYTES:
            raise MalformedSecret(
                f"A webhook secret has {MIN_SECRET_BYTES} to {MAX_SECRET_BYTES} random bytes"
            )

    def __repr__(self) -> str:  # never show the key in logs or tracebacks
        return "SigningSecret(<hidden>)"

    def as_text(self) -> str:
        """The form shown to the owner once and stored: `whsec_` and the padded base64."""
        return SECRET_PREFIX + base64.b64encode(self.key).decode("ascii")


def generate_secret(size: int = DEFAULT_SECRET_BYTES) -> SigningSecret:
    """A fresh secret of `size` random bytes (24 to 64)."""
    if not MIN_SECRET_BYTES <= size <= MAX_SECRET_BYTES:
        raise ValueError(f"A webhook secret has {MIN_SECRET_BYTES} to {MAX_SECRET_BYTES} bytes")
    return SigningSecret(token_bytes(size))


def parse_secret(text: str) -> SigningSecret:
    """The secret written as `whsec_` and standard base64 (its `=` padding may be left off,
    as the reference library allows); `MalformedSecret` otherwise."""
    if not text.startswith(SECRET_PREFIX):
        raise MalformedSecret(f"A webhook secret starts with {SECRET_PREFIX}")
    encoded = text.removeprefix(SECRET_PREFIX).rstrip("=")
    try:
        # validate=True: a character outside the alphabet is an error, not silently dropped.
        key = base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True)
    except (binascii.Error, ValueError):
        # from None: the decoder's own message and context stay out of the traceback.
        raise MalformedSecret(
            f"A webhook secret is {SECRET_PREFIX} followed by standard base64"
        ) from None
    return SigningSecret(key)


def message_id(event_id: str) -> str:
    """The `webhook-id` of an event: `msg_` and the event's stable id, so every attempt to
    deliver the event carries the same id. The event id is letters, digits, `_` and `-` (a
    UUID's text is)."""
    # Checked before the prefix is added: an empty event id would leave a valid-looking `msg_`.
    _check_message_id(event_id, MAX_MESSAGE_ID_LENGTH - len(MESSAGE_ID_PREFIX))
    return MESSAGE_ID_PREFIX + event_id


def sign(
    secrets: Sequence[SigningSecret], message_id: str, timestamp: datetime, payload: bytes
) -> dict[str, str]:
    """The three Standard Webhooks headers of one delivery attempt of `payload` (the exact
    bytes sent as the body), at `timestamp` (timezone-aware; sent in whole seconds), signed
    with every one of `secrets`: two while a secret is rotated, the new one first."""
    if not secrets:
        raise ValueError("A webhook is signed with at least one secret")
    _check_message_id(message_id)
    if timestamp.tzinfo is None:
        raise ValueError("A webhook timestamp is timezone-aware")
    # Floor division of timedeltas is exact; a float's timestamp() could round up a second.
    seconds = str((timestamp - _EPOCH) // timedelta(seconds=1))
    content = f"{message_id}.{seconds}.".encode("ascii") + payload
    signatures = " ".join(
        f"{_SIGNATURE_VERSION},{_hmac_base64(secret.key, content)}" for secret in secrets
    )
    return {ID_HEADER: message_id, TIMESTAMP_HEADER: seconds, SIGNATURE_HEADER: signatures}


def _hmac_base64(key: bytes, content: bytes) -> str:
    return base64.b64encode(hmac.digest(key, content, hashlib.sha256)).decode("ascii")


def _check_message_id(value: str, longest: int = MAX_MESSAGE_ID_LENGTH) -> None:
    if len(value) > longest or not _ID_CHARACTERS.fullmatch(value):
        raise ValueError(
            f"A webhook id is 1 to {longest} letters, digits, '_' or '-' "
            "(a '.' would make signatures ambiguous)"
        )

"""Webhook secrets derived from the server's key, never stored (issue 32).

A subscription's signing secret is HMAC-SHA256(server key, `cleanair webhook secret` +
the subscription id's 16 bytes + its generation as 4 bytes, big-endian): 32 bytes, shown to
its owner once, at creation (and at each rotation), as `whsec_` and their base64. The
database holds only the generation, so nothing secret is at rest: a copy of the database (a
backup, a stolen disk) signs nothing without the server's key, and the key is already what
protects tokens and pairing codes (`cleanair_core.keys`).

Rotation moves to the next generation; the previous one goes on signing beside it until the
overlap end stored on the subscription, so the receiver can switch whenever it likes.
"""

from __future__ import annotations

import hashlib
import hmac
import uuid
from datetime import datetime

from cleanair_core.alerts.signatures import SigningSecret
from cleanair_core.keys import TokenKeys

#: Keeps these MACs apart from every other use of the server key (tokens, pairing codes and
#: BSSIDs hash text with their own prefixes; none starts with this).
SECRET_DOMAIN = b"cleanair webhook secret"
#: Generations are written as 4 bytes: far more rotations than any subscription will see.
MAX_GENERATION = 2**32 - 1


def webhook_secret(keys: TokenKeys, subscription_id: uuid.UUID, generation: int) -> SigningSecret:
    """The signing secret of `subscription_id`'s `generation` (1 for a new subscription)."""
    if not 1 <= generation <= MAX_GENERATION:
        raise ValueError(f"a secret generation is 1 to {MAX_GENERATION}")
    message = SECRET_DOMAIN + subscription_id.bytes + generation.to_bytes(4, "big")
    return SigningSecret(hmac.digest(keys.key, message, hashlib.sha256))


def signing_secrets(
    keys: TokenKeys,
    subscription_id: uuid.UUID,
    generation: int,
    previous_until: datetime | None,
    now: datetime,
) -> tuple[SigningSecret, ...]:
    """The secrets a delivery at `now` is signed with: the current generation's, and while
    the overlap of a rotation runs (`now` before `previous_until`) the previous one's after
    it, as `signatures.sign` wants them (new first)."""
    current = webhook_secret(keys, subscription_id, generation)
    if generation > 1 and previous_until is not None and now < previous_until:
        return current, webhook_secret(keys, subscription_id, generation - 1)
    return (current,)

"""Usage attribution: which label a charge is booked under."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Protocol

from cleanair_core.credits.ledger import Billable

CLIENT_LABEL = re.compile(r"^[a-z0-9_-]{1,32}$")


class ClientLabelStore(Protocol):
    """Storage port for the recognised `client` labels."""

    def add_client_label(self, label: str, at: datetime) -> bool:
        """Insert; False when already recognised."""

    def is_client_label(self, label: str) -> bool: ...


def validate_client_label(label: str) -> str:
    if not CLIENT_LABEL.fullmatch(label):
        raise ValueError("a client label is 1 to 32 characters of a-z, 0-9, _ and -")
    return label


def attribution_label(client: str | None, billable: Billable, labels: ClientLabelStore) -> str:
    """`client:<name>` for a recognised label, else the endpoint's own label."""
    if client is not None and CLIENT_LABEL.fullmatch(client) and labels.is_client_label(client):
        return f"client:{client}"
    return billable.value


async def attribution_label_awaited(
    client: str | None, billable: Billable, is_client_label: Callable[[str], Awaitable[bool]]
) -> str:
    """`attribution_label`, asking `is_client_label` (`RequestStore.is_client_label`)."""
    if client is not None and CLIENT_LABEL.fullmatch(client) and await is_client_label(client):
        return f"client:{client}"
    return billable.value

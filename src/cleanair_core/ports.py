"""The storage ports the core needs, gathered into one protocol an adapter implements."""

from __future__ import annotations

from typing import Protocol

from cleanair_core.accounts import AccountStore
from cleanair_core.attribution import ClientLabelStore
from cleanair_core.connections import ConnectionStore
from cleanair_core.credits import CreditLedger
from cleanair_core.pairing import PairingCodeStore
from cleanair_core.plans import PlanStore
from cleanair_core.rate_limits import RateLimitStore
from cleanair_core.street_network import StreetNetworkStore
from cleanair_core.wifi import AccessPointStore


class Store(
    AccountStore,
    ConnectionStore,
    PairingCodeStore,
    CreditLedger,
    RateLimitStore,
    ClientLabelStore,
    AccessPointStore,
    PlanStore,
    StreetNetworkStore,
    Protocol,
):
    """Everything the core stores. `cleanair_storage` ships in-memory and SQLite adapters."""

    def close(self) -> None: ...

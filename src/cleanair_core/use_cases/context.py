"""What every use case runs against: the store, the sources, the key, the policy and a clock."""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence
from datetime import datetime

import attrs

from cleanair_core.air.quality_source import Sample, answers_at_once
from cleanair_core.air.tiles.cache import TileCache
from cleanair_core.clock import Clock
from cleanair_core.credits.charging import HeldCharges
from cleanair_core.credits.final_charges import GroupCommit
from cleanair_core.credits.rate_limits import RateLimit
from cleanair_core.errors import SourceUnavailable
from cleanair_core.keys import TokenKeys
from cleanair_core.metrics import NO_METRICS, Metrics
from cleanair_core.offload import Offload, inline
from cleanair_core.policy import Policy
from cleanair_core.ports import Sources, Store
from cleanair_core.request_calls import RequestStore, offloaded
from cleanair_core.routes.network_air import NetworkAir


@attrs.frozen(eq=False)
class Context:
    """One deployment's adapters and limits, shared by the use cases of every area."""

    store: Store
    keys: TokenKeys
    policy: Policy
    clock: Clock
    sources: Sources | None = None
    randbelow: Callable[[int], int] = secrets.randbelow
    #: Where the async use cases run blocking work (storage waits, path searches).
    offload: Offload = inline
    #: Where they run a store call that changes the store in one atomic step at most (a
    #: charge's debit or settlement): may try it right here first (`here_unless_blocked`).
    store_calls: Offload = inline
    #: The charges reserved through this context and not yet settled: renewing their holds
    #: keeps them from being swept while their calls run.
    held_charges: HeldCharges = attrs.field(factory=HeldCharges)
    #: The air at street-network nodes, kept for every plan of the same hour.
    network_air: NetworkAir = attrs.field(factory=NetworkAir)
    #: Rendered heatmap tiles, shared by every request of the process.
    tile_cache: TileCache = attrs.field(factory=TileCache)
    #: Hears of credits charged and refunded and of plans finished.
    metrics: Metrics = NO_METRICS
    #: The request path's store calls (admission, rate-limit hits, final charges), awaited
    #: from the event loop: the store's sync ports on `store_calls` unless an adapter gives
    #: its own (PostgreSQL's runs them on the loop).
    requests: RequestStore = attrs.field(
        default=attrs.Factory(lambda self: offloaded(self.store, self.store_calls), takes_self=True)
    )
    #: Where final charges queue to be committed together (on `requests`).
    final_charges: GroupCommit = attrs.field(
        init=False,
        default=attrs.Factory(
            lambda self: GroupCommit(
                self.store,
                self.policy.credits,
                self.store_calls,
                settle=self.requests.settle_charges,
            ),
            takes_self=True,
        ),
    )

    #: `policy.requests` (the general request limit), made once rather than per request.
    request_limit: RateLimit = attrs.field(
        init=False,
        default=attrs.Factory(lambda self: self.policy.requests, takes_self=True),
    )

    def now(self) -> datetime:
        return self.clock.now()

    def require_sources(self) -> Sources:
        if self.sources is None:
            raise SourceUnavailable("No air-quality source is configured")
        return self.sources


def needs_upstream(
    sources: Sources, *, wifi_lookup: bool = False, samples: Sequence[Sample] = ()
) -> bool:
    """Whether a call may wait on an upstream service (its charge is then held while it
    runs): a Wi-Fi scan goes to a remote geolocator, or the air source is remote and does not
    hold the air of `samples` (the call's, when known before it runs) already."""
    if wifi_lookup and not sources.local_wifi:
        return True
    if sources.local_air:
        return False
    return not (samples and answers_at_once(sources.air_quality, samples))

"""Every seam between the core and the outside world, in one place.

The core defines each port beside the rules that use it (in its area's package); this module
names them all, so a newcomer (or an adapter's author) finds every one here. Ports that hold
resources say how they are closed: `Store.close`.

Storage (`cleanair_storage` ships in-memory, SQLite and PostgreSQL adapters):
    AccountStore, ConnectionStore, PairingCodeStore (access); CreditLedger, RateLimitStore,
    ClientLabelStore (credits); AdmissionStore (across access and credits: a request's one
    read); AccessPointStore, ObservationStore (air); PlanStore (with the
    ledger and a unit of work: PlanBook), StreetNetworkStore (routes), SubscriptionStore
    (alerts: subscriptions and their evaluator state), EvaluationClaims (alerts: the due
    subscriptions leased to the evaluation workers), AlertOutbox (alerts: the feed and
    the webhook deliveries owed); gathered into `Store`,
    whose `transaction()` is the unit of work. RequestStore: the request path's calls
    (admission, rate-limit hit, client label, final charges) awaited from the event loop;
    PostgreSQL's runs them there, any other store's sync ports on the offload
    (`cleanair_core.request_calls`).
The outside world (`cleanair_sources` ships the adapters), gathered into `Sources`:
    AirQualitySource, WifiGeolocator, IpLocator, PlaceNamer (air); StreetNetworks and its
    Router (routes), UpstreamHealth (a remote source's breaker). TrafficIncrements and
    BackgroundGrid (air) are what `StreetLevelAir` downscales any background source to
    street level with.
    WebhookSender (alerts; `HttpWebhookSender` checks every address it dials: closed with
    `aclose`).
Time and work: Clock, and Offload (where CPU-heavy planning runs).
Monitoring: Metrics (credits charged and refunded, plans finished, upstream requests; the
    default `NO_METRICS` drops them, `cleanair_http` ships a Prometheus adapter).
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from datetime import datetime
from typing import Protocol

import attrs

from cleanair_core.access.accounts import AccountStore
from cleanair_core.access.connections import Connection, ConnectionStore
from cleanair_core.access.pairing import PairingCodeStore
from cleanair_core.air.observations import ObservationStore
from cleanair_core.air.places import IpLocator, PlaceNamer
from cleanair_core.air.quality_source import AirQualitySource
from cleanair_core.air.street_level import BackgroundGrid, TrafficIncrements
from cleanair_core.air.wifi import AccessPointStore, WifiGeolocator
from cleanair_core.alerts.delivery import WebhookSender
from cleanair_core.alerts.outbox import AlertOutbox
from cleanair_core.alerts.rounds import EvaluationClaims
from cleanair_core.alerts.subscriptions import SubscriptionStore
from cleanair_core.clock import Clock
from cleanair_core.credits.attribution import ClientLabelStore
from cleanair_core.credits.ledger import CreditLedger, Usage
from cleanair_core.credits.rate_limits import RateLimitStore
from cleanair_core.metrics import Metrics, Upstream
from cleanair_core.offload import Offload
from cleanair_core.request_calls import RequestStore
from cleanair_core.routes.network import Router, StreetNetworks, StreetNetworkStore
from cleanair_core.routes.plans import PlanBook, PlanStore

__all__ = [
    "AccessPointStore",
    "AccountStore",
    "AdmissionRead",
    "AdmissionStore",
    "AirQualitySource",
    "AlertOutbox",
    "BackgroundGrid",
    "ClientLabelStore",
    "Clock",
    "ConnectionStore",
    "CreditLedger",
    "EvaluationClaims",
    "IpLocator",
    "Metrics",
    "ObservationStore",
    "Offload",
    "PairingCodeStore",
    "PlaceNamer",
    "PlanStore",
    "RateLimitStore",
    "RequestStore",
    "Router",
    "Sources",
    "Store",
    "StreetNetworkStore",
    "StreetNetworks",
    "SubscriptionStore",
    "TrafficIncrements",
    "UpstreamHealth",
    "WebhookSender",
    "WifiGeolocator",
]


@attrs.frozen
class AdmissionRead:
    """What one read of the store says of a request's bearer token (`AdmissionStore`)."""

    #: The connection holding the token's hash; None (and nothing else) when there is none.
    connection: Connection | None
    #: Its owner's standing: a user's premium plan, a partner's being active; None when the
    #: account is gone.
    standing: bool | None = None
    #: The connection's rate-limit counter asked for, as `(window_start, count)`; None when
    #: it has none.
    counter: tuple[int, int] | None = None
    #: The usage of its owner's credit pool at the instant asked for.
    usage: Usage = attrs.field(factory=lambda: Usage(0, 0))


class AdmissionStore(Protocol):
    """Storage port for what every authenticated request reads before it runs: the token's
    connection, its owner's standing, its rate-limit counter and its pool's usage, in one read
    (one round trip on a server database)."""

    def admission(self, token_hash: str, rate_limit: str, at: datetime) -> AdmissionRead:
        """The connection whose token hash is `token_hash`, its owner's standing, its counter
        under the key `<rate_limit>:<connection id>` and its owner's pool's `usage` at `at`."""
        ...


class Store(
    AdmissionStore,
    AccountStore,
    ConnectionStore,
    PairingCodeStore,
    PlanBook,  # the plans with the credit ledger
    RateLimitStore,
    ClientLabelStore,
    AccessPointStore,
    ObservationStore,
    StreetNetworkStore,
    SubscriptionStore,
    EvaluationClaims,
    AlertOutbox,
    Protocol,
):
    """Everything the core stores. `cleanair_storage` ships in-memory, SQLite and PostgreSQL
    adapters."""

    def transaction(self) -> AbstractContextManager[Store]:
        """A unit of work over every port: the calls made on the store it yields, until the
        block ends, are one atomic transaction (across processes, for a shared store); an
        exception leaving the block undoes all of them. The core composes its atomic steps
        (a debit and the plan it pays for, a failed plan and its refund) with it."""
        ...

    def schema_is_current(self) -> bool:
        """Whether the database holds exactly the schema this code migrates to: False when it
        was never migrated (emptied or replaced under a running process) or a newer release
        has migrated it since. One read, so it answers only when the database does
        (StoreUnavailable otherwise): the readiness probe asks it."""
        ...

    def close(self) -> None:
        """Release the store's connections and files; the store is unusable afterwards."""


class UpstreamHealth(Protocol):
    """What a remote source's circuit breaker says of its upstream, for the readiness probe."""

    @property
    def upstream(self) -> Upstream: ...

    def state(self) -> str:
        """`closed` (answering), `open` (calls fail at once) or `half-open` (one trial
        call decides)."""
        ...


@attrs.frozen
class Sources:
    """Where air quality, Wi-Fi and IP locations, place names and street networks come from.

    A port left as None makes the use cases that need it fail as unresolvable (Wi-Fi, IP) or
    fall back to coordinates as the name (places).
    """

    air_quality: AirQualitySource
    wifi: WifiGeolocator | None = None
    ip: IpLocator | None = None
    places: PlaceNamer | None = None
    #: The street networks route plans run on; None rejects every plan.
    networks: StreetNetworks | None = None
    #: What the air comes from before any station corrects it, as provenance names it:
    #: `embedded-model` or `cams`.
    background: str = "embedded-model"
    #: The remote sources whose upstream state the readiness probe reports.
    upstreams: tuple[UpstreamHealth, ...] = ()
    #: Whether `air_quality` answers without an upstream request (the embedded model and
    #: stored observations): a call that needs nothing else is then charged once answered,
    #: in one write, with no hold. False (a hold for every call) unless the adapter says so.
    local_air: bool = False
    #: Whether `wifi` resolves a scan without an upstream request (the operator's own access
    #: points).
    local_wifi: bool = False

"""`Policy`: the tunable limits of one deployment, as the core's use cases read them."""

from __future__ import annotations

from datetime import timedelta

import attrs

from cleanair_core.access.tokens import Environment
from cleanair_core.alerts.destinations import DestinationPolicy
from cleanair_core.credits.ledger import CreditLimits
from cleanair_core.credits.rate_limits import RateLimit
from cleanair_core.routes.plans import POLLS_PER_MINUTE


@attrs.frozen
class Policy:
    """The tunable limits of one deployment."""

    environment: Environment = Environment.TEST
    credits: CreditLimits = attrs.field(factory=CreditLimits)
    #: Requests per minute per connection on every authenticated endpoint but plan polling.
    requests_per_minute: int = 600
    #: Redemption attempts per minute per client address.
    pairing_attempts_per_minute: int = 10
    #: Requests per minute per client address for the explorer's public network index and
    #: tiles, which need no token: the only thing between them and a crawler.
    explore_requests_per_minute: int = attrs.field(default=300, validator=attrs.validators.ge(1))
    #: Distinct codes that may be tried within any code life (60 s), across all clients.
    pairing_guess_budget: int = attrs.field(default=100, validator=attrs.validators.ge(1))
    #: Seconds a worker holds a plan before another may take it; the worker renews it while
    #: it works, so this is how long a plan waits after its worker died.
    plan_lease_seconds: int = 60
    #: A plan whose worker died this many times fails (refunded) instead of being retried.
    max_plan_attempts: int = 3
    #: Finished plans are kept this long for polling, then pruned.
    plan_retention_seconds: int = 7 * 24 * 3600
    #: Station observations are kept this long (by the end of their hour), then pruned; 0
    #: keeps them for ever. 400 days: a year to evaluate against, and a month to spare.
    observation_retention_seconds: int = attrs.field(
        default=400 * 24 * 3600, validator=attrs.validators.ge(0)
    )
    #: How long a charge stands unconfirmed without renewal: the process answering renews
    #: it while it works, so this is how long a charge waits for a refund after its process
    #: died before answering (`cleanair_core.credits.charging`).
    charge_hold_seconds: int = attrs.field(default=60, validator=attrs.validators.ge(1))
    #: Whether the process is ready only with a street network loaded: false for a deployment
    #: that loads none on purpose (scores alone), whose plans then fail as with no network.
    street_network_required: bool = True
    #: Where alert webhooks may be sent (https, the usual ports, public addresses only by
    #: default): checked when a subscription names its URL, and again before each delivery.
    webhook_destinations: DestinationPolicy = attrs.field(factory=DestinationPolicy)
    #: Seconds a worker holds the alert subscriptions it evaluates and the webhook
    #: deliveries it sends before another may take them: far longer than a round or a pass
    #: takes, so this is how long a dead worker's alert work waits.
    alert_lease_seconds: int = attrs.field(default=300, validator=attrs.validators.ge(1))
    #: The alert feed's entries and the webhook deliveries no longer owed are kept this long,
    #: then pruned by the workers (a delivery still owed is kept whatever its age). At least
    #: a day: a client polling the feed daily misses nothing.
    alert_retention_seconds: int = attrs.field(
        default=30 * 24 * 3600, validator=attrs.validators.ge(24 * 3600)
    )
    #: Heatmap tiles served per owner (user or partner) and UTC day: free of credits, but
    #: bounded (docs/api-choices.md). A 304 revalidation does not count.
    tiles_per_day: int = attrs.field(default=20_000, validator=attrs.validators.ge(1))

    @property
    def tile_allowance(self) -> RateLimit:
        return RateLimit("tiles-daily", self.tiles_per_day, 24 * 3600)

    @property
    def requests(self) -> RateLimit:
        return RateLimit("requests", self.requests_per_minute)

    @property
    def plan_polls(self) -> RateLimit:
        return RateLimit("plan-polls", POLLS_PER_MINUTE)

    @property
    def charge_hold(self) -> timedelta:
        return timedelta(seconds=self.charge_hold_seconds)

    @property
    def plan_lease(self) -> timedelta:
        return timedelta(seconds=self.plan_lease_seconds)

    @property
    def explore_requests(self) -> RateLimit:
        return RateLimit("explore-requests", self.explore_requests_per_minute)

    @property
    def pairing_attempts(self) -> RateLimit:
        return RateLimit("pairing-attempts", self.pairing_attempts_per_minute)

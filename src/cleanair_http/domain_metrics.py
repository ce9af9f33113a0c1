"""The domain's Prometheus metrics (`PrometheusMetrics`, the core's `Metrics` port) and what a
scrape reads, apart from the HTTP layer's request counting (`cleanair_http.metrics`).

Apart because a plan process and `cleanair worker` count plans, refunds, upstream requests and
alerts but answer no HTTP: importing this module, not `cleanair_http.metrics`, keeps Litestar
(about 400 modules) out of them.

In multiprocess mode prometheus_client reads PROMETHEUS_MULTIPROC_DIR at import, so this module
is imported only once metrics are on, after the parent named the directory (`server.serve`).
"""

from __future__ import annotations

import functools
import os

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Histogram
from prometheus_client.multiprocess import MultiProcessCollector

from cleanair_core.air.observations import OBSERVED
from cleanair_core.air.screening import HeldBack
from cleanair_core.credits.ledger import Billable
from cleanair_core.errors import Limit
from cleanair_core.metrics import Upstream
from cleanair_core.routes.plans import PlanStatus

PREFIX = "cleanair"
MULTIPROCESS_DIR = "PROMETHEUS_MULTIPROC_DIR"
#: Planning takes from milliseconds (a cached hour, a short route) to minutes.
PLAN_BUCKETS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, float("inf"))
#: An upstream answers in tens of milliseconds or, slowly, up to its timeout.
UPSTREAM_BUCKETS = (0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, float("inf"))
FINAL_STATUSES = (PlanStatus.COMPLETED, PlanStatus.FAILED)


#: What an alert event or a webhook attempt can come to (`Metrics.alert_events`,
#: `alert_deliveries`).
ALERT_EVENT_OUTCOMES = ("recorded", "withheld")
ALERT_DELIVERY_OUTCOMES = ("delivered", "retried", "failed", "disabled")
#: Seconds: the issue's aim for observed alerts is 60 s at p95; retries run for a day.
ALERT_LAG_BUCKETS = (5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 900.0, 3600.0, 6 * 3600.0, 86400.0)


class PrometheusMetrics:
    """The core's `Metrics` port over prometheus_client, and the 429s the HTTP layer sends."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.charged = Counter(
            f"{PREFIX}_credits_charged",
            "Credits debited, by endpoint",
            ["endpoint"],
            registry=registry,
        )
        self.refunded = Counter(
            f"{PREFIX}_credits_refunded",
            "Credits given back for calls that failed, by endpoint",
            ["endpoint"],
            registry=registry,
        )
        self.refusals = Counter(
            f"{PREFIX}_too_many_requests",
            "429 responses, by the limit that refused the call",
            ["cause"],
            registry=registry,
        )
        self.plans = Counter(
            f"{PREFIX}_plans_finished",
            "Route plans finished by this service's workers, by final status",
            ["status"],
            registry=registry,
        )
        self.planning = Histogram(
            f"{PREFIX}_plan_planning_seconds",
            "Time a worker spent on a route plan, by final status",
            ["status"],
            buckets=PLAN_BUCKETS,
            registry=registry,
        )
        self.upstream_latency = Histogram(
            f"{PREFIX}_upstream_request_duration_seconds",
            "Requests to upstream services and their time, failed ones included",
            ["upstream"],
            buckets=UPSTREAM_BUCKETS,
            registry=registry,
        )
        self.upstream_errors = Counter(
            f"{PREFIX}_upstream_errors",
            "Upstream requests that gave no usable answer",
            ["upstream"],
            registry=registry,
        )
        self.observations = Counter(
            f"{PREFIX}_observations_stored",
            "Station observations a live source stored that were new or changed, by upstream",
            ["upstream"],
            registry=registry,
        )
        self.held_back = Counter(
            f"{PREFIX}_observations_held_back",
            "Station observations a live source's intake screening held back (not stored), by "
            "upstream and reason: over the pollutant's upper bound, or an hour in the future",
            ["upstream", "reason"],
            registry=registry,
        )
        self.set_aside = Counter(
            f"{PREFIX}_observations_set_aside",
            "Stored station observations fusion set aside, wildly out of line with their "
            "neighbours and their own last day",
            ["pollutant"],
            registry=registry,
        )
        self.air_hours = Counter(
            f"{PREFIX}_air_hours",
            "Hours of air worked out per pollutant, fused with station observations or not "
            "(none within reach: no stations, or a live source's outage)",
            ["pollutant", "fused"],
            registry=registry,
        )
        self.alert_events_decided = Counter(
            f"{PREFIX}_alert_events",
            "Alert events the evaluation rounds stored: recorded (feed and outbox), or "
            "withheld because the owner's credit pool could not pay",
            ["outcome"],
            registry=registry,
        )
        self.alert_attempts = Counter(
            f"{PREFIX}_alert_deliveries",
            "Webhook attempts by what came of them: delivered, retried (due again), failed "
            "(given up), disabled (the attempt disabled its subscription)",
            ["outcome"],
            registry=registry,
        )
        self.alert_lag = Histogram(
            f"{PREFIX}_alert_delivery_lag_seconds",
            "From the data an alert tells of (the end of the observed hour; a forecast's "
            "recording) to its webhook's delivery",
            buckets=ALERT_LAG_BUCKETS,
            registry=registry,
        )
        # Every series exists from the start at 0, so rate() and alerts see the first event.
        for outcome in ALERT_EVENT_OUTCOMES:
            self.alert_events_decided.labels(outcome)
        for outcome in ALERT_DELIVERY_OUTCOMES:
            self.alert_attempts.labels(outcome)
        for billable in Billable:
            self.charged.labels(billable.value)
            self.refunded.labels(billable.value)
        for limit in Limit:
            self.refusals.labels(limit.value)
        for status in FINAL_STATUSES:
            self.plans.labels(status.value)
            self.planning.labels(status.value)
        for upstream in Upstream:
            self.upstream_latency.labels(upstream.value)
            self.upstream_errors.labels(upstream.value)
            self.observations.labels(upstream.value)
            for reason in HeldBack:
                self.held_back.labels(upstream.value, reason.value)
        for pollutant in OBSERVED:
            self.set_aside.labels(pollutant.value)
            self.air_hours.labels(pollutant.value, "yes")
            self.air_hours.labels(pollutant.value, "no")

    def credits_charged(self, endpoint: str, credits: int) -> None:
        self.charged.labels(str(endpoint)).inc(credits)

    def credits_refunded(self, endpoint: str, credits: int) -> None:
        self.refunded.labels(str(endpoint)).inc(credits)

    def plan_finished(self, status: str, seconds: float) -> None:
        self.plans.labels(str(status)).inc()
        self.planning.labels(str(status)).observe(seconds)

    def upstream_request(self, upstream: Upstream, seconds: float, *, failed: bool) -> None:
        self.upstream_latency.labels(upstream.value).observe(seconds)
        if failed:
            self.upstream_errors.labels(upstream.value).inc()

    def observations_stored(self, upstream: Upstream, count: int) -> None:
        self.observations.labels(upstream.value).inc(count)

    def observations_held_back(self, upstream: Upstream, reason: str, count: int) -> None:
        self.held_back.labels(upstream.value, str(reason)).inc(count)

    def observations_set_aside(self, pollutant: str, count: int) -> None:
        self.set_aside.labels(str(pollutant)).inc(count)

    def air_hour(self, pollutant: str, *, fused: bool) -> None:
        self.air_hours.labels(str(pollutant), "yes" if fused else "no").inc()

    def alert_events(self, outcome: str, count: int) -> None:
        self.alert_events_decided.labels(str(outcome)).inc(count)

    def alert_deliveries(self, outcome: str, count: int) -> None:
        self.alert_attempts.labels(str(outcome)).inc(count)

    def alert_delivery_lag(self, seconds: float) -> None:
        self.alert_lag.observe(seconds)

    def too_many_requests(self, limit: Limit) -> None:
        """A 429 went out, refused by `limit`."""
        self.refusals.labels(limit.value).inc()


@functools.cache
def prometheus_metrics() -> PrometheusMetrics:
    """The process's metrics. One per process, as prometheus_client's registry is (it refuses
    a second metric of one name): every app and deployment of the process shares them."""
    return PrometheusMetrics(REGISTRY)


def scrape_registry() -> CollectorRegistry:
    """What a scrape reads: every process's files in multiprocess mode, else this process's
    registry."""
    if MULTIPROCESS_DIR not in os.environ:
        return REGISTRY
    registry = CollectorRegistry()
    MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
    return registry

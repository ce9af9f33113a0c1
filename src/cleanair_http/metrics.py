"""Prometheus metrics: requests by route, method and status with their latency (Litestar's
Prometheus plugin), and the domain's own (`PrometheusMetrics`, the core's `Metrics` port).

Labels name routes by their template (`/v1/routes/{request_id}`), endpoints, limits, plan
statuses and upstreams: small fixed sets. Never a token, user, connection or address, which
would leak to whoever reads the monitoring and grow a series per caller.

Several processes (`cleanair serve --workers N`) write to one directory of prometheus_client's
multiprocess mode, which the parent names in PROMETHEUS_MULTIPROC_DIR before anything imports
prometheus_client (`server.serve`); a scrape of any of them, or of the parent's metrics port,
adds them all up. This module is imported only once metrics are on, for that reason.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable

from litestar import Response, get
from litestar.plugins.prometheus import (
    PrometheusConfig,
    PrometheusController,
    PrometheusMiddleware,
)
from litestar.types import ASGIApp
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
    start_http_server,
)
from prometheus_client.multiprocess import MultiProcessCollector

from cleanair_core.air.observations import OBSERVED
from cleanair_core.credits.ledger import Billable
from cleanair_core.errors import Limit
from cleanair_core.metrics import Upstream
from cleanair_core.routes.plans import PlanStatus
from cleanair_http.controllers.health import METRICS_PATH

log = logging.getLogger("cleanair")

PREFIX = "cleanair"
MULTIPROCESS_DIR = "PROMETHEUS_MULTIPROC_DIR"
#: Planning takes from milliseconds (a cached hour, a short route) to minutes.
PLAN_BUCKETS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, float("inf"))
#: An upstream answers in tens of milliseconds or, slowly, up to its timeout.
UPSTREAM_BUCKETS = (0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, float("inf"))
FINAL_STATUSES = (PlanStatus.COMPLETED, PlanStatus.FAILED)


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
        self.air_hours = Counter(
            f"{PREFIX}_air_hours",
            "Hours of air worked out per pollutant, fused with station observations or not "
            "(none within reach: no stations, or a live source's outage)",
            ["pollutant", "fused"],
            registry=registry,
        )
        # Every series exists from the start at 0, so rate() and alerts see the first event.
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
        for pollutant in OBSERVED:
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

    def air_hour(self, pollutant: str, *, fused: bool) -> None:
        self.air_hours.labels(str(pollutant), "yes" if fused else "no").inc()

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


class _CountedMiddleware(PrometheusMiddleware):
    """The plugin's middleware with Litestar's exception handling inside it: an error raised
    by the middleware after it (the bearer middleware's 401s and 429s) is then a response
    it counts with its status, not an exception it counts as the 200 it assumes."""

    def __init__(self, app: ASGIApp, config: PrometheusConfig) -> None:
        # Litestar puts the same wrapper between a route's handler and its middleware.
        from litestar._asgi.utils import wrap_in_exception_handler

        super().__init__(wrap_in_exception_handler(app), config)


def prometheus_config() -> PrometheusConfig:
    """Requests by route template (never the raw path, which holds plan ids), method and
    status, and their latency."""
    return PrometheusConfig(
        app_name=PREFIX,
        prefix=PREFIX,
        group_path=True,
        middleware_class=_CountedMiddleware,
    )


class MetricsController(PrometheusController):
    """`GET /metrics` on the API's port: outside the OpenAPI document (it is for operators,
    as the probes are), with no token, so no rate limit and no credits."""

    path = METRICS_PATH
    include_in_schema = False
    opt = {"exclude_from_auth": True}

    # The plugin's handler renders on the event loop; with several processes a scrape reads
    # and merges every process's files, so it runs in a worker thread instead.
    @get(sync_to_thread=True)
    def get(self) -> Response[bytes]:
        """Every counted figure, in Prometheus' text format."""
        return Response(
            generate_latest(scrape_registry()), headers={"Content-Type": CONTENT_TYPE_LATEST}
        )


def serve_metrics(host: str, port: int) -> Callable[[], None]:
    """Serve the metrics on `host:port` from a thread; the function that stops it. Raises
    OSError when it cannot listen there."""
    server, thread = start_http_server(port, addr=host, registry=scrape_registry())

    def stop() -> None:
        server.shutdown()
        server.server_close()
        thread.join()

    return stop


def mark_process_dead(pid: int) -> None:
    """Forget the live gauges (requests in progress) of a serving process that has ended."""
    if MULTIPROCESS_DIR in os.environ:
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(pid)  # type: ignore[no-untyped-call]


__all__ = [
    "METRICS_PATH",
    "MetricsController",
    "PrometheusMetrics",
    "mark_process_dead",
    "prometheus_config",
    "prometheus_metrics",
    "scrape_registry",
    "serve_metrics",
]

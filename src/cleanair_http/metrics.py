"""Prometheus metrics: requests by route, method and status with their latency (Litestar's
Prometheus plugin), and the domain's own (`PrometheusMetrics`, the core's `Metrics` port).

Labels name routes by their template (`/v1/routes/{request_id}`), endpoints, limits, plan
statuses and upstreams: small fixed sets. Never a token, user, connection or address, which
would leak to whoever reads the monitoring and grow a series per caller.

Requests are counted by `count_requests`, which replaces Litestar's Prometheus middleware with
the same metrics at a fraction of its cost: in one process each thread counts in a tally of
its own, with no lock, and a scrape adds the tallies up (`RequestTallies`).

Several processes (`cleanair serve --workers N`) write to one directory of prometheus_client's
multiprocess mode, which the parent names in PROMETHEUS_MULTIPROC_DIR before anything imports
prometheus_client (`server.serve`); a scrape of any of them, or of the parent's metrics port,
adds them all up. This module is imported only once metrics are on, for that reason.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
import time
from bisect import bisect_left
from collections.abc import Iterator
from typing import Protocol

from litestar import Response, get
from litestar.plugins.prometheus import PrometheusController
from litestar.types import ASGIApp, Message, Receive, Scope, Send
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.samples import Sample
from prometheus_client.utils import floatToGoString

from cleanair_http.controllers.health import METRICS_PATH
from cleanair_http.domain_metrics import (
    MULTIPROCESS_DIR,
    PREFIX,
    PrometheusMetrics,
    prometheus_metrics,
    scrape_registry,
)

log = logging.getLogger("cleanair")

#: The request metrics' labels, in the order Litestar's Prometheus plugin gave them.
REQUEST_LABELS = ("method", "path", "status_code", "app_name")
#: prometheus_client's default buckets, which the plugin's latency histogram had.
REQUEST_BUCKETS = Histogram.DEFAULT_BUCKETS
_BUCKET_NAMES = [floatToGoString(bound) for bound in REQUEST_BUCKETS]  # type: ignore[no-untyped-call]
#: The metric names and help texts of the plugin, which dashboards and alerts know.
_REQUESTS = (f"{PREFIX}_requests", "Total requests")
_ERRORS = (f"{PREFIX}_requests_error", "Total errors in requests")
_SECONDS = (f"{PREFIX}_request_duration_seconds", "Request duration, in seconds")
_IN_PROGRESS = (f"{PREFIX}_requests_in_progress", "Total requests currently in progress")


class RequestRecorder(Protocol):
    """Where `count_requests` counts: requests by method and route template."""

    def started(self, method: str, path: str) -> None:
        """A request began."""

    def answered(self, method: str, path: str, status: int, seconds: float) -> None:
        """A request that began ended with `status` after `seconds`."""


class _Series:
    """The requests of one method, route template and status: latency bucket counts (each
    bucket's own, not cumulative), their sum of seconds and when the first was counted."""

    __slots__ = ("buckets", "created", "seconds")

    def __init__(self) -> None:
        self.buckets = [0] * len(REQUEST_BUCKETS)
        self.seconds = 0.0
        self.created = time.time()


class _Tally:
    """One thread's counts; only that thread writes them."""

    __slots__ = ("answered", "in_progress")

    def __init__(self) -> None:
        self.answered: dict[tuple[str, str, int], _Series] = {}
        self.in_progress: dict[tuple[str, str], int] = {}


class RequestTallies:
    """Requests answered and in progress, by method, route template and status.

    Each thread counts in a tally of its own (an event loop's requests all in one), so
    counting takes no lock and no count is lost; a scrape (`collect`, from any thread) adds
    the tallies up into the metrics of Litestar's Prometheus plugin, under the same names,
    labels and help."""

    def __init__(self, app_name: str = PREFIX) -> None:
        self.app_name = app_name
        self._local = threading.local()
        self._tallies: list[_Tally] = []
        self._new_tally = threading.Lock()  # taken once per thread, at its first request

    def _tally(self) -> _Tally:
        try:
            tally: _Tally = self._local.tally
        except AttributeError:
            tally = self._local.tally = _Tally()
            with self._new_tally:
                self._tallies.append(tally)
        return tally

    def started(self, method: str, path: str) -> None:
        in_progress = self._tally().in_progress
        key = (method, path)
        in_progress[key] = in_progress.get(key, 0) + 1

    def answered(self, method: str, path: str, status: int, seconds: float) -> None:
        tally = self._tally()
        tally.in_progress[method, path] -= 1
        key = (method, path, status)
        series = tally.answered.get(key)
        if series is None:
            series = tally.answered[key] = _Series()
        series.buckets[bisect_left(REQUEST_BUCKETS, seconds)] += 1
        series.seconds += seconds

    def collect(self) -> Iterator[Metric]:
        """The metrics, as prometheus_client's collectors give them."""
        with self._new_tally:
            tallies = list(self._tallies)
        # Copies made in one step each (under the GIL a dict or list copy is not interleaved
        # with another thread's update): a count being made now is in or out, never torn.
        answered: dict[tuple[str, str, int], tuple[list[int], float, float]] = {}
        in_progress: dict[tuple[str, str], int] = {}
        for tally in tallies:
            for key, series in tally.answered.copy().items():
                buckets, seconds, created = series.buckets.copy(), series.seconds, series.created
                if key in answered:
                    added, more_seconds, first = answered[key]
                    buckets = [a + b for a, b in zip(added, buckets, strict=True)]
                    seconds, created = seconds + more_seconds, min(created, first)
                answered[key] = (buckets, seconds, created)
            for place, count in tally.in_progress.copy().items():
                in_progress[place] = in_progress.get(place, 0) + count
        requests = CounterMetricFamily(*_REQUESTS, labels=REQUEST_LABELS)
        errors = CounterMetricFamily(*_ERRORS, labels=REQUEST_LABELS)
        latency = HistogramMetricFamily(*_SECONDS, labels=REQUEST_LABELS)
        for (method, path, status), (buckets, seconds, created) in answered.items():
            labels = [method, path, str(status), self.app_name]
            count = sum(buckets)
            requests.add_metric(labels, count, created=created)
            if status >= 500:
                errors.add_metric(labels, count, created=created)
            cumulative = [sum(buckets[: i + 1]) for i in range(len(buckets))]
            latency.add_metric(labels, list(zip(_BUCKET_NAMES, cumulative, strict=True)), seconds)
            latency.samples.append(
                Sample(
                    f"{_SECONDS[0]}_created",
                    dict(zip(REQUEST_LABELS, labels, strict=True)),
                    created,
                )
            )
        # The plugin labelled requests in progress with the status it assumed at their start.
        progress = GaugeMetricFamily(*_IN_PROGRESS, labels=REQUEST_LABELS)
        for (method, path), count in in_progress.items():
            progress.add_metric([method, path, "200", self.app_name], count)
        # As the plugin made its metrics, at their first sample: none is shown empty.
        return (family for family in (requests, latency, progress, errors) if family.samples)


class _ProcessFiles:
    """With several processes, requests are counted in prometheus_client's metrics, which
    write to the shared directory a scrape of any process reads (each update under
    prometheus_client's lock); the labelled children are kept, not looked up each time."""

    def __init__(self, app_name: str = PREFIX) -> None:
        self.app_name = app_name
        self.requests = Counter(*_REQUESTS, REQUEST_LABELS)
        self.errors = Counter(*_ERRORS, REQUEST_LABELS)
        self.seconds = Histogram(*_SECONDS, REQUEST_LABELS)
        self.in_progress = Gauge(*_IN_PROGRESS, REQUEST_LABELS, multiprocess_mode="livesum")
        self._progress: dict[tuple[str, str], Gauge] = {}
        self._answered: dict[tuple[str, str, int], tuple[Counter, Histogram]] = {}

    def started(self, method: str, path: str) -> None:
        gauge = self._progress.get((method, path))
        if gauge is None:
            gauge = self.in_progress.labels(method, path, "200", self.app_name)
            self._progress[method, path] = gauge
        gauge.inc()

    def answered(self, method: str, path: str, status: int, seconds: float) -> None:
        self._progress[method, path].dec()
        children = self._answered.get((method, path, status))
        if children is None:
            labels = (method, path, str(status), self.app_name)
            children = (self.requests.labels(*labels), self.seconds.labels(*labels))
            self._answered[method, path, status] = children
        if status >= 500:
            self.errors.labels(method, path, str(status), self.app_name).inc()
        children[0].inc()
        children[1].observe(seconds)


@functools.cache
def request_recorder() -> RequestRecorder:
    """The process's request counts: tallies its registry reads at a scrape, or, in
    multiprocess mode, prometheus_client's metrics in the shared directory."""
    if MULTIPROCESS_DIR in os.environ:
        return _ProcessFiles()
    tallies = RequestTallies()
    REGISTRY.register(tallies)
    return tallies


def count_requests(app: ASGIApp) -> ASGIApp:
    """Middleware counting requests by route template (never the raw path, which holds plan
    ids), method and status, with their latency: from the start of the request to its last
    body message.

    The middleware after it answers its own refusals (the bearer middleware's 401s and 429s),
    and Litestar's exception handling is around each route's handler, so every error is
    counted as the response it becomes, with no exception handling of its own (which cost a
    served score about 1 % of its CPU)."""
    recorder = request_recorder()

    async def counted(scope: Scope, receive: Receive, send: Send) -> None:
        method = str(scope.get("method") or scope["type"])
        path = scope["path_template"]
        status = 200
        started = time.perf_counter()
        ended = started

        async def send_and_time(message: Message) -> None:
            nonlocal status, ended
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body":
                ended = time.perf_counter()
            await send(message)

        recorder.started(method, path)
        try:
            await app(scope, receive, send_and_time)
        finally:
            recorder.answered(method, path, status, ended - started)

    return counted


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


__all__ = [
    "METRICS_PATH",
    "MetricsController",
    "PrometheusMetrics",
    "RequestTallies",
    "count_requests",
    "prometheus_metrics",
    "scrape_registry",
]

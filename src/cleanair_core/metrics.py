"""Domain metrics as a port: what the core and its sources tell an operator's monitoring.

The core reports events through `Metrics` and never knows who listens: the HTTP service
implements it with prometheus_client, an embedder with whatever it monitors with, and
`NO_METRICS` (the default) drops every event. Nothing passed here names a caller (no token,
user, connection or address): monitoring systems keep labels for long and show them widely.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Protocol


class Upstream(StrEnum):
    """An outside service the sources call over the network."""

    OPEN_METEO = "open_meteo"
    ICHNAEA = "ichnaea"
    OPENAQ = "openaq"


class Metrics(Protocol):
    """One method per event; each must return at once and never raise."""

    def credits_charged(self, endpoint: str, credits: int) -> None:
        """`credits` were debited for a call of `endpoint` (a `Billable` value)."""

    def credits_refunded(self, endpoint: str, credits: int) -> None:
        """`credits` debited for a call of `endpoint` were given back (the call failed)."""

    def plan_finished(self, status: str, seconds: float) -> None:
        """A route plan ended as `status` (`completed` or `failed`) after `seconds` of
        planning by this process."""

    def upstream_request(self, upstream: Upstream, seconds: float, *, failed: bool) -> None:
        """One request to `upstream` took `seconds`; `failed` when it gave no usable answer
        (network error, timeout, an error status, a body that is not the expected one)."""

    def observations_stored(self, upstream: Upstream, count: int) -> None:
        """A live source stored `count` station observations from `upstream` that were new
        or changed (the same value again is not counted)."""

    def observations_held_back(self, upstream: Upstream, reason: str, count: int) -> None:
        """A live source's intake screening held back `count` observations from `upstream`
        for `reason` (`over_bound`: over the pollutant's upper bound; `future`: an hour
        that has not ended), neither stored nor fused."""

    def observations_set_aside(self, pollutant: str, count: int) -> None:
        """Fusion set aside `count` stored observations of `pollutant` of one hour, wildly
        out of line with their neighbours and their own last day (not fused)."""

    def air_hour(self, pollutant: str, *, fused: bool) -> None:
        """The air of one hour was worked out for `pollutant` (once per hour and change of the
        observations): `fused` with station observations, or the unfused background because
        none were within reach (no stations, or a live source's outage)."""

    def alert_events(self, outcome: str, count: int) -> None:
        """An evaluation round stored its decisions: `count` alert events `recorded` (in
        the feed and, for a webhook, the outbox) or `withheld` (the owner's pool could not
        pay)."""

    def alert_deliveries(self, outcome: str, count: int) -> None:
        """A delivery pass made `count` webhook attempts that ended `delivered`, `retried`
        (due again), `failed` (given up), or disabled their subscription (`disabled`)."""

    def alert_delivery_lag(self, seconds: float) -> None:
        """An event was delivered `seconds` after the data it tells of (`dispatch.data_lag`:
        the end of the observed hour, or its recording)."""


class NoMetrics:
    """The default `Metrics`: every event is dropped."""

    def credits_charged(self, endpoint: str, credits: int) -> None:
        pass

    def credits_refunded(self, endpoint: str, credits: int) -> None:
        pass

    def plan_finished(self, status: str, seconds: float) -> None:
        pass

    def upstream_request(self, upstream: Upstream, seconds: float, *, failed: bool) -> None:
        pass

    def observations_stored(self, upstream: Upstream, count: int) -> None:
        pass

    def observations_held_back(self, upstream: Upstream, reason: str, count: int) -> None:
        pass

    def observations_set_aside(self, pollutant: str, count: int) -> None:
        pass

    def air_hour(self, pollutant: str, *, fused: bool) -> None:
        pass

    def alert_events(self, outcome: str, count: int) -> None:
        pass

    def alert_deliveries(self, outcome: str, count: int) -> None:
        pass

    def alert_delivery_lag(self, seconds: float) -> None:
        pass


NO_METRICS: Metrics = NoMetrics()

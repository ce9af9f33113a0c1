"""What the ASGI app reads of the deployment's settings, and their shipped defaults.

The adapter never imports the runtime that serves it: `cleanair_runtime`'s `Settings` (every
environment variable) has these fields among many and is what `cleanair serve` passes to
`create_app`; an embedder or a test passes it too, or `AppSettings` with just these. The
runtime's settings default to `AppSettings()`'s values, so each default is written once.
"""

from __future__ import annotations

import ipaddress
from typing import Protocol

import attrs

ProxyNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


class HttpSettings(Protocol):
    """The settings the app, its controllers and its lifespan read."""

    @property
    def trusted_proxies(self) -> tuple[ProxyNetwork, ...]:
        """Peers whose `X-Forwarded-For` is believed."""
        ...

    @property
    def cors_allow_origins(self) -> tuple[str, ...]:
        """Origins whose browser apps may call the API."""
        ...

    @property
    def air_quality_source(self) -> str:
        """`embedded` or `open-meteo`: named by the explorer."""
        ...

    @property
    def plan_workers(self) -> int:
        """Plans the app works on at once itself; 0 leaves them to plan processes."""
        ...

    @property
    def plan_worker_idle_seconds(self) -> float:
        """How long an idle runner waits before looking for plans submitted elsewhere."""
        ...

    @property
    def metrics_enabled(self) -> bool:
        """Whether requests are counted for Prometheus."""
        ...

    @property
    def metrics_port(self) -> int | None:
        """A port of its own for the metrics, else None: `/metrics` on the API's port."""
        ...


@attrs.frozen
class AppSettings:
    """The app's settings on their own: the shipped defaults unless given."""

    trusted_proxies: tuple[ProxyNetwork, ...] = ()
    cors_allow_origins: tuple[str, ...] = ()
    air_quality_source: str = "embedded"
    plan_workers: int = 2
    plan_worker_idle_seconds: float = 1.0
    metrics_enabled: bool = True
    metrics_port: int | None = None

"""Street networks imported (or deleted) while processes run are picked up without a restart.

Every serving process and `cleanair worker` checks the stored networks' summaries (names,
import times and sizes: one small read, no arrays) every `CLEANAIR_NETWORK_CHECK_SECONDS`.
When they differ from what the process loaded, it loads the networks and builds their
routers and traffic increments in a worker thread, then swaps them in at once: plans and
street-level air use the old networks until the new ones are ready, never a mix. With the
machine's network files (`cleanair_storage.network_files`) the load maps the new version's
file (the first process to need it writes it) and builds nothing; a plan running on the old
network keeps its mapping until it finishes, even once the old file is removed. A failed
check or load is logged and tried again at the next check; what is loaded stays.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

from cleanair_core.air.street_level import StreetLevelAir, TrafficIncrements
from cleanair_core.offload import Offload
from cleanair_core.routes.network import NetworkSummary, StreetNetwork

if TYPE_CHECKING:
    from cleanair_storage.network_files import NetworkSource

log = logging.getLogger("cleanair.networks")

#: What tells one set of stored networks from another: a re-import changes the import time.
Signature = tuple[tuple[str, str, int, int, str], ...]


def signature_of(summaries: Sequence[NetworkSummary]) -> Signature:
    return tuple(
        sorted(
            (
                s.name,
                "" if s.imported_at is None else s.imported_at.isoformat(),
                s.nodes,
                s.edges,
                s.source,
            )
            for s in summaries
        )
    )


def signature_of_networks(networks: Sequence[StreetNetwork]) -> Signature:
    return tuple(
        sorted(
            (
                n.name,
                "" if n.imported_at is None else n.imported_at.isoformat(),
                n.node_count,
                n.edge_count,
                n.source,
            )
            for n in networks
        )
    )


class NetworkReloader:
    """Keeps a process's loaded networks (`loaded`), and the street level's increments
    (`street_level`, when there is one), equal to the stored ones."""

    def __init__(
        self,
        store: NetworkSource,
        loaded: Callable[[Sequence[StreetNetwork]], None],
        increments: Callable[[Sequence[StreetNetwork]], TrafficIncrements],
        street_level: StreetLevelAir | None,
        offload: Offload,
        *,
        started_with: Sequence[StreetNetwork],
        interval: float,
        on_reload: Callable[[Sequence[StreetNetwork]], None] | None = None,
    ) -> None:
        """`loaded` takes the new networks (building their routers: it runs on `offload`);
        `increments` builds their traffic increments (on `offload` too)."""
        self._store = store
        self._loaded = loaded
        self._increments = increments
        self._street_level = street_level
        self._offload = offload
        self._seen = signature_of_networks(started_with)
        self.interval = interval
        self._on_reload = on_reload

    async def check(self) -> bool:
        """Reload when the stored networks changed; whether it did."""
        summaries = await self._offload(self._store.network_summaries)
        if signature_of(summaries) == self._seen:
            return False

        def load() -> tuple[list[StreetNetwork], TrafficIncrements | None]:
            networks = self._store.load_networks()
            increments = None if self._street_level is None else self._increments(networks)
            self._loaded(networks)  # builds the routers, then swaps them in
            return networks, increments

        networks, increments = await self._offload(load)
        if increments is not None and self._street_level is not None:
            self._street_level.replace_increments(increments)
        self._seen = signature_of_networks(networks)
        log.info(
            "street networks reloaded",
            extra={"networks": [n.name for n in networks]},
        )
        if self._on_reload is not None:
            self._on_reload(networks)
        return True

    async def run(self, sleep: Callable[[float], Awaitable[None]]) -> None:
        """Check every `interval` seconds until cancelled; a failure waits for the next."""
        while True:
            await sleep(self.interval)
            try:
                await self.check()
            except Exception as exc:
                log.warning(
                    "street networks not reloaded; trying again at the next check",
                    extra={"error": f"{type(exc).__module__}.{type(exc).__qualname__}"},
                )

"""Readiness: whether this process can serve its calls now (the `/readyz` probe's question).

Ready means the database answers with the schema this release migrates to, and the data the
use cases need in memory is loaded: the place data (names, IP countries, the embedded model)
and at least one street network (without one every route plan fails), unless the deployment
loads none on purpose (`Policy.street_network_required`: it serves scores alone).

A remote upstream's state (its circuit breaker: `closed`, `open`, `half-open`) is reported
but never makes the process unready: an outage of Open-Meteo strikes every process alike, so
taking them out of the load balancer would turn the air-quality endpoints' fast 503s into
connection errors for every endpoint (quota, pairing, plans already computed), and bring
nothing back sooner; the breaker already answers those calls at once.
"""

from __future__ import annotations

import attrs

from cleanair_core.errors import StoreUnavailable
from cleanair_core.use_cases.context import Context

DATABASE_UNAVAILABLE = "the database is unavailable"
SCHEMA_NOT_CURRENT = (
    "the database's schema is not the one this release uses (not migrated, or migrated by a "
    "newer release)"
)
NO_PLACE_DATA = "no place data is loaded"
NO_STREET_NETWORK = "no street network is loaded"


@attrs.frozen
class Readiness:
    """Ready when there is no reason not to be; each reason is a fixed sentence (never data
    from the database or a request), safe to show an unauthenticated caller."""

    reasons: tuple[str, ...] = ()
    #: Each remote upstream's breaker state, by upstream name: information, not a reason.
    upstreams: tuple[tuple[str, str], ...] = ()

    @property
    def ready(self) -> bool:
        return not self.reasons


async def readiness(ctx: Context) -> Readiness:
    reasons: list[str] = []
    try:
        # One read: through `store_calls`, so it never waits on an event loop.
        if not await ctx.store_calls(ctx.store.schema_is_current):
            reasons.append(SCHEMA_NOT_CURRENT)
    except StoreUnavailable:
        reasons.append(DATABASE_UNAVAILABLE)
    sources = ctx.sources
    if sources is None or sources.places is None:
        reasons.append(NO_PLACE_DATA)
    if ctx.policy.street_network_required and (
        sources is None or sources.networks is None or not sources.networks.names
    ):
        reasons.append(NO_STREET_NETWORK)
    upstreams = () if sources is None else sources.upstreams
    return Readiness(tuple(reasons), tuple((str(u.upstream), str(u.state())) for u in upstreams))

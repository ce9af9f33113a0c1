"""`GET /livez` and `GET /readyz`: probes for orchestrators, load balancers and operators.

Outside `/v1` and outside the OpenAPI document, which describes the API apps are built on
(clients are generated from it); the probes are for operators, documented in
docs/deployment.md. No token (a probe has none; the bearer middleware skips these routes),
so no rate limit and no credits; the access log writes them at DEBUG, not INFO
(`access_log.AccessLog`), as a probe every few seconds would drown the lines that matter.
"""

from __future__ import annotations

from typing import Any

import msgspec
from litestar import Request, Response, get

from cleanair_http.auth import core_of

LIVE_PATH = "/livez"
READY_PATH = "/readyz"
#: The paths the access log writes at DEBUG only.
PROBE_PATHS = frozenset({LIVE_PATH, READY_PATH})
#: Prometheus scrapes it as often as the probes come (`cleanair_http.metrics`), so the
#: access log writes it at DEBUG too; named here as the metrics module imports
#: prometheus_client, which must wait until metrics are on.
METRICS_PATH = "/metrics"


class Health(msgspec.Struct, omit_defaults=True):
    status: str
    #: Why the process is not ready (fixed sentences, never data).
    reasons: list[str] = msgspec.field(default_factory=list)
    #: Each remote upstream's circuit breaker (`closed`, `open`, `half-open`); shown, never a
    #: reason not to be ready (`cleanair_core.use_cases.health` says why).
    upstreams: dict[str, str] = msgspec.field(default_factory=dict)


@get(LIVE_PATH, include_in_schema=False, exclude_from_auth=True)
async def live() -> Health:
    """The process answers: its event loop runs. Touches nothing else, so a database outage
    never gets a live process restarted."""
    return Health("ok")


@get(READY_PATH, include_in_schema=False, exclude_from_auth=True)
async def ready(request: Request[Any, Any, Any]) -> Response[Health]:
    """200 when the database answers with the current schema and the place data and a street
    network are loaded; 503 with the reasons otherwise. Either way, each remote upstream's
    breaker state."""
    readiness = await core_of(request).readiness()
    upstreams = dict(readiness.upstreams)
    if readiness.ready:
        return Response(Health("ok", upstreams=upstreams))
    return Response(Health("unavailable", list(readiness.reasons), upstreams), status_code=503)

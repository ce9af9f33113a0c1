"""The Litestar application factory."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio
from litestar import Litestar
from litestar.config.compression import CompressionConfig
from litestar.config.cors import CORSConfig
from litestar.datastructures import State
from litestar.types import ASGIApp, ControllerRouterHandler, Middleware

from cleanair_core.routes.plans import PlanWakeups
from cleanair_core.service import CleanAir
from cleanair_http.access_log import AccessLog
from cleanair_http.app_settings import AppSettings, HttpSettings
from cleanair_http.auth import bearer_auth
from cleanair_http.bodies import JsonBodyRequest
from cleanair_http.controllers.airquality import enrich_route, forecast_day, score_point
from cleanair_http.controllers.alert_events import ROUTE_HANDLERS as ALERT_FEED
from cleanair_http.controllers.alerts import ROUTE_HANDLERS as ALERTS
from cleanair_http.controllers.connections import redeem_pairing_code
from cleanair_http.controllers.explore import ROUTE_HANDLERS as EXPLORER
from cleanair_http.controllers.extension import ROUTE_HANDLERS as EXTENSION
from cleanair_http.controllers.health import METRICS_PATH, PROBE_PATHS, live, ready
from cleanair_http.controllers.history import ROUTE_HANDLERS as HISTORY
from cleanair_http.controllers.home import home_page
from cleanair_http.controllers.quota import read_quota
from cleanair_http.controllers.routes import poll_plan, submit_plan
from cleanair_http.controllers.tiles import ROUTE_HANDLERS as TILES
from cleanair_http.encoded import SKIP_COMPRESSION
from cleanair_http.errors import EXCEPTION_HANDLERS, watch_disconnects
from cleanair_http.openapi import finish_document, openapi_config
from cleanair_http.plan_worker import PlanWorker
from cleanair_http.score_route import LeanScoreApp, score_route
from cleanair_http.upkeep import charge_upkeep, observation_upkeep


def create_app(
    core: CleanAir,
    settings: HttpSettings | None = None,
    extra_route_handlers: Sequence[ControllerRouterHandler] = (),
    *,
    on_shutdown: Sequence[Callable[[], Awaitable[None]]] = (),
    plan_wakeups: PlanWakeups | None = None,
    background: Sequence[Callable[[], Coroutine[Any, Any, None]]] = (),
    wake_planners: Callable[[], None] | None = None,
) -> Litestar:
    """A Litestar app over a wired core; the caller owns the core's lifetime. Pass
    `on_shutdown=[deployment.aclose]` to close the deployment on the app's own event loop
    when it stops (its HTTP clients belong to that loop).

    `extra_route_handlers` lets an embedder (or a test) mount more endpoints that reuse the
    bearer middleware (with `opt=auth.requires(...)` for a rate limit and a scope) and
    error mapping.

    `background` is work run for the app's lifetime, cancelled before `on_shutdown` runs
    (`Deployment.background`: the live observation poller); each must handle its own
    failures, as one that raises stops the app.

    With `settings.plan_workers` above 0 the app works on plans itself, and a plan submitted
    to it wakes its runners; otherwise a submitted plan calls `wake_planners`, if given (the
    plan processes' `WakePipe`).

    `settings` is what the app reads of the deployment's (`HttpSettings`): the runtime's
    `Settings` as `cleanair serve` passes it, or `AppSettings`; none takes the shipped defaults.
    """

    settings = settings or AppSettings()
    worker = (
        PlanWorker(
            core,
            runners=settings.plan_workers,
            idle_seconds=settings.plan_worker_idle_seconds,
            wakeups=plan_wakeups,
        )
        if settings.plan_workers > 0
        else None
    )

    route_handlers: list[ControllerRouterHandler] = []
    middleware: list[Middleware] = []
    metrics = None
    if settings.metrics_enabled:
        # Imported only now: prometheus_client must not be imported before the multiprocess
        # directory is set (`cleanair_http.metrics`).
        from cleanair_http.metrics import MetricsController, count_requests, prometheus_metrics

        metrics = prometheus_metrics()
        middleware.append(count_requests)
        if settings.metrics_port is None:
            route_handlers.append(MetricsController)

    @asynccontextmanager
    async def plan_worker(_: Litestar) -> AsyncIterator[None]:
        if worker is None:
            yield
            return
        async with worker.running():
            yield

    @asynccontextmanager
    async def upkeep(_: Litestar) -> AsyncIterator[None]:
        async with charge_upkeep(core), observation_upkeep(core):
            yield

    @asynccontextmanager
    async def background_work(_: Litestar) -> AsyncIterator[None]:
        if not background:
            yield
            return
        async with anyio.create_task_group() as group:
            for work in background:
                group.start_soon(work)
            try:
                yield
            finally:
                group.cancel_scope.cancel()

    app = LeanScoreApp(
        route_handlers=[
            redeem_pairing_code,
            read_quota,
            score_point,
            forecast_day,
            enrich_route,
            submit_plan,
            poll_plan,
            *EXTENSION,
            *HISTORY,
            *TILES,
            *ALERTS,
            *ALERT_FEED,
            live,
            ready,
            home_page,
            *EXPLORER,
            *route_handlers,
            *extra_route_handlers,
        ],
        middleware=[
            watch_disconnects,
            # Before the bearer middleware, so its 401s and 429s are counted too.
            *middleware,
            bearer_auth(core),
        ],
        exception_handlers=EXCEPTION_HANDLERS,
        # Every malformed JSON body is a 422, including those msgspec does not call malformed.
        request_class=JsonBodyRequest,
        openapi_config=openapi_config(),
        state=State(
            {
                "core": core,
                "settings": settings,
                "plan_worker": worker,
                "wake_planners": wake_planners if worker is None else worker.notify,
                "metrics": metrics,
            }
        ),
        cors_config=cors_config(settings),
        compression_config=COMPRESSION,
        lifespan=[upkeep, plan_worker, background_work],
        on_shutdown=list(on_shutdown),
        logging_config=None,
        debug=False,
    )
    finish_document(app)
    # The hot call's plain requests take a path of their own (`score_route`'s docstring).
    app.score_route = score_route(app, core)
    return app


#: gzip for clients that accept it, answers of at least 1 KiB only (below that the header and
#: the CPU cost more than the bytes saved): long route plans and the OpenAPI document shrink
#: to a fraction. Level 6, not gzip's 9: nearly the same size at a fraction of the CPU, on
#: the event loop. The explorer's street tiles are stored gzipped and skip it.
COMPRESSION = CompressionConfig(
    backend="gzip", minimum_size=1024, gzip_compress_level=6, exclude_opt_key=SKIP_COMPRESSION
)


def cors_config(settings: HttpSettings) -> CORSConfig | None:
    """Cross-origin calls from the configured origins only (none by default). Tokens travel
    in `Authorization`, never in cookies, so credentials stay off; `Retry-After` is exposed
    because a browser app cannot honour a 429 or 503 it cannot read, and `ETag` (with
    `If-None-Match` allowed) so that a map page can revalidate its heatmap tiles."""
    if not settings.cors_allow_origins:
        return None
    return CORSConfig(
        allow_origins=list(settings.cors_allow_origins),
        # DELETE: an app that creates an alert subscription must be able to remove it.
        allow_methods=["GET", "POST", "DELETE"],
        allow_headers=["Authorization", "Content-Type", "If-None-Match"],
        expose_headers=["Retry-After", "ETag"],
        max_age=600,
    )


def with_access_log(app: Litestar) -> ASGIApp:
    """The app as served: wrapped so that every request, routed or not, is logged once (the
    probes and metrics scrapes at DEBUG)."""
    return AccessLog(app, quiet_paths=PROBE_PATHS | {METRICS_PATH})

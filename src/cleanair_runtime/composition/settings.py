"""Settings from environment variables; bad settings fail at start-up with a clear message.

Each setting is defined once, as a field of `Settings`: its variable, parser, bounds, default
and the README's description of it. `SETTINGS` lists them as the configuration table that
`Settings.from_env` reads and the README's table is checked against. A setting that becomes a
`Policy` field takes its default from `Policy()`, so the core's defaults are not restated here.
"""

# ruff: noqa: RUF009  (`_setting` returns an attrs field, the setting's row; not a shared default)

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from enum import Enum
from pathlib import Path
from typing import Any, TypeVar, cast

import attrs

from cleanair_core.access.tokens import Environment
from cleanair_core.alerts.destinations import IPNetwork
from cleanair_core.policy import Policy
from cleanair_core.routes.plans import POLLS_PER_MINUTE
from cleanair_http.app_settings import AppSettings, ProxyNetwork
from cleanair_runtime.composition import setting_parsers as parsers
from cleanair_runtime.composition.setting_parsers import Box
from cleanair_storage.sqlite.database import SYNCHRONOUS, SYNCHRONOUS_MODES, Synchronous

T = TypeVar("T")

#: The parsers by the names the rows below use.
_box = parsers.box
_choice = parsers.choice
_database = parsers.database
_environment = parsers.environment
_flag = parsers.flag
_host = parsers.host
_log_level = parsers.log_level
_networks = parsers.networks
_origins = parsers.origins
_port = parsers.port
_seconds = parsers.seconds
_secret = parsers.secret
_url = parsers.url
_webhook_networks = parsers.webhook_networks
_webhook_ports = parsers.webhook_ports
_whole = parsers.whole

OPEN_METEO_URL = "https://air-quality-api.open-meteo.com"
OPENAQ_URL = "https://api.openaq.org/v3"
#: Why a PostgreSQL deployment needs an explicit key.
KEY_REQUIRED = (
    "CLEANAIR_SECRET_KEY or CLEANAIR_SECRET_KEY_FILE: required when CLEANAIR_DATABASE is a "
    "PostgreSQL URL (every process on every machine must share one key, and it must not live "
    "in the database)"
)
#: The key file's name, beside the database unless CLEANAIR_SECRET_KEY_FILE names another.
KEY_FILE_NAME = "secret.key"


#: Variables earlier versions read, and what replaced them: set, they stop start-up rather
#: than be silently ignored.
RETIRED = {
    "CLEANAIR_PAIRING_FAILURE_BUDGET": "use CLEANAIR_PAIRING_GUESS_BUDGET (distinct codes "
    "tried per 60 s, all clients together; see docs/security.md)",
    "CLEANAIR_PAIRING_FAILURE_WINDOW_SECONDS": "the guess budget's window is the 60 s life of "
    "a pairing code (see docs/security.md)",
}


class SettingsError(Exception):
    """One or more settings are invalid; the message names each of them."""


@attrs.frozen
class Bounds:
    """The range (inclusive) a numeric setting must fall in; `high` None for no upper end."""

    low: float
    high: float | None = None
    #: Named in the message when a value is out of range ("between 0.1 and 120 seconds").
    unit: str = ""

    def check(self, value: float) -> None:
        """Raise ValueError, worded for the start-up message, when `value` is out of range."""
        if self.high is None:
            if value < self.low:
                raise ValueError(
                    "must not be negative" if self.low == 0 else f"must be at least {self.low:g}"
                )
        elif not self.low <= value <= self.high:
            unit = f" {self.unit}" if self.unit else ""
            raise ValueError(f"must be between {self.low:g} and {self.high:g}{unit}")

    def __str__(self) -> str:
        """The range as the README states it."""
        return (
            f"{self.low:g} to {self.high:g}" if self.high is not None else f"at least {self.low:g}"
        )


@attrs.frozen
class Setting:
    """One row of the configuration table: a `Settings` field, the environment variable it is
    read from, how the value is parsed and bounded, and what the README says of it."""

    variable: str
    field: str
    default: object
    parse: Callable[[str], object]
    bounds: Bounds | None
    #: The README's meaning; "{bounds}" in it stands for `bounds` written out.
    help: str
    #: The README's default where the value alone does not say it (the key file depends on
    #: the database's directory).
    shown_default: str | None = None

    def read(self, raw: str) -> object:
        """The value of `raw`; ValueError (worded for the start-up message) when it is bad."""
        value = self.parse(raw)
        if self.bounds is not None:
            if not isinstance(value, int | float):
                raise TypeError(f"{self.variable} is bounded but does not parse to a number")
            self.bounds.check(value)
        return value

    @property
    def meaning(self) -> str:
        """The README's meaning column."""
        return self.help.replace("{bounds}", str(self.bounds))

    @property
    def documented_default(self) -> str:
        """The README's default column."""
        if self.shown_default is not None:
            return self.shown_default
        value = self.default
        if value is None:
            return "unset"
        if value == ():
            return "empty"
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, Enum):
            text = str(value.value)
        elif isinstance(value, Path) and not value.is_absolute():
            text = f"./{value}"
        elif isinstance(value, float) and value.is_integer():
            text = str(int(value))
        else:
            text = str(value)
        return f"`{text}`"


_DEFAULT_DATABASE: Path | str = Path("var/cleanair.db")


def database_label(database: Path | str) -> str:
    """The database as logs and messages may show it: a URL with no password, whether it
    stands in the user part or in the query (`?password=`), and no other query parameter
    (any of them could carry a secret: `sslpassword`, say)."""
    if isinstance(database, Path):
        return str(database)
    # Split by hand: libpq takes several hosts (`h1:5432,h2:5433`), which urlsplit's port
    # parsing refuses.
    scheme, _, rest = database.partition("://")
    location = rest.split("?", 1)[0].split("#", 1)[0]
    authority, slash, path = location.partition("/")
    credentials, at, hosts = authority.rpartition("@")
    user = credentials.split(":", 1)[0]
    place = f"{user}@{hosts}" if at and user else hosts
    return f"{scheme}://{place}{slash}{path}"


_DEFINITION = "cleanair.setting"


@attrs.frozen
class _Definition:
    variable: str
    parse: Callable[[str], object]
    bounds: Bounds | None
    help: str
    shown_default: str | None


def _setting(
    variable: str,
    parse: Callable[[str], T],
    default: T,
    *,
    help: str,
    bounds: Bounds | None = None,
    shown_default: str | None = None,
    secret: bool = False,
) -> T:
    """A `Settings` field read from `variable`: its row of the configuration table."""
    definition = _Definition(variable, parse, bounds, help, shown_default)
    return attrs.field(default=default, repr=not secret, metadata={_DEFINITION: definition})


#: The core's defaults: settings that become `Policy` fields default to these, so each
#: default is written once, in `cleanair_core.policy`.
_CORE = Policy()
#: The app's defaults, written once in `cleanair_http.app_settings` (`create_app` without
#: settings takes them).
_APP = AppSettings()
SECONDS_PER_DAY = 24 * 3600
#: Every timeout a client or the upstream could otherwise stretch without end.
_TIMEOUT = Bounds(0.1, 120, "seconds")


@attrs.frozen
class Settings:
    """The deployment's settings, one field per environment variable (`SETTINGS`)."""

    database: Path | str = _setting(
        "CLEANAIR_DATABASE",
        _database,
        _DEFAULT_DATABASE,
        help="SQLite file shared by the server processes and the CLI (created 0600), or a "
        "`postgresql://` URL shared by processes on many machines "
        "([docs/deployment.md](docs/deployment.md))",
    )
    sqlite_synchronous: Synchronous = _setting(
        "CLEANAIR_SQLITE_SYNCHRONOUS",
        lambda raw: cast(Synchronous, _choice(*SYNCHRONOUS_MODES)(raw)),
        SYNCHRONOUS,
        help="SQLite commits synced to disk before the answer (`full`: an answered write "
        "survives a power cut) or only at checkpoints (`normal`: a killed process, not a power "
        "cut) ([docs/deployment.md](docs/deployment.md#durability))",
    )
    environment: Environment = _setting(
        "CLEANAIR_ENVIRONMENT",
        _environment,
        _CORE.environment,
        help="`tst` or `pdn`; tokens carry it and are refused elsewhere",
    )
    monthly_credits: int = _setting(
        "CLEANAIR_MONTHLY_CREDITS",
        _whole,
        _CORE.credits.monthly,
        bounds=Bounds(0),
        help="monthly credit pool per owner (UTC calendar month)",
    )
    daily_credits: int = _setting(
        "CLEANAIR_DAILY_CREDITS",
        _whole,
        _CORE.credits.daily,
        bounds=Bounds(0),
        help="daily burst cap per owner (UTC day); at most the monthly pool",
    )
    secret_key: bytes | None = _setting(
        "CLEANAIR_SECRET_KEY",
        _secret,
        None,
        secret=True,
        help="server key (≥ 32 characters) for keyed hashes of tokens and codes",
    )
    secret_key_file: Path | None = _setting(
        "CLEANAIR_SECRET_KEY_FILE",
        Path,
        None,
        shown_default=f"`{KEY_FILE_NAME}` beside the database",
        help="read, or created (mode 0600) on first start, when `CLEANAIR_SECRET_KEY` is unset; "
        "with a PostgreSQL database one of the two is required and the file is only read",
    )
    requests_per_minute: int = _setting(
        "CLEANAIR_RATE_LIMIT_PER_MINUTE",
        _whole,
        _CORE.requests_per_minute,
        bounds=Bounds(1),
        help=f"requests per minute per connection (plan polling is fixed at {POLLS_PER_MINUTE})",
    )
    pairing_attempts_per_minute: int = _setting(
        "CLEANAIR_PAIRING_ATTEMPTS_PER_MINUTE",
        _whole,
        _CORE.pairing_attempts_per_minute,
        bounds=Bounds(1),
        help="redemption attempts per minute per client address",
    )
    explore_requests_per_minute: int = _setting(
        "CLEANAIR_EXPLORE_REQUESTS_PER_MINUTE",
        _whole,
        _CORE.explore_requests_per_minute,
        bounds=Bounds(1),
        help="requests per minute per client address for the explorer's street network index "
        "and tiles ([docs/explore.md](docs/explore.md))",
    )
    tiles_per_day: int = _setting(
        "CLEANAIR_TILES_PER_DAY",
        _whole,
        _CORE.tiles_per_day,
        bounds=Bounds(1),
        help="heatmap tiles served per account (user or partner) and UTC day, free of credits; "
        "a 304 revalidation does not count ([docs/api-choices.md](docs/api-choices.md))",
    )
    pairing_guess_budget: int = _setting(
        "CLEANAIR_PAIRING_GUESS_BUDGET",
        _whole,
        _CORE.pairing_guess_budget,
        bounds=Bounds(1),
        help="distinct pairing codes that may be tried within any 60 s, all clients together: "
        "each code faces at most this many guesses in its life (odds 10⁻⁴), and 60 s after an "
        "attack stops redemption works again ([docs/security.md](docs/security.md)); retrying "
        "a code already tried spends nothing",
    )
    trusted_proxies: tuple[ProxyNetwork, ...] = _setting(
        "CLEANAIR_TRUSTED_PROXIES",
        _networks,
        _APP.trusted_proxies,
        help="addresses/networks whose `X-Forwarded-For` is believed",
    )
    cors_allow_origins: tuple[str, ...] = _setting(
        "CLEANAIR_CORS_ALLOW_ORIGINS",
        _origins,
        _APP.cors_allow_origins,
        help="comma-separated origins (`https://app.example`) whose browser apps may call the "
        "API: preflights are answered, `Authorization` and `If-None-Match` are allowed and "
        "`Retry-After` and `ETag` readable; "
        "empty allows none ([docs/deployment.md](docs/deployment.md#browser-apps-cors))",
    )
    log_level: str = _setting(
        "CLEANAIR_LOG_LEVEL",
        _log_level,
        "INFO",
        help="`DEBUG`, `INFO`, `WARNING` or `ERROR`; logs are JSON lines on stderr (or "
        "`CLEANAIR_LOG_FILE`)",
    )
    access_log: str = _setting(
        "CLEANAIR_ACCESS_LOG",
        _choice("info", "debug", "off"),
        "info",
        help="the access log, one line per request, whatever `CLEANAIR_LOG_LEVEL` says: "
        "`info` (callers' requests), `debug` (the health probes too) or `off`",
    )
    log_file: Path | None = _setting(
        "CLEANAIR_LOG_FILE",
        Path,
        None,
        shown_default="unset (stderr)",
        help="append the JSON log lines to this file instead of stderr, created mode 0600 (an "
        "existing regular file that others may read loses that access), by every process of "
        "`serve` and `worker` ([docs/deployment.md](docs/deployment.md#logs))",
    )
    air_quality_source: str = _setting(
        "CLEANAIR_AIR_QUALITY_SOURCE",
        _choice("embedded", "open-meteo"),
        _APP.air_quality_source,
        help="`embedded` (offline model) or `open-meteo`",
    )
    open_meteo_url: str = _setting(
        "CLEANAIR_OPEN_METEO_URL",
        _url,
        OPEN_METEO_URL,
        help="base URL, for a self-hosted Open-Meteo",
    )
    open_meteo_timeout: float = _setting(
        "CLEANAIR_OPEN_METEO_TIMEOUT",
        _seconds,
        5.0,
        bounds=_TIMEOUT,
        help="seconds ({bounds}) one upstream call may take, its retries included (timeouts, "
        "network errors, 429 and 5xx are retried twice, 0.5 s then 1 s apart, while time is "
        "left): an upstream that never answers costs a request this long, then 503",
    )
    open_meteo_breaker_seconds: float = _setting(
        "CLEANAIR_OPEN_METEO_BREAKER_SECONDS",
        _seconds,
        30.0,
        bounds=Bounds(1, 3600, "seconds"),
        help="after 3 failed upstream calls in a row, Open-Meteo calls answer 503 at once "
        "(with `Retry-After`) for this long ({bounds}); then one call tries the upstream again",
    )
    wifi_geolocator: str = _setting(
        "CLEANAIR_WIFI_GEOLOCATOR",
        _choice("local", "ichnaea"),
        "local",
        help="`local` (access points from `cleanair wifi import`) or `ichnaea`",
    )
    ichnaea_url: str | None = _setting(
        "CLEANAIR_ICHNAEA_URL",
        _url,
        None,
        help="geolocate URL of an Ichnaea-compatible service (BeaconDB, Google, self-hosted); "
        "required for `ichnaea`",
    )
    ichnaea_key: str | None = _setting(
        "CLEANAIR_ICHNAEA_KEY",
        str,
        None,
        secret=True,
        help="its API key, if it needs one",
    )
    openaq_api_key: str | None = _setting(
        "CLEANAIR_OPENAQ_API_KEY",
        str,
        None,
        secret=True,
        help="an OpenAQ v3 API key: the serving process then polls OpenAQ for the latest hourly "
        "station values and stores them; unset, nothing is polled "
        "([docs/deployment.md](docs/deployment.md#openaq-station-observations))",
    )
    openaq_url: str = _setting(
        "CLEANAIR_OPENAQ_URL",
        _url,
        OPENAQ_URL,
        help="OpenAQ's v3 base URL",
    )
    openaq_poll_seconds: float = _setting(
        "CLEANAIR_OPENAQ_POLL_SECONDS",
        _seconds,
        900.0,
        bounds=Bounds(60, SECONDS_PER_DAY, "seconds"),
        help="seconds ({bounds}) between polls of the latest values; the station list is "
        "read again daily, and a failed poll backs off (1 min doubling to 1 h, and at least "
        "until OpenAQ's rate limit resets)",
    )
    openaq_box: Box | None = _setting(
        "CLEANAIR_OPENAQ_BOX",
        _box,
        None,
        shown_default="each loaded street network's bounds, 10 km wider",
        help="`south,west,north,east` (degrees): the area whose stations are polled",
    )
    plan_workers: int = _setting(
        "CLEANAIR_PLAN_WORKERS",
        _whole,
        _APP.plan_workers,
        bounds=Bounds(0),
        help="route plans worked on at once beside each API process of `cleanair serve`, in "
        "a plan process it starts (in the API process itself on an in-memory database); 0 "
        "plans nothing",
    )
    plan_worker_idle_seconds: float = _setting(
        "CLEANAIR_PLAN_WORKER_IDLE_SECONDS",
        _seconds,
        _APP.plan_worker_idle_seconds,
        # Each look is a write transaction, so not much more often than this; and a plan
        # submitted to a process without runners waits up to this long, so not much longer.
        bounds=Bounds(0.1, 120, "seconds"),
        help="seconds ({bounds}) an idle runner waits before looking again for plans submitted "
        "to other processes (a plan submitted to this one wakes it at once)",
    )
    plan_lease_seconds: int = _setting(
        "CLEANAIR_PLAN_LEASE_SECONDS",
        _whole,
        _CORE.plan_lease_seconds,
        bounds=Bounds(1),
        help="how long a plan whose worker died waits before another takes it",
    )
    alert_lease_seconds: int = _setting(
        "CLEANAIR_ALERT_LEASE_SECONDS",
        _whole,
        _CORE.alert_lease_seconds,
        bounds=Bounds(1),
        help="how long the alert evaluations and webhook deliveries of a worker that died "
        "wait before another worker takes them",
    )
    alert_worker_idle_seconds: float = _setting(
        "CLEANAIR_ALERT_WORKER_IDLE_SECONDS",
        _seconds,
        2.0,
        # Each look is a write transaction; and a webhook waits up to this long after its
        # event was decided, within the 60 s aim for the whole lag.
        bounds=Bounds(0.1, 60, "seconds"),
        help="seconds ({bounds}) a plan process or `cleanair worker` with no alert work "
        "waits before looking again for subscriptions due and webhooks owed",
    )
    max_plan_attempts: int = _setting(
        "CLEANAIR_MAX_PLAN_ATTEMPTS",
        _whole,
        _CORE.max_plan_attempts,
        # At least one try; past ten, a plan that kills its worker only does more harm.
        bounds=Bounds(1, 10),
        help="a plan whose workers died on it this many times fails, refunded, instead of "
        "being tried again ({bounds})",
    )
    plan_retention_days: int = _setting(
        "CLEANAIR_PLAN_RETENTION_DAYS",
        _whole,
        _CORE.plan_retention_seconds // SECONDS_PER_DAY,
        bounds=Bounds(1),
        help="finished plans are pruned this long after they finish",
    )
    alert_retention_days: int = _setting(
        "CLEANAIR_ALERT_RETENTION_DAYS",
        _whole,
        _CORE.alert_retention_seconds // SECONDS_PER_DAY,
        # A century at most: the cutoff is a date the calendar can hold.
        bounds=Bounds(1, 36_500, "days"),
        help="alert feed entries and webhook deliveries no longer owed are pruned this long "
        "({bounds}) after their event, by the plan processes and `cleanair worker`",
    )
    observation_retention_days: int = _setting(
        "CLEANAIR_OBSERVATION_RETENTION_DAYS",
        _whole,
        _CORE.observation_retention_seconds // SECONDS_PER_DAY,
        # A century at most: the cutoff is a date the calendar can hold.
        bounds=Bounds(0, 36_500, "days"),
        help="station observations are pruned this long ({bounds}) after their hour ends, by "
        "every API process once an hour and by `cleanair stations prune`; 0 keeps them for ever",
    )
    network_check_seconds: float = _setting(
        "CLEANAIR_NETWORK_CHECK_SECONDS",
        _seconds,
        5.0,
        bounds=Bounds(1, 3600, "seconds"),
        help="seconds ({bounds}) between each process's look at the stored street networks: "
        "one imported or deleted with the CLI is loaded (in a thread) without a restart",
    )
    network_files: Path | None = _setting(
        "CLEANAIR_NETWORK_FILES",
        Path,  # `off` is Path("off"): no files, each process its own copy
        None,
        shown_default="`<database>.networks` beside a SQLite file; "
        "`$XDG_CACHE_HOME/cleanair/networks` (`~/.cache/…`) with PostgreSQL",
        help="local directory of the street-network files every process of the machine maps "
        "(one copy in memory; written from the database when missing or stale); `off`: each "
        "process loads its own copy from the database",
    )
    default_network: bool = _setting(
        "CLEANAIR_DEFAULT_NETWORK",
        _flag,
        True,
        help="import the shipped central-Helsinki network on first start when none is stored; "
        "`false`: a process is ready with no network (a deployment that serves scores alone)",
    )
    charge_hold_seconds: int = _setting(
        "CLEANAIR_CHARGE_HOLD_SECONDS",
        _whole,
        _CORE.charge_hold_seconds,
        bounds=Bounds(1),
        help="a charge is final when its answer is sent; one whose server died first is "
        "refunded this long after its last renewal",
    )
    #: Open connections each API process answers at most; beyond it a request is answered
    #: 503 at once. 0: half the open-files limit (`open_files.max_connections`).
    max_connections: int = _setting(
        "CLEANAIR_MAX_CONNECTIONS",
        _whole,
        0,
        bounds=Bounds(0, 100_000),
        help="open connections ({bounds}) each API process serves, 0 for half its open-files "
        "limit; a request on one beyond them is answered 503 at once, leaving file "
        "descriptors for the database and files "
        "([docs/deployment.md](docs/deployment.md#open-files-and-connections))",
    )
    #: Seconds a client has to send a request's headers, and then its body, before the
    #: connection is closed (slow clients would otherwise hold connections open forever).
    header_timeout: float = _setting(
        "CLEANAIR_HEADER_TIMEOUT",
        _seconds,
        10.0,
        bounds=_TIMEOUT,
        help="seconds ({bounds}) a client has to send a request's headers, from connecting or "
        "from the first byte of a following request; then the connection is closed",
    )
    body_timeout: float = _setting(
        "CLEANAIR_BODY_TIMEOUT",
        _seconds,
        30.0,
        bounds=_TIMEOUT,
        help="seconds ({bounds}) to send the body once the headers are in "
        "([docs/deployment.md](docs/deployment.md))",
    )
    send_timeout: float = _setting(
        "CLEANAIR_SEND_TIMEOUT",
        _seconds,
        30.0,
        bounds=_TIMEOUT,
        help="seconds ({bounds}) a response may wait for a client that stopped reading it (a "
        "full send buffer, or a closing connection with data left); then the connection is "
        "aborted",
    )

    metrics: str = _setting(
        "CLEANAIR_METRICS",
        _choice("off", "on"),
        "on" if _APP.metrics_enabled else "off",
        help="`on` serves Prometheus metrics at `/metrics`, with no token, on the API's port "
        "unless `CLEANAIR_METRICS_PORT` is set; `off` collects none "
        "([docs/deployment.md](docs/deployment.md))",
    )
    metrics_port: int | None = _setting(
        "CLEANAIR_METRICS_PORT",
        _port,
        _APP.metrics_port,
        help="serve the metrics on this port of `CLEANAIR_METRICS_HOST` instead, "
        "for all the processes of `cleanair serve --workers N` together; the only way "
        "`cleanair worker` serves its plan metrics",
    )
    metrics_host: str = _setting(
        "CLEANAIR_METRICS_HOST",
        _host,
        "127.0.0.1",
        help="the address `CLEANAIR_METRICS_PORT` listens on",
    )

    webhook_allow_http: bool = _setting(
        "CLEANAIR_WEBHOOK_ALLOW_HTTP",
        _flag,
        _CORE.webhook_destinations.allow_http,
        help="`true` lets alert webhook URLs use plain `http` (a receiver inside the "
        "operator's network, a test); `false`: `https` only "
        "([docs/alerts.md](docs/alerts.md#outbound-webhook-requests))",
    )
    webhook_allowed_networks: tuple[IPNetwork, ...] = _setting(
        "CLEANAIR_WEBHOOK_ALLOWED_NETWORKS",
        _webhook_networks,
        _CORE.webhook_destinations.allowed_networks,
        help="comma-separated CIDRs (`10.0.0.0/8`) alert webhooks may reach although not "
        "public; empty: every address a webhook host resolves to must be public",
    )
    webhook_ports: frozenset[int] | None = _setting(
        "CLEANAIR_WEBHOOK_PORTS",
        _webhook_ports,
        _CORE.webhook_destinations.allowed_ports,
        shown_default="`443,8443,80,8080`",
        help="comma-separated ports alert webhook URLs may name, or `any`",
    )

    @property
    def metrics_enabled(self) -> bool:
        """Whether Prometheus metrics are collected (and served somewhere)."""
        return self.metrics == "on"

    @property
    def uses_postgres(self) -> bool:
        """Whether the database is a PostgreSQL URL (else a SQLite file)."""
        return isinstance(self.database, str)

    @property
    def key_file(self) -> Path:
        if self.secret_key_file is not None:
            return self.secret_key_file
        if isinstance(self.database, str):
            raise SettingsError(KEY_REQUIRED)
        return self.database.parent / KEY_FILE_NAME

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """Read `CLEANAIR_*` variables; raise SettingsError listing every bad one."""
        env = os.environ if env is None else env
        problems: list[str] = []
        values: dict[str, Any] = {}
        for setting in SETTINGS:
            raw = env.get(setting.variable)
            if raw is None or raw == "":
                continue
            try:
                values[setting.field] = setting.read(raw)
            except ValueError as exc:
                problems.append(f"{setting.variable}: {exc}")
        settings = cls(**values)
        for name, use in RETIRED.items():
            if env.get(name):
                problems.append(f"{name}: no longer read; {use}")
        if settings.wifi_geolocator == "ichnaea" and settings.ichnaea_url is None:
            problems.append("CLEANAIR_ICHNAEA_URL: required when CLEANAIR_WIFI_GEOLOCATOR=ichnaea")
        if settings.daily_credits > settings.monthly_credits:
            problems.append(
                "CLEANAIR_DAILY_CREDITS: the daily burst cap cannot exceed the monthly pool"
            )
        if settings.metrics_port is not None and not settings.metrics_enabled:
            problems.append(
                "CLEANAIR_METRICS_PORT: set, but CLEANAIR_METRICS is off (set it to on)"
            )
        if settings.uses_postgres and not (settings.secret_key or settings.secret_key_file):
            problems.append(KEY_REQUIRED)
        if problems:
            raise SettingsError("invalid settings:\n  " + "\n  ".join(problems))
        return settings


#: The configuration table, in the README's order: every variable `Settings.from_env` reads.
SETTINGS: tuple[Setting, ...] = tuple(
    Setting(
        field=field.name,
        default=field.default,
        **attrs.asdict(field.metadata[_DEFINITION], recurse=False),
    )
    for field in attrs.fields(Settings)
)

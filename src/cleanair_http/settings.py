"""Settings from environment variables; bad settings fail at start-up with a clear message."""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TypeVar

import attrs

from cleanair_core.access.tokens import Environment

T = TypeVar("T")

ProxyNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
OPEN_METEO_URL = "https://air-quality-api.open-meteo.com"


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
class Settings:
    database: Path = Path("var/cleanair.db")
    environment: Environment = Environment.TEST
    monthly_credits: int = 1000
    daily_credits: int = 100
    #: The server key for keyed hashes; when unset it is read from (or created in) the key file.
    secret_key: bytes | None = attrs.field(default=None, repr=False)
    secret_key_file: Path | None = None
    requests_per_minute: int = 600
    pairing_attempts_per_minute: int = 10
    #: Distinct pairing codes tried within any 60 s (a code's life), all clients together.
    pairing_guess_budget: int = 100
    trusted_proxies: tuple[ProxyNetwork, ...] = ()
    log_level: str = "INFO"
    #: "embedded" (the offline model) or "open-meteo".
    air_quality_source: str = "embedded"
    open_meteo_url: str = OPEN_METEO_URL
    open_meteo_timeout: float = 10.0
    #: "local" (access points imported with `cleanair wifi import`) or "ichnaea".
    wifi_geolocator: str = "local"
    ichnaea_url: str | None = None
    ichnaea_key: str | None = attrs.field(default=None, repr=False)
    #: Route plans worked on at once by this process (0: this process plans nothing).
    plan_workers: int = 2
    plan_lease_seconds: int = 60
    plan_retention_days: int = 7
    #: Load the shipped central-Helsinki street network on start when none is stored.
    default_network: bool = True
    #: Seconds a charge stays unconfirmed after its process stopped renewing it, before the
    #: sweep refunds it (the call never delivered).
    charge_hold_seconds: int = 60
    #: Seconds a client has to send a request's headers, and then its body, before the
    #: connection is closed (slow clients would otherwise hold connections open forever).
    header_timeout: float = 10.0
    body_timeout: float = 30.0
    #: Seconds a response may wait for a client that has stopped reading it.
    send_timeout: float = 30.0

    @property
    def key_file(self) -> Path:
        return self.secret_key_file or self.database.parent / "secret.key"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """Read `CLEANAIR_*` variables; raise SettingsError listing every bad one."""
        env = os.environ if env is None else env
        problems: list[str] = []

        def read(name: str, parse: Callable[[str], T], default: T) -> T:
            raw = env.get(name)
            if raw is None or raw == "":
                return default
            try:
                return parse(raw)
            except ValueError as exc:
                problems.append(f"{name}: {exc}")
                return default

        settings = cls(
            database=read("CLEANAIR_DATABASE", Path, Path("var/cleanair.db")),
            environment=read("CLEANAIR_ENVIRONMENT", _environment, Environment.TEST),
            monthly_credits=read("CLEANAIR_MONTHLY_CREDITS", _non_negative, 1000),
            daily_credits=read("CLEANAIR_DAILY_CREDITS", _non_negative, 100),
            secret_key=read("CLEANAIR_SECRET_KEY", _secret, None),
            secret_key_file=read("CLEANAIR_SECRET_KEY_FILE", Path, None),
            requests_per_minute=read("CLEANAIR_RATE_LIMIT_PER_MINUTE", _positive, 600),
            pairing_attempts_per_minute=read("CLEANAIR_PAIRING_ATTEMPTS_PER_MINUTE", _positive, 10),
            pairing_guess_budget=read("CLEANAIR_PAIRING_GUESS_BUDGET", _positive, 100),
            trusted_proxies=read("CLEANAIR_TRUSTED_PROXIES", _networks, ()),
            log_level=read("CLEANAIR_LOG_LEVEL", _log_level, "INFO"),
            air_quality_source=read(
                "CLEANAIR_AIR_QUALITY_SOURCE", _choice("embedded", "open-meteo"), "embedded"
            ),
            open_meteo_url=read("CLEANAIR_OPEN_METEO_URL", _url, OPEN_METEO_URL),
            open_meteo_timeout=read("CLEANAIR_OPEN_METEO_TIMEOUT", _seconds, 10.0),
            wifi_geolocator=read("CLEANAIR_WIFI_GEOLOCATOR", _choice("local", "ichnaea"), "local"),
            ichnaea_url=read("CLEANAIR_ICHNAEA_URL", _url, None),
            ichnaea_key=read("CLEANAIR_ICHNAEA_KEY", str, None),
            plan_workers=read("CLEANAIR_PLAN_WORKERS", _non_negative, 2),
            plan_lease_seconds=read("CLEANAIR_PLAN_LEASE_SECONDS", _positive, 60),
            plan_retention_days=read("CLEANAIR_PLAN_RETENTION_DAYS", _positive, 7),
            default_network=read("CLEANAIR_DEFAULT_NETWORK", _flag, True),
            charge_hold_seconds=read("CLEANAIR_CHARGE_HOLD_SECONDS", _positive, 60),
            header_timeout=read("CLEANAIR_HEADER_TIMEOUT", _seconds, 10.0),
            body_timeout=read("CLEANAIR_BODY_TIMEOUT", _seconds, 30.0),
            send_timeout=read("CLEANAIR_SEND_TIMEOUT", _seconds, 30.0),
        )
        for name, use in RETIRED.items():
            if env.get(name):
                problems.append(f"{name}: no longer read; {use}")
        if settings.wifi_geolocator == "ichnaea" and settings.ichnaea_url is None:
            problems.append("CLEANAIR_ICHNAEA_URL: required when CLEANAIR_WIFI_GEOLOCATOR=ichnaea")
        if settings.daily_credits > settings.monthly_credits:
            problems.append(
                "CLEANAIR_DAILY_CREDITS: the daily burst cap cannot exceed the monthly pool"
            )
        if problems:
            raise SettingsError("invalid settings:\n  " + "\n  ".join(problems))
        return settings


def _environment(raw: str) -> Environment:
    try:
        return Environment(raw)
    except ValueError:
        raise ValueError("must be tst or pdn") from None


def _int(raw: str) -> int:
    try:
        return int(raw)
    except ValueError:
        raise ValueError("must be a whole number") from None


def _non_negative(raw: str) -> int:
    value = _int(raw)
    if value < 0:
        raise ValueError("must not be negative")
    return value


def _positive(raw: str) -> int:
    value = _int(raw)
    if value < 1:
        raise ValueError("must be at least 1")
    return value


def _secret(raw: str) -> bytes:
    # Never echo the value: it is the server's key.
    if len(raw) < 32:
        raise ValueError("must be at least 32 characters")
    return raw.encode()


def _networks(raw: str) -> tuple[ProxyNetwork, ...]:
    networks = []
    for part in raw.replace(",", " ").split():
        try:
            networks.append(ipaddress.ip_network(part, strict=False))
        except ValueError:
            raise ValueError(f"{part!r} is not an IP address or network") from None
    return tuple(networks)


def _choice(*allowed: str) -> Callable[[str], str]:
    def parse(raw: str) -> str:
        value = raw.strip().lower()
        if value not in allowed:
            raise ValueError("must be one of " + ", ".join(allowed))
        return value

    return parse


def _url(raw: str) -> str:
    url = raw.strip().rstrip("/")
    if not url.startswith(("http://", "https://")) or len(url) < len("http://x"):
        raise ValueError("must be an http:// or https:// URL")
    return url


def _seconds(raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise ValueError("must be a number of seconds") from None
    if not 0.1 <= value <= 120:
        raise ValueError("must be between 0.1 and 120 seconds")
    return value


def _flag(raw: str) -> bool:
    value = raw.strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off"}:
        return False
    raise ValueError("must be true or false")


def _log_level(raw: str) -> str:
    level = raw.upper()
    if level not in {"DEBUG", "INFO", "WARNING", "ERROR"}:
        raise ValueError("must be DEBUG, INFO, WARNING or ERROR")
    return level

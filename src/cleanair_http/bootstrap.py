"""The composition root: settings in, a wired `CleanAir` out. Nothing is built at import time."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from cleanair_core.clock import Clock
from cleanair_core.credits import CreditLimits
from cleanair_core.service import CleanAir, Policy
from cleanair_core.tokens import TokenKeys, generate_key
from cleanair_http.settings import Settings, SettingsError
from cleanair_storage.sqlite import SqliteStore


def load_or_create_key(path: Path) -> bytes:
    """Read the server key file, creating it (mode 0600) on first use.

    The key hashes tokens and pairing codes; it must never sit in the database, so that a
    copy of the database alone cannot be used to check guesses.
    """
    try:
        text = path.read_text().strip()
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        key = generate_key()
        with contextlib.suppress(FileExistsError):  # another process won the race: use theirs
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as handle:
                handle.write(key.hex() + "\n")
                handle.flush()
                os.fsync(handle.fileno())
            return key
        text = path.read_text().strip()
    try:
        key = bytes.fromhex(text)
    except ValueError:
        raise SettingsError(f"the key file {path} does not hold a hex key") from None
    if len(key) < 32:
        raise SettingsError(f"the key file {path} holds a key shorter than 32 bytes")
    return key


def policy_from(settings: Settings) -> Policy:
    return Policy(
        environment=settings.environment,
        credits=CreditLimits(monthly=settings.monthly_credits, daily=settings.daily_credits),
        requests_per_minute=settings.requests_per_minute,
        pairing_attempts_per_minute=settings.pairing_attempts_per_minute,
        pairing_failure_budget=settings.pairing_failure_budget,
        pairing_failure_window=settings.pairing_failure_window,
    )


def build_core(settings: Settings, clock: Clock | None = None) -> CleanAir:
    """Open the SQLite store and wire the core's use cases."""
    key = settings.secret_key or load_or_create_key(settings.key_file)
    store = SqliteStore(settings.database)
    return CleanAir(store, TokenKeys(key), policy_from(settings), clock)

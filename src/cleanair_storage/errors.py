"""Errors of opening a store that are not the core's port errors: nothing can be retried or
answered with a status; the process must not run on this database at all."""

from __future__ import annotations

#: What an operator does about a `SchemaTooNew`, in every adapter's message.
UPGRADE_ADVICE = (
    "a newer release migrated it; run that release or newer (docs/deployment.md, Upgrades)"
)


class SchemaTooNew(RuntimeError):
    """The database was migrated by a newer release of cleanair than this one: its code may
    rely on a schema this one does not know, so this one refuses to run on it, changing
    nothing."""

"""How the CLI shows values in its tables."""

from __future__ import annotations


def when(value: object) -> str:
    """An instant to the second, or `-` for none."""
    return "-" if value is None else value.isoformat(timespec="seconds")  # type: ignore[attr-defined]

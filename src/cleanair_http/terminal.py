"""Text for an operator's terminal: what came from data or input is shown, never obeyed."""

from __future__ import annotations

import sys

#: Escapes an operator reads at a glance; any other character is shown by its code point.
_NAMED_ESCAPES = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def escape_nonprintable(value: object) -> str:
    """`value` as text safe for a terminal: every character that `str.isprintable()` rejects
    is shown as a Python-style escape (ESC as `\\x1b`, CR as `\\r`, U+202E as `\\u202e`).

    Everything the CLI prints that came from data or from its arguments goes through this, so
    a connection name (any text an API client chose) cannot move the cursor, clear the screen
    or reorder the line. Printable text, non-ASCII letters included, is returned unchanged;
    a backslash is not escaped, so the function is idempotent and safe to apply twice.
    """
    text = str(value)
    if text.isprintable():
        return text
    return "".join(char if char.isprintable() else _escape(char) for char in text)


def _escape(char: str) -> str:
    named = _NAMED_ESCAPES.get(char)
    if named is not None:
        return named
    code = ord(char)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def cannot_listen(host: str, port: int | None, reason: str | OSError) -> int:
    """Say on stderr, in one line, why a command cannot listen on `host:port`; its exit
    status (1: the operation was refused)."""
    if isinstance(reason, OSError):  # in use, or not an address of this machine
        reason = reason.strerror or str(reason)
    print(
        f"cleanair: cannot listen on {escape_nonprintable(host)}:{port}: "
        f"{escape_nonprintable(reason)}",
        file=sys.stderr,
        flush=True,
    )
    return 1

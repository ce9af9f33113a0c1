"""The source tree keeps the shape docs/architecture.md draws: no module over the line ceiling,
and the HTTP adapter apart from the runtime that serves it."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).parent.parent / "src"
#: A module past this many lines holds more than one thing a reader looks for: split it.
MAX_LINES = 800


def test_no_source_file_is_over_the_line_ceiling() -> None:
    over = {
        str(path.relative_to(SRC)): lines
        for path in sorted(SRC.rglob("*.py"))
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }

    assert over == {}


def test_the_adapter_never_imports_the_runtime() -> None:
    """What import-linter's layers contract says too, here where a test run sees it, inline
    imports included."""
    found = []
    for path in sorted((SRC / "cleanair_http").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = (
                [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else []
            )
            found += [
                f"{path.relative_to(SRC)}: {name}"
                for name in names
                if name.split(".")[0] == "cleanair_runtime"
            ]

    assert found == []

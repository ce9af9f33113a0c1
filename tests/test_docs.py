"""The documentation's examples run."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOCS = Path(__file__).parent.parent / "docs"


def python_blocks(path: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", path.read_text(), flags=re.DOTALL)


def test_the_embedding_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    (example,) = python_blocks(DOCS / "embedding.md")
    exec(compile(example, "docs/embedding.md", "exec"), {})
    assert "retry after" in capsys.readouterr().out

"""The documentation's examples run."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOCS = Path(__file__).parent.parent / "docs"


def python_blocks(path: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", path.read_text(), flags=re.DOTALL)


def test_the_embedding_examples_run(capsys: pytest.CaptureFixture[str]) -> None:
    credits, air_quality = python_blocks(DOCS / "embedding.md")
    exec(compile(credits, "docs/embedding.md", "exec"), {})
    assert "retry after" in capsys.readouterr().out
    exec(compile(air_quality, "docs/embedding.md", "exec"), {})
    printed = capsys.readouterr().out
    assert "score " in printed
    assert "Helsinki, Finland" in printed
    assert "route " in printed
    assert "dose " in printed

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


def test_the_readme_documents_every_setting_and_no_retired_one() -> None:
    from cleanair_http.settings import RETIRED

    settings_source = (DOCS.parent / "src" / "cleanair_http" / "settings.py").read_text()
    read = set(re.findall(r'read\(\s*"(CLEANAIR_[A-Z_]+)"', settings_source))
    readme = (DOCS.parent / "README.md").read_text()
    documented = set(re.findall(r"^\| `(CLEANAIR_[A-Z_]+)` \|", readme, flags=re.MULTILINE))
    assert len(read) > 20
    assert documented == read
    assert not documented & set(RETIRED)

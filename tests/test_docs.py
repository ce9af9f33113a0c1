"""The documentation's examples run."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOCS = Path(__file__).parent.parent / "docs"


def python_blocks(path: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", path.read_text(), flags=re.DOTALL)


def test_the_embedding_examples_run(capsys: pytest.CaptureFixture[str]) -> None:
    credits, air_quality, route_plans = python_blocks(DOCS / "embedding.md")
    exec(compile(credits, "docs/embedding.md", "exec"), {})
    assert "retry after" in capsys.readouterr().out
    exec(compile(air_quality, "docs/embedding.md", "exec"), {})
    printed = capsys.readouterr().out
    assert "score " in printed
    assert "Helsinki, Finland" in printed
    assert "route " in printed
    assert "dose " in printed
    # Route plans end to end: a network loaded, a plan submitted, worked, and polled.
    exec(compile(route_plans, "docs/embedding.md", "exec"), {})
    printed = capsys.readouterr().out
    assert "plan completed with " in printed
    assert "best " in printed
    assert "used 25 credits" in printed


def test_the_readme_configuration_table_is_the_settings_table() -> None:
    """Every variable `Settings.from_env` reads, with its default and meaning, in order: a
    setting changed in the code and not in the README (or the other way round) fails here."""
    from cleanair_runtime.composition.settings import RETIRED, SETTINGS

    readme = (DOCS.parent / "README.md").read_text()
    documented = re.findall(
        r"^\| `(CLEANAIR_[A-Z_]+)` \| (.*?) \| (.*) \|$", readme, flags=re.MULTILINE
    )
    assert len(documented) > 20
    assert documented == [(s.variable, s.documented_default, s.meaning) for s in SETTINGS]
    assert not {variable for variable, _, _ in documented} & set(RETIRED)


def test_the_readme_lists_every_doc_and_links_only_what_exists() -> None:
    """Every page under docs/ is listed, and every relative link resolves inside the
    repository (no link to material kept beside it, which a clone does not have)."""
    root = DOCS.parent
    readme = (root / "README.md").read_text()
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", readme)
    relative = [link for link in links if not re.match(r"[a-z]+://", link)]
    assert relative
    for link in relative:
        target = (root / link).resolve()
        assert target.is_relative_to(root.resolve()), link
        assert target.exists(), link
    listed = {link for link in relative if link.startswith("docs/")}
    assert {f"docs/{page.name}" for page in DOCS.glob("*.md")} <= listed
    assert "../" not in readme


def shell_lines(path: Path) -> list[str]:
    blocks = re.findall(r"```(?:sh|bash|console)\n(.*?)```", path.read_text(), flags=re.DOTALL)
    return [line.strip() for block in blocks for line in block.splitlines()]


@pytest.mark.parametrize(
    "page", [DOCS.parent / "README.md", *sorted(DOCS.glob("*.md"))], ids=lambda p: p.name
)
def test_shell_examples_run_the_cli_as_typed_from_the_project_folder(page: Path) -> None:
    """After `make install` the CLI is .venv/bin/cleanair, not on PATH: a shell example that
    types a bare `cleanair` fails as typed."""
    bare = [line for line in shell_lines(page) if re.match(r"(\$ )?cleanair\b", line)]
    assert bare == []

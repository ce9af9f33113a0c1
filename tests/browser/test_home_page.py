"""The landing page at `/` in a real browser with no internet: it says what the service is,
its links lead to the explorer, the API docs, health and the walkthrough on the page, and it
loads nothing from any other host.

`make test-browser` runs these (`make test` leaves them out: they need Chromium).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from playwright.sync_api import Browser, expect

from support.browser_pages import Visit, guarded_page
from support.servers import Server, running_server, server_env

pytestmark = pytest.mark.browser

#: Where `make install` puts `.venv`: the page's commands run from here, as it says.
PROJECT = Path(__file__).resolve().parents[2]
#: The address the page's commands call: `make run`'s.
MAKE_RUN_BASE = "http://127.0.0.1:8000"
#: A folder to keep the screenshot in for a person to look at (as in test_explore_page).
SCREENSHOT_DIR = os.environ.get("CLEANAIR_SCREENSHOT_DIR")


@dataclass
class Running:
    server: Server
    env: dict[str, str]


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    tmp = tmp_path_factory.mktemp("home-server")
    env = server_env(tmp)
    with running_server(env, tmp / "server.log") as server:
        yield Running(server, dict(env))


@pytest.fixture
def server(running: Running) -> Server:
    return running.server


@pytest.fixture
def visit(browser: Browser, server: Server) -> Iterator[Visit]:
    context = browser.new_context(viewport={"width": 1100, "height": 800})
    # /readyz is 503 on this quick server (no network loaded): a failed load, on purpose.
    visit = guarded_page(context, server.base, lambda text: "Failed to load resource" in text)
    try:
        yield visit
    finally:
        context.close()
    assert visit.foreign == []
    assert visit.errors == []


def test_the_landing_page_says_what_the_service_is_and_links_the_rest(
    visit: Visit, server: Server, tmp_path: Path
) -> None:
    page = visit.page
    page.goto(server.base + "/")
    expect(page).to_have_title("cleanair")
    expect(page.locator(".lead")).to_contain_text("plans cleaner walking, running and cycling")
    # The stylesheet applied (its own, from this server).
    assert page.locator("pre").first.evaluate("e => getComputedStyle(e).borderStyle") == "solid"

    page.click("#link-walkthrough")
    expect(page.locator("#walkthrough")).to_be_in_viewport()
    expect(page.locator("#walkthrough")).to_contain_text("cleanair pairing-code alice")
    shot = tmp_path / "home.png"
    page.screenshot(path=str(shot), full_page=True)
    if SCREENSHOT_DIR:
        Path(SCREENSHOT_DIR).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shot, Path(SCREENSHOT_DIR) / shot.name)

    page.click("#link-explore")
    expect(page).to_have_url(server.base + "/explore")
    expect(page.locator("h1")).to_have_text("cleanair route explorer")
    page.click("a.home")
    page.click("#link-docs")
    expect(page.locator(".btn.authorize")).to_be_visible()
    page.go_back()
    page.click("#link-health")
    expect(page.locator("body")).to_contain_text('"status"')


def test_the_walkthroughs_commands_run_as_typed_from_the_project_folder(
    visit: Visit, running: Running
) -> None:
    """Copied from the page as a person sees it and run in bash (unset variables are errors)
    in the project folder; only `make run`'s address becomes the test server's."""
    page = visit.page
    page.goto(running.server.base + "/")
    typed = page.locator("#walkthrough-commands").inner_text()
    assert typed.startswith(f"BASE={MAKE_RUN_BASE}\n")
    script = typed.replace(f"BASE={MAKE_RUN_BASE}", f"BASE={running.server.base}", 1)
    done = subprocess.run(
        ["bash", "-eu", "-c", script],
        cwd=PROJECT,
        env=running.env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    paired, quota = done.stdout.strip().splitlines()[-2:]
    assert json.loads(paired)["name"] == "my app"
    assert json.loads(quota)["remaining"] == 1000

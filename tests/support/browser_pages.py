"""Pages in the browser tests' Chromium that may reach the test's server and nothing else."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from playwright.sync_api import BrowserContext, ConsoleMessage, Page, Route


@dataclass
class Visit:
    page: Page
    #: Requests to anywhere but the server: blocked, and there must be none.
    foreign: list[str] = field(default_factory=list)
    #: Uncaught script errors and console errors.
    errors: list[str] = field(default_factory=list)
    #: When (time.monotonic()) the page asked for a plan's state, where a test records it.
    polls: list[float] = field(default_factory=list)


def guarded_page(
    context: BrowserContext, base: str, expected_console: Callable[[str], bool] = lambda _: False
) -> Visit:
    """A new page of `context` that reaches only the server at `base` (everything else is
    blocked and recorded), with its script errors and console errors recorded but those
    `expected_console` accepts."""
    own = urlsplit(base).netloc
    visit = Visit(context.new_page())

    def only_the_server(route: Route) -> None:
        if urlsplit(route.request.url).netloc == own:
            route.continue_()
        else:
            visit.foreign.append(route.request.url)
            route.abort()

    def record_error(message: ConsoleMessage) -> None:
        if message.type == "error" and not expected_console(message.text):
            visit.errors.append(message.text)

    context.route("**/*", only_the_server)
    visit.page.on("pageerror", lambda error: visit.errors.append(str(error)))
    visit.page.on("console", record_error)
    return visit

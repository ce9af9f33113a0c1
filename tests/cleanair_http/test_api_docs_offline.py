"""The API docs under /schema render with no internet: every page, script, style, font and
icon comes from the service itself."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from urllib.parse import urljoin, urlsplit

import pytest
from litestar import Litestar
from litestar.routes import HTTPRoute

from cleanair_http.openapi import SWAGGER_ASSETS_PATH, SWAGGER_FILES
from support.http import Client

# Where a browser fetches a URL from CSS, JavaScript or inline HTML: url(), @import, the
# fetching calls, an element's src/href set from script, and source maps.
_CSS_URL = re.compile(r"""url\(\s*["']?([^"')\s]*)""", re.IGNORECASE)
_CSS_IMPORT = re.compile(r"""@import\s+(?:url\()?\s*["']?([^"')\s;]*)""", re.IGNORECASE)
_JS_FETCH = re.compile(
    r"""(?:\bfetch|\bimport|\bimportScripts|\bsendBeacon|\bnew\s+(?:Worker|SharedWorker|"""
    r"""EventSource|WebSocket|Request))\s*\(\s*["'`]([^"'`]*)"""
)
_JS_ATTRIBUTE = re.compile(r"""\b(?:src|href|action|srcset|poster)\s*[:=]\s*["'`]([^"'`]*)""")
_SOURCE_MAP = re.compile(r"""[#@]\s*sourceMappingURL=([^\s*'"`]+)""")

_CONTENT_TYPES = {
    ".js": ("text/javascript", "application/javascript"),
    ".css": ("text/css",),
    ".png": ("image/png",),
    ".ico": ("image/x-icon", "image/vnd.microsoft.icon"),
    ".map": ("application/json",),
    ".json": ("application/json", "application/vnd.oai.openapi+json"),
    ".html": ("text/html",),
}
#: Pages Litestar can serve that load from CDNs: off (404), not blank offline.
_TURNED_OFF = ("redoc", "elements", "rapidoc", "scalar")


class _References(HTMLParser):
    """Every URL a page's elements point at, and its inline scripts and styles."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []
        self.inline: list[str] = []
        self._in: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if value is None:
                continue
            if name in {"src", "href", "action", "poster", "data", "formaction"}:
                self.urls.append(value)
            elif name == "srcset":
                self.urls.extend(part.split()[0] for part in value.split(",") if part.strip())
            elif name == "style":
                self.inline.append(value)
        self._in = tag if tag in {"script", "style"} else None

    def handle_endtag(self, tag: str) -> None:
        self._in = None

    def handle_data(self, data: str) -> None:
        if self._in is not None:
            self.inline.append(data)


def _urls(text: str, *patterns: re.Pattern[str]) -> list[str]:
    return [m.group(1) for pattern in patterns for m in pattern.finditer(text) if m.group(1)]


def _loads(text: str, kind: str) -> tuple[list[str], list[str]]:
    """The URLs CSS or JavaScript `text` may have the browser fetch, and of those the ones
    that are plain URLs (a script's src/href and url() calls are often built at run time, so
    they are checked for another host but not followed)."""
    if kind == "css":
        loads = _urls(text, _CSS_URL, _CSS_IMPORT, _SOURCE_MAP)
        return loads, loads
    plain = _urls(text, _JS_FETCH, _SOURCE_MAP)
    return plain + _urls(text, _JS_ATTRIBUTE, _CSS_URL, _CSS_IMPORT), plain


def _foreign(url: str, host: str) -> bool:
    parts = urlsplit(url)
    return bool(parts.netloc) and parts.netloc != host


def _schema_pages(app: Litestar) -> list[str]:
    """Every GET path under /schema; a path parameter is filled with the names of the pages
    Litestar has plugins for (only the assets route has one other than the 404 page)."""
    paths: list[str] = []
    for route in app.routes:
        if not (isinstance(route, HTTPRoute) and route.path.startswith("/schema")):
            continue
        if "GET" not in route.methods:
            continue
        if route.path.startswith(SWAGGER_ASSETS_PATH):
            continue  # scripts and styles, checked by what the pages reference
        if route.path_parameters:
            paths.extend(route.path.replace("{path:str}", name) for name in _TURNED_OFF)
        else:
            paths.append(route.path)
    return paths


def _check_local(client: Client, url: str) -> str:
    """`url` answers 200 with the content type its name says; returns the body as text."""
    response = client.get(url)
    assert response.status_code == 200, url
    suffix = "." + urlsplit(url).path.rsplit(".", 1)[-1]
    content_type = response.headers["content-type"].split(";")[0].strip()
    assert content_type in _CONTENT_TYPES[suffix], (url, content_type)
    return response.text if suffix in {".js", ".css", ".map", ".json", ".html"} else ""


def test_every_schema_page_and_asset_is_served_by_the_service(client: Client) -> None:
    app = client.app
    assert isinstance(app, Litestar)
    host = urlsplit(str(client.base_url)).netloc
    pages = _schema_pages(app)
    assert {"/schema", "/schema/swagger", "/schema/openapi.json"} <= set(pages)

    assets: set[str] = set()
    for page in pages:
        response = client.get(page)
        url = str(response.url)
        if response.headers["content-type"].startswith("text/html"):
            parser = _References()
            parser.feed(response.text)
            followed = list(parser.urls)
            for text in parser.inline:
                for kind in ("css", "js"):
                    loads, plain = _loads(text, kind)
                    assert not [ref for ref in loads if _foreign(ref, host)], page
                    followed.extend(plain if kind == "css" else ())
            for ref in followed:
                assert not _foreign(ref, host), (page, ref)
                if not ref.startswith(("data:", "#")):
                    assets.add(urljoin(url, ref))
    assert any(a.endswith("swagger-ui-bundle.js") for a in assets)

    # What the pages load, and what those files load in turn (their source maps).
    checked: set[str] = set()
    while assets - checked:
        asset = min(assets - checked)
        checked.add(asset)
        text = _check_local(client, asset)
        if asset.endswith((".js", ".css")):
            loads, plain = _loads(text, "css" if asset.endswith(".css") else "js")
            assert not [ref for ref in loads if _foreign(ref, host)], asset
            assets.update(urljoin(asset, ref) for ref in plain if not ref.startswith("data:"))
    assert any(a.endswith("swagger-ui.css.map") for a in checked)


@pytest.mark.parametrize("page", ["/schema", "/schema/swagger"])
def test_swagger_ui_never_asks_the_online_validator(client: Client, page: str) -> None:
    # Swagger UI's default validatorUrl is another host, reached for a badge whenever the
    # document is loaded by URL: the page turns it off whatever Swagger UI is given.
    assert "validatorUrl: 'none'" in client.get(page).text


@pytest.mark.parametrize("site", _TURNED_OFF)
def test_pages_that_need_a_cdn_are_off(client: Client, site: str) -> None:
    assert client.get(f"/schema/{site}").status_code == 404


def test_only_the_pages_files_are_served(client: Client) -> None:
    # The package's folder also holds a demo index.html that opens a document on another host.
    for name in ("index.html", "swagger-initializer.js", "index.j2", "..%2F__init__.py"):
        assert client.get(f"{SWAGGER_ASSETS_PATH}/{name}").status_code == 404
    for name in SWAGGER_FILES:
        _check_local(client, f"{SWAGGER_ASSETS_PATH}/{name}")
    # Served without a token, like the document.
    cached = client.get(f"{SWAGGER_ASSETS_PATH}/swagger-ui.css").headers["cache-control"]
    assert "max-age=86400" in cached

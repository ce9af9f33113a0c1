"""`GET /`: a landing page for browsers, a JSON index for clients asking for JSON; public,
outside `/v1` and the OpenAPI document, linking only this server's own paths."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from support.http import Client, bearer

README = Path(__file__).resolve().parents[2] / "README.md"


def links(page: str) -> set[str]:
    return set(re.findall(r'href="([^"]+)"', page))


@pytest.mark.parametrize("accept", [None, "*/*", "text/html,application/xhtml+xml,*/*;q=0.8"])
def test_a_browser_gets_a_page_linking_the_explorer_docs_health_and_walkthrough(
    client: Client, accept: str | None
) -> None:
    headers = {} if accept is None else {"Accept": accept}
    page = client.get("/", headers=headers)
    assert page.status_code == 200
    assert page.headers["content-type"] == "text/html; charset=utf-8"
    assert "default-src 'none'" in page.headers["content-security-policy"]
    assert "Accept" in page.headers["vary"]
    assert {"/explore", "/schema", "/readyz", "#walkthrough"} <= links(page.text)
    assert 'id="walkthrough"' in page.text
    # Every link is this server's own: a path or a fragment, never another host.
    foreign = [link for link in links(page.text) if not link.startswith(("/", "#")) or "//" in link]
    assert foreign == []
    for link in links(page.text):
        if link.startswith("/"):
            # Served (a test app has no network loaded, so /readyz says 503 with reasons).
            assert client.get(link).status_code in (200, 503), link


def test_a_json_client_gets_an_index_of_the_same_links(client: Client) -> None:
    index = client.get("/", headers={"Accept": "application/json"})
    assert index.status_code == 200
    assert index.headers["content-type"] == "application/json"
    body = index.json()
    assert body["service"] == "cleanair"
    assert body["links"]["explorer"] == "/explore"
    assert body["links"]["api_docs"] == "/schema"
    assert body["links"]["ready"] == "/readyz"
    assert body["links"]["walkthrough"] == "/#walkthrough"


def test_the_page_needs_no_token_and_is_not_in_the_openapi_document(client: Client) -> None:
    assert client.get("/", headers=bearer("ca_tst_" + "A" * 43)).status_code == 200
    paths = client.get("/schema/openapi.json").json()["paths"]
    assert "/" not in paths


def test_the_page_revalidates_with_its_etag(client: Client) -> None:
    first = client.get("/")
    again = client.get("/", headers={"If-None-Match": first.headers["etag"]})
    assert again.status_code == 304


def test_the_walkthrough_on_the_page_is_the_readmes(client: Client) -> None:
    """The page's short walkthrough uses the README's commands and calls, so it cannot drift
    from the walkthrough a test runs."""
    page = client.get("/").text
    readme = README.read_text()
    for step in ("users add alice", "pairing-code alice", "/v1/connections/token", "/v1/quota"):
        assert step in page
        assert step in readme

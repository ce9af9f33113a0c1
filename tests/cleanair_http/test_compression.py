"""Large answers are gzip-compressed for clients that accept it; small ones and clients that
do not get them as they are."""

from __future__ import annotations

import gzip
import json

import httpx
import pytest

from support.http import Client

#: The explorer's script, tens of kB. (Its street tiles come gzipped already:
#: test_explore_tiles.py.)
SCRIPT = "/explore/assets/explore.js"


def raw_get(client: Client, path: str, accept: str | None) -> httpx.Response:
    """The answer as sent: the test client would otherwise ask for gzip and undo it."""
    headers = {"Accept-Encoding": accept or "identity"}
    return client.get(path, headers=headers)


@pytest.mark.parametrize("path", [SCRIPT, "/schema/openapi.json"])
def test_a_large_answer_is_gzipped_for_a_client_that_accepts_it(client: Client, path: str) -> None:
    plain = raw_get(client, path, None)
    assert plain.status_code == 200
    assert "content-encoding" not in plain.headers
    assert len(plain.content) >= 1024

    with client.stream("GET", path, headers={"Accept-Encoding": "gzip"}) as zipped:
        assert zipped.headers["content-encoding"] == "gzip"
        assert "Accept-Encoding" in zipped.headers["vary"]
        body = b"".join(zipped.iter_raw())
    assert len(body) < len(plain.content)
    assert gzip.decompress(body) == plain.content


def test_a_small_answer_is_not_compressed(client: Client) -> None:
    small = raw_get(client, "/livez", "gzip")
    assert small.status_code == 200
    assert "content-encoding" not in small.headers
    assert json.loads(small.content) == {"status": "ok"}

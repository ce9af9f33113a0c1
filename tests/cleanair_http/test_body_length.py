"""`JsonBodyRequest.content_length` reads the raw headers, and says what Litestar's request
says for any headers: the same length, or the same refusal."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from litestar import Request
from litestar.exceptions import ClientException

from cleanair_http.bodies import JsonBodyRequest

NAMES = st.sampled_from([b"content-length", b"Content-Length", b"CONTENT-LENGTH", b"host", b"x"])
VALUES = st.one_of(
    st.integers(0, 10**12).map(lambda n: str(n).encode()),
    st.sampled_from([b"", b" 12 ", b"-1", b"1e3", b"0x10", b"12a", b"\xff", b"+7", b"1_000"]),
    st.binary(max_size=8),
)


def length_of(kind: type[Request[Any, Any, Any]], headers: list[tuple[bytes, bytes]]) -> Any:
    scope: Any = {"type": "http", "method": "POST", "path": "/", "headers": headers}
    try:
        return kind(scope).content_length
    except ClientException as refused:
        return ("refused", refused.detail)


@given(st.lists(st.tuples(NAMES, VALUES), max_size=4))
def test_the_length_is_litestars(headers: list[tuple[bytes, bytes]]) -> None:
    assert length_of(JsonBodyRequest, headers) == length_of(Request, headers)

"""JSON request bodies: every way a body can be malformed is a 422, never a 500.

msgspec reports bad syntax as `DecodeError`, but invalid UTF-8 inside a string as
`UnicodeDecodeError` and nesting deeper than the interpreter's stack allows (about 1,000
levels) as `RecursionError`; Litestar maps only the first. Unmapped, the others were a 500
with a traceback written at ERROR for every request: any client, no token needed, could make
the server write more log than it was sent.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import msgspec
from litestar import Request
from litestar.exceptions import SerializationException

from cleanair_core.errors import Unprocessable

T = TypeVar("T")

#: Everything a decoder raises for a body that is not the JSON asked for. Litestar wraps
#: `msgspec.DecodeError` (and so `ValidationError`) in `SerializationException`.
_MALFORMED = (msgspec.DecodeError, SerializationException, UnicodeDecodeError, RecursionError)


@contextmanager
def _malformed_is_unprocessable() -> Iterator[None]:
    try:
        yield
    except _MALFORMED:
        # `from None`: the messages quote the input, and the chain would only be logged.
        raise Unprocessable() from None


def decode_strict(body: bytes, kind: type[T]) -> T:
    """`body` decoded into `kind` without coercion ("1" is not a number). Raises
    Unprocessable (422 `Request validation failed`) for any malformed or mistyped body."""
    with _malformed_is_unprocessable():
        return msgspec.json.decode(body, type=kind)


class JsonBodyRequest(Request[Any, Any, Any]):
    """Litestar's request, whose `json()` (the decoder behind every `data` parameter) raises
    Unprocessable for any malformed body, like `decode_strict`."""

    async def json(self) -> Any:
        """The decoded JSON body; Unprocessable when it is malformed."""
        with _malformed_is_unprocessable():
            return await super().json()

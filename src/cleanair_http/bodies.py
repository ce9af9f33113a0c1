"""JSON request bodies: every way a body can be malformed is a 422, never a 500.

msgspec reports bad syntax as `DecodeError`, but invalid UTF-8 inside a string as
`UnicodeDecodeError` and nesting deeper than the interpreter's stack allows (about 1,000
levels) as `RecursionError`; Litestar maps only the first. Unmapped, the others were a 500
with a traceback written at ERROR for every request: any client, no token needed, could make
the server write more log than it was sent.

A strict decoder skips the keys and values of fields it does not know without reading their
text, so invalid UTF-8 there was accepted (and the call charged) while the same bytes in a
known field were a 422. The whole body is checked as UTF-8 first, so malformed is malformed
wherever it sits (RFC 8259 requires JSON text to be UTF-8).
"""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec
from litestar import Request
from litestar.exceptions import ClientException, SerializationException
from litestar.types import Empty

from cleanair_core.errors import Unprocessable, Violation
from cleanair_http.violations import MALFORMED, violations_of

#: Everything a decoder raises for a body that is not the JSON asked for. Litestar wraps
#: `msgspec.DecodeError` (and so `ValidationError`) in `SerializationException`.
_MALFORMED = (msgspec.DecodeError, SerializationException, UnicodeDecodeError, RecursionError)
#: A strict decoder per body struct, made at its first body: `msgspec.json.decode(body,
#: type=...)` prepares one for every call.
_DECODERS: dict[type[msgspec.Struct], msgspec.json.Decoder[Any]] = {}
S = TypeVar("S", bound=msgspec.Struct)


def _decoder(kind: type[msgspec.Struct]) -> msgspec.json.Decoder[Any]:
    decoder = _DECODERS.get(kind)
    if decoder is None:
        decoder = _DECODERS[kind] = msgspec.json.Decoder(kind)
    return decoder


def _violations(body: bytes, kind: Any) -> list[Violation]:
    """What is wrong with a refused body, field by field (only /ext/v1 answers show it)."""
    try:
        _check_utf8(body)
    except UnicodeDecodeError:
        return [MALFORMED]
    if isinstance(kind, type) and issubclass(kind, msgspec.Struct):
        return violations_of(body, kind)
    return [MALFORMED]


class JsonBodyRequest(Request[Any, Any, Any]):
    """Litestar's request, whose `json()` (the decoder behind every `data` parameter) decodes
    the body once, strictly, straight into the handler's declared struct.

    Litestar would decode to plain values and then convert them without strictness ("1"
    becomes a number); given the struct itself, its conversion passes it through untouched.
    Any malformed or mistyped body is Unprocessable (422 `Request validation failed`).
    """

    async def json(self) -> Any:
        """The decoded JSON body; Unprocessable when it is malformed."""
        field = self.route_handler.parsed_data_field
        kind = None if field is None else field.annotation
        body = await self.body()
        if isinstance(kind, type) and issubclass(kind, msgspec.Struct):
            return decode_struct(body, kind)
        try:
            _check_utf8(body)
            return await super().json()
        except _MALFORMED:
            # `from None`: the messages quote the input, and the chain would only be logged.
            raise Unprocessable(violations=_violations(body, kind)) from None

    @property
    def content_length(self) -> int | None:
        """The `Content-Length` header's value, read from the raw headers: Litestar's parses
        every header of the request into a multidict for it, which nothing else on a JSON
        route's path needs (about 2 % of a served score's CPU)."""
        cached = self._content_length
        if cached is not Empty:
            return cached
        header = next(
            (
                value.decode("latin-1")
                for name, value in self.scope["headers"]
                if name.lower() == b"content-length"
            ),
            None,
        )
        try:
            length = self._content_length = int(header) if header is not None else None
        except ValueError:
            raise ClientException(f"Invalid content-length: {header!r}") from None
        return length


def decode_struct(body: bytes, kind: type[S]) -> S:
    """`body` decoded strictly into `kind`, as every JSON route's `data` is (the score
    route's own path calls it directly); Unprocessable when it is not that JSON."""
    try:
        _check_utf8(body)
        decoded: S = _decoder(kind).decode(body)
    except _MALFORMED:
        # `from None`: the messages quote the input, and the chain would only be logged.
        raise Unprocessable(violations=_violations(body, kind)) from None
    return decoded


def _check_utf8(body: bytes) -> None:
    """UnicodeDecodeError unless `body` is UTF-8 throughout; ASCII, the usual body, is
    recognised without decoding."""
    if not body.isascii():
        body.decode("utf-8")

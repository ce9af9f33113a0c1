"""A route's JSON answer encoded once and sent as two ASGI messages.

Litestar makes every answer a `Response`, then an `ASGIResponse` whose headers live in a
mutable multidict-like structure, and encodes the content with a fresh msgspec encoder
(`msgspec.json.encode(..., enc_hook=...)` prepares one per call). For a small struct, a
score's two integers, that was about 4 % of a served score's CPU. `EncodedJson`, set as a
route's `response_class`, skips it when the answer is that simple case, with exactly the
bytes Litestar would have sent (`tests/cleanair_http/test_score_answers_exact.py`): the
`content-type` header, then `content-length`, then the body in one message. Anything else
(other headers, cookies, background work, content that is not a struct) is Litestar's own
answer.

Errors never pass here: the exception handlers make their envelopes with Litestar's
`Response`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import msgspec
from litestar import Response
from litestar.enums import MediaType
from litestar.response.base import ASGIResponse
from litestar.serialization import get_serializer

if TYPE_CHECKING:
    from litestar import Litestar, Request
    from litestar.background_tasks import BackgroundTask, BackgroundTasks
    from litestar.datastructures import Cookie
    from litestar.types import Receive, Scope, Send, TypeEncodersMap

#: The route option that keeps the app's gzip off an answer (`app.COMPRESSION`).
SKIP_COMPRESSION = "skip_compression"

#: Litestar's JSON encoding (`encode_json` with the serializer of the route's type encoders,
#: which plugins add to: Pydantic's, when it is installed), made once for the type encoders
#: of the last answer encoded. Structs of plain fields never call it; other values may.
_encoders: list[tuple[TypeEncodersMap, msgspec.json.Encoder]] = []


def json_encoder(type_encoders: TypeEncodersMap) -> msgspec.json.Encoder:
    """The encoder Litestar would use with `type_encoders` (equal mappings, one encoder)."""
    for known, encoder in _encoders:
        if known == type_encoders:
            return encoder
    encoder = msgspec.json.Encoder(enc_hook=get_serializer(type_encoders))
    _encoders[:] = [(type_encoders, encoder)]
    return encoder


_JSON_TYPE = (b"content-type", MediaType.JSON.value.encode("latin-1"))


class EncodedJson(Response[Any]):
    """A route's `response_class` for answers that are msgspec structs: encoded at once and
    sent as Litestar would, without its response objects (see the module)."""

    def to_asgi_response(
        self,
        app: Litestar | None,
        request: Request[Any, Any, Any],
        *,
        background: BackgroundTask | BackgroundTasks | None = None,
        cookies: Iterable[Cookie] | None = None,
        encoded_headers: Iterable[tuple[bytes, bytes]] | None = None,
        headers: dict[str, str] | None = None,
        is_head_response: bool = False,
        media_type: MediaType | str | None = None,
        status_code: int | None = None,
        type_encoders: TypeEncodersMap | None = None,
    ) -> ASGIResponse:
        """The answer to send: the lean one when it is the simple case, else Litestar's."""
        status = self.status_code or status_code or 200
        if (
            isinstance(self.content, msgspec.Struct)
            and (self.media_type or media_type or MediaType.JSON) == MediaType.JSON
            and status >= 200
            and status not in (204, 304)  # answers Litestar sends without a body
            and not (is_head_response or encoded_headers or headers or self.headers)
            and not (background or self.background or cookies or self.cookies)
            and not type_encoders  # Litestar's data handler passes them to the constructor
            and app is None
        ):
            try:
                body = json_encoder(self.response_type_encoders).encode(self.content)
            except Exception:  # noqa: S110
                pass  # Litestar's own path below raises what it raises for it
            else:
                return _Encoded(status, body)
        return super().to_asgi_response(
            app,
            request,
            background=background,
            cookies=cookies,
            encoded_headers=encoded_headers,
            headers=headers,
            is_head_response=is_head_response,
            media_type=media_type,
            status_code=status_code,
            type_encoders=type_encoders,
        )


class _Encoded(ASGIResponse):
    """An encoded JSON answer with no other headers: its start and its body, each one
    message, as `ASGIResponse` sends them."""

    __slots__ = ("_body", "_status")

    def __init__(self, status: int, body: bytes) -> None:
        # Not ASGIResponse's: its headers structure is what this answer does without.
        self._status = status
        self._body = body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send_json(send, self._status, self._body)


async def send_json(send: Send, status: int, body: bytes) -> None:
    """Send `body`, encoded JSON, as `ASGIResponse` sends an answer with no other headers:
    its start (the `content-type` header, then `content-length`), then its body."""
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [_JSON_TYPE, (b"content-length", str(len(body)).encode("latin-1"))],
        }
    )
    await send({"type": "http.response.body", "body": body, "more_body": False})

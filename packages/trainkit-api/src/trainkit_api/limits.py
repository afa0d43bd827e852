"""The request-body limit: `TRAINKIT_API_MAX_BODY_BYTES`, checked before a body is parsed.

Without it a client could send a body of any size, which the server would read into
memory, parse, and (for a run's `metadata`) store and send back with every listing.
A plain ASGI middleware, so it costs nothing on requests without a body:

- a declared ``Content-Length`` over the limit is answered 413 at once, before a
  byte of the body is read (and before auth: the answer says nothing about the API);
- a body sent without a length (chunked) is counted as it is read, and the read
  fails with the same 413 once it passes the limit.

The 413 has the API's error shape (``{"error": {"type": "request_too_large", ...}}``).
"""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from trainkit_api.errors import error_response


def _too_large(limit: int) -> str:
    return f"request body over {limit} bytes (the server's TRAINKIT_API_MAX_BODY_BYTES)"


class BodyLimit:
    """Refuse request bodies over `limit` bytes with a 413."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.limit:
            response = error_response(413, "request_too_large", _too_large(self.limit))
            await response(scope, receive, send)
            return
        received = 0

        async def counted() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:
                    # Raised inside the route's body read: the app's handler renders it.
                    raise HTTPException(413, _too_large(self.limit))
            return message

        await self.app(scope, counted, send)


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            text = value.decode("latin-1").strip()
            return int(text) if text.isascii() and text.isdigit() else None
    return None

"""Who may talk to the server at all, decided from the request line and headers, before a body is read.

Two rules, one ASGI middleware:

- **With a token**, a request that may carry a body (any method but GET, HEAD and
  OPTIONS, or a declared body) to anything but the public paths needs it, and it is
  checked here, before the route reads the body: FastAPI parses and validates a body
  before a route's dependencies run, so a client without a token made the server read
  and parse 30 MB just to be told 401. Other requests are left to
  `auth.require_token`, which every router carries (so an unknown path stays a 404).
- **Without a token** (`trainkit serve` allows that only on a loopback address), a
  web page the user visits could rebind its own DNS name to 127.0.0.1 and talk to the
  server from the user's browser. So a tokenless server answers only requests whose
  ``Host`` is a loopback name, and refuses requests that change state when the browser
  says they come from another origin (``Origin``, ``Sec-Fetch-Site``): the defence
  Jupyter and Ollama use.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from trainkit_api.auth import token_matches
from trainkit_api.errors import error_response

#: Paths anyone may read: liveness, and the dashboard's page and files (they hold no data).
PUBLIC_PATHS = frozenset({"/health", "/"})
PUBLIC_PREFIXES = ("/static/",)
#: Methods a browser may send cross-origin without asking: they must not change anything.
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
LOOPBACK_NAMES = frozenset({"localhost"})


def is_public(path: str) -> bool:
    return path in PUBLIC_PATHS or path.startswith(PUBLIC_PREFIXES)


def host_name(host: str) -> str:
    """The name part of a ``Host`` header value (no port; IPv6 without brackets), lower case."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def is_loopback_name(name: str) -> bool:
    """``localhost``, a name under ``.localhost`` (RFC 6761 keeps it on this machine), 127/8 and ::1."""
    name = name.rstrip(".")
    if name in LOOPBACK_NAMES or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


class RequestGuard:
    """The middleware of the module docstring. `token` is the server's token, None when it has none."""

    def __init__(self, app: ASGIApp, token: str | None) -> None:
        self.app = app
        self.token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in scope["headers"]}
        refusal = self._refusal(scope, headers)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _refusal(self, scope: Scope, headers: dict[str, str]) -> JSONResponse | None:
        if self.token is not None:
            if is_public(scope["path"]) or not _has_body(scope, headers):
                return None  # the route's own dependency answers (a 404 stays a 404)
            scheme, _, given = headers.get("authorization", "").partition(" ")
            if scheme.lower() != "bearer" or not given.strip():
                return _unauthorized("missing bearer token: send 'Authorization: Bearer <TRAINKIT_API_TOKEN>'")
            if not token_matches(self.token, given.strip()):
                return _unauthorized("wrong bearer token")
            return None
        host = headers.get("host", "")
        if not is_loopback_name(host_name(host)):
            return error_response(
                403,
                "permission_error",
                f"Host {host[:100]!r} is not a loopback name; a server without a token answers only "
                "localhost, 127.0.0.1 and ::1 (a page that rebinds its DNS name to this machine is refused)",
                hint="open the server as http://127.0.0.1:<port>, or give it a token (TRAINKIT_API_TOKEN)",
            )
        if scope["method"] not in SAFE_METHODS and _cross_origin(headers):
            return error_response(
                403,
                "permission_error",
                "cross-origin request refused: a server without a token takes changes only from its own pages",
                hint="give the server a token (TRAINKIT_API_TOKEN) to accept other clients",
            )
        return None


def _has_body(scope: Scope, headers: dict[str, str]) -> bool:
    return (
        scope["method"] not in SAFE_METHODS
        or "transfer-encoding" in headers
        or headers.get("content-length")
        not in (
            None,
            "0",
        )
    )


def _cross_origin(headers: dict[str, str]) -> bool:
    """Whether a browser says the request comes from a page of another origin than this server's."""
    if headers.get("sec-fetch-site", "").lower() == "cross-site":
        return True
    origin = headers.get("origin")
    if origin is None:
        return False  # not sent by a browser's cross-origin request (curl, the CLI, same-origin GET)
    if origin == "null":
        return True  # a sandboxed frame or a file: page
    parts = urlsplit(origin)
    return (parts.netloc or "").lower() != headers.get("host", "").lower() and not (
        is_loopback_name(host_name(parts.netloc or "")) and parts.port == _port(headers.get("host", ""))
    )


def _port(host: str) -> int | None:
    try:
        return urlsplit(f"//{host}").port
    except ValueError:
        return None


def _unauthorized(message: str) -> JSONResponse:
    return error_response(401, "authentication_error", message, headers={"WWW-Authenticate": "Bearer"})

"""Bearer-token auth: `TRAINKIT_API_TOKEN`, required on every route but `/health`.

The token is compared with `hmac.compare_digest`, so the time a wrong guess takes says
nothing about how much of it was right. With no token configured the API is open;
`trainkit serve` therefore refuses to listen on anything but a loopback address
without one. The token never appears in a response or a log line.
"""

from __future__ import annotations

import hmac
import logging
import re

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.exceptions import HTTPException

_bearer = HTTPBearer(auto_error=False, description="`Authorization: Bearer <TRAINKIT_API_TOKEN>`")


def _unauthorized(message: str) -> HTTPException:
    return HTTPException(401, message, headers={"WWW-Authenticate": "Bearer"})


def token_matches(expected: str, given: str) -> bool:
    """Constant-time comparison of two tokens (as bytes, so any text compares safely)."""
    return hmac.compare_digest(expected.encode(), given.encode())


async def require_token(request: Request, credentials: HTTPAuthorizationCredentials | None = Depends(_bearer)) -> None:
    """The dependency every protected router carries."""
    expected = request.app.state.trainkit.token
    if expected is None:
        return
    if credentials is None or credentials.scheme.lower() != "bearer":
        raise _unauthorized("missing bearer token: send 'Authorization: Bearer <TRAINKIT_API_TOKEN>'")
    if not token_matches(expected, credentials.credentials):
        raise _unauthorized("wrong bearer token")


#: Query parameters whose values are credentials: a client may put its token there (it is refused, but still logged).
_SECRET_QUERY = re.compile(r"([?&][^=&#]*(?:token|key|secret|password|passwd|auth|signature|sig)[^=&#]*=)[^&#]*", re.I)


def redact_query_secrets(path: str) -> str:
    """`path` with the value of every credential-like query parameter replaced by ``***``."""
    return _SECRET_QUERY.sub(r"\1***", path)


class RedactQuerySecrets(logging.Filter):
    """A filter for uvicorn's access log: its line carries the path with the query string.

    Why: `?token=` is refused (only the header counts), yet uvicorn would still write the
    token into the log of `trainkit serve`; the record's string arguments are redacted.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(redact_query_secrets(a) if isinstance(a, str) else a for a in record.args)
        return True


def install_log_redaction() -> None:
    """Add `RedactQuerySecrets` to uvicorn's access logger, once (apps are made many times in one process)."""
    logger = logging.getLogger("uvicorn.access")
    if not any(isinstance(f, RedactQuerySecrets) for f in logger.filters):
        logger.addFilter(RedactQuerySecrets())

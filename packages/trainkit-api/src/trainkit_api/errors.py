"""How the API answers errors: one JSON shape, ``{"error": {"type", "message"}}``.

trainkit's exceptions carry their own HTTP status (`TrainkitError.http_status`), so
the mapping lives with the exceptions and this module only renders them. Validation
errors name the field (``param``, as OpenAI's errors do, so OpenAI clients show it).
Anything unexpected becomes a 500 with a fixed message: the stack trace goes to the
server's log, never into a response.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException

from trainkit_core.errors import (
    ConflictError,
    InputTooLargeError,
    JobError,
    JobTimeout,
    MissingExtraError,
    NotFoundError,
    OutOfSpaceError,
    ProviderError,
    TrainkitError,
    UsageError,
)

log = logging.getLogger(__name__)

#: Most specific class first: the first match names the error's type.
ERROR_TYPES: tuple[tuple[type[TrainkitError], str], ...] = (
    (MissingExtraError, "missing_extra"),
    (ProviderError, "provider_error"),
    (InputTooLargeError, "request_too_large"),
    (UsageError, "invalid_request_error"),
    (NotFoundError, "not_found_error"),
    (ConflictError, "conflict_error"),
    (JobTimeout, "timeout_error"),
    (OutOfSpaceError, "out_of_space"),
    (JobError, "job_error"),
)

_HTTP_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    405: "method_not_allowed",
    409: "conflict_error",
    413: "request_too_large",
    422: "invalid_request_error",
}


class ErrorDetail(BaseModel):
    type: str
    message: str
    param: str | None = None
    #: A machine-readable reason, where OpenAI's API has one (the fine-tuning routes).
    code: str | None = None
    hint: str | None = None


class RequestError(UsageError):
    """A 400 naming the request field at fault (`param`) and OpenAI's `code` for it.

    The OpenAI-compatible routes raise it, so the `openai` SDK shows `param` and `code` as
    it would for OpenAI's own answer.
    """

    def __init__(self, message: str, *, param: str | None = None, code: str | None = None, hint: str | None = None):
        super().__init__(message, hint=hint)
        self.param = param
        self.code = code


class ErrorBody(BaseModel):
    """Every error response of the API."""

    error: ErrorDetail


def _describe(status: int, description: str) -> dict[str, Any]:
    return {"model": ErrorBody, "description": description}


#: Declared on every `/v1` router so the OpenAPI schema states the error shape.
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    400: _describe(400, "Malformed request (a bad id, name, path or value)"),
    401: _describe(401, "Missing or wrong bearer token"),
    404: _describe(404, "No such run, model, eval set or report"),
    409: _describe(409, "The run's state forbids this"),
    413: _describe(413, "An input is over its bound (body, prompt past the model's context, image size)"),
    422: _describe(422, "The request does not match the schema; `param` names the field"),
    500: _describe(500, "Internal error (details are in the server's log)"),
    501: _describe(501, "A job needs a pip extra that is not installed"),
    502: _describe(502, "The provider failed or refused the request"),
    504: _describe(504, "Waiting for a job took too long"),
}


def error_response(
    status: int,
    type_: str,
    message: str,
    *,
    param: str | None = None,
    code: str | None = None,
    hint: str | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    detail = ErrorDetail(type=type_, message=message, param=param, code=code, hint=hint)
    return JSONResponse(ErrorBody(error=detail).model_dump(exclude_none=True), status_code=status, headers=headers)


def type_of(exc: TrainkitError) -> str:
    for cls, name in ERROR_TYPES:
        if isinstance(exc, cls):
            return name
    return "server_error"


def _field(loc: tuple[Any, ...] | list[Any]) -> str:
    """`("body", "messages", 0, "role")` -> `messages[0].role`; the source part is dropped."""
    parts = list(loc[1:] if loc and loc[0] in ("body", "query", "path", "header", "cookie") else loc)
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or str(loc[0] if loc else "request")


def validation_message(errors: list[dict[str, Any]]) -> tuple[str, str | None]:
    """One line naming each bad field; the first field is the `param`."""
    if not errors:
        return "invalid request", None
    parts = []
    for err in errors[:5]:
        where = _field(err.get("loc", ()))
        source = err.get("loc", ("",))[0]
        label = f"{where} ({source})" if source in ("query", "path", "header") else where
        parts.append(f"{label}: {err.get('msg', 'invalid')}")
    more = f" (and {len(errors) - 5} more)" if len(errors) > 5 else ""
    return "invalid request: " + "; ".join(parts) + more, _field(errors[0].get("loc", ()))


def install_error_handlers(app: FastAPI) -> None:
    """Render every error the app can raise in the one shape."""

    @app.exception_handler(TrainkitError)
    async def _trainkit(request: Request, exc: TrainkitError) -> JSONResponse:
        if exc.http_status >= 500:
            log.warning("%s %s failed: %s", request.method, request.url.path, exc.message)
        param, code = getattr(exc, "param", None), getattr(exc, "code", None)
        return error_response(exc.http_status, type_of(exc), exc.message, param=param, code=code, hint=exc.hint)

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        message, param = validation_message(list(exc.errors()))
        return error_response(422, "invalid_request_error", message, param=param)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        message = exc.detail if isinstance(exc.detail, str) else "request failed"
        if exc.status_code == 404 and message == "Not Found":
            message = f"no route {request.method} {request.url.path}"
        type_ = _HTTP_TYPES.get(exc.status_code, "server_error" if exc.status_code >= 500 else "invalid_request_error")
        return error_response(exc.status_code, type_, message, headers=getattr(exc, "headers", None))

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("%s %s failed unexpectedly", request.method, request.url.path)
        return error_response(500, "server_error", "internal error; the server's log has the details")

"""`create_app(settings)`: the trainkit web API, built on demand (nothing at import).

The app is a thin consumer: it finds its provider through `get_provider` like the CLI,
and every route calls the same core functions the CLI does. It serves locally with
`trainkit serve` and, on a provider that hosts web endpoints, as that provider's ASGI
app (the Modal provider mounts `create_app()`).
"""

from __future__ import annotations

import importlib
from typing import Any

from fastapi import Depends, FastAPI
from fastapi.responses import JSONResponse

from trainkit_api import __version__
from trainkit_api.auth import install_log_redaction, require_token
from trainkit_api.errors import install_error_handlers
from trainkit_api.guard import RequestGuard
from trainkit_api.limits import BodyLimit
from trainkit_api.routes import ROUTER_BUILDERS
from trainkit_api.state import ApiState
from trainkit_core.plugins.provider import Provider, get_provider
from trainkit_core.settings import Settings

#: Routes that answer without a token: liveness only. (The dashboard's static page,
#: which holds no data, adds its own; everything under /v1 needs the token.)
PUBLIC_PATHS = frozenset({"/health"})

DESCRIPTION = """Fine-tune open chat models with LoRA, follow the runs live, and generate with the result.

Every route but `/health` needs `Authorization: Bearer <TRAINKIT_API_TOKEN>`. Errors are
`{"error": {"type", "message"}}` (plus `param` naming the field of a validation error).
"""


def route_table(app: FastAPI) -> list[tuple[str, frozenset[str]]]:
    """(path, methods) of every HTTP route of the app, included routers flattened.

    FastAPI 0.16x keeps included routers as lazy branches (`iter_route_contexts`
    walks them); older versions copy the routes into `app.routes`. Both are read.
    """
    from fastapi import routing

    walk = getattr(routing, "iter_route_contexts", None)
    routes = list(walk(app.routes)) if walk is not None else list(app.routes)
    table = []
    for route in routes:
        path, methods = getattr(route, "path", None), getattr(route, "methods", None)
        if path is not None and methods:
            table.append((str(path), frozenset(methods)))
    return table


def build_router(path: str) -> Any:
    module_name, _, attr = path.partition(":")
    return getattr(importlib.import_module(module_name), attr)()


def create_app(
    settings: Settings | None = None, *, provider: Provider | None = None, answer_within_s: float | None = None
) -> FastAPI:
    """A new app for these settings (default: from the environment) and provider.

    The provider is looked up now, so an unknown provider fails at start, not at the
    first request. `answer_within_s` bounds how long a generation request waits: where
    the host cuts requests off (Modal's web endpoints, at 150 s), a generation not done
    by then is answered 202 with the place to fetch it (`routes.generate`).
    """
    settings = settings or Settings.from_env()
    provider = provider or get_provider(None, settings)
    install_log_redaction()  # before uvicorn logs a request: query-string tokens never reach its access log
    app = FastAPI(
        title="trainkit",
        version=__version__,
        description=DESCRIPTION,
        openapi_url=None,  # served below, behind the token
        docs_url=None,
        redoc_url=None,
        # No 307 to the path with(out) a trailing slash: it came before auth, with a
        # Location built from the client's Host header. A JSON 404 instead.
        redirect_slashes=False,
    )
    app.state.trainkit = ApiState(settings=settings, provider=provider, answer_within_s=answer_within_s)
    # The last added runs first: an oversized body is refused at once (413, before auth),
    # then a request that may not be answered is refused before its body is read.
    app.add_middleware(RequestGuard, token=app.state.trainkit.token)
    app.add_middleware(BodyLimit, limit=settings.api.api_max_body_bytes)
    install_error_handlers(app)
    for path in ROUTER_BUILDERS:
        app.include_router(build_router(path))

    @app.get("/openapi.json", include_in_schema=False, dependencies=[Depends(require_token)])
    def openapi() -> JSONResponse:
        return JSONResponse(app.openapi())

    return app

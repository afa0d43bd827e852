"""The API's routers, one module per concern: its handlers are module-level functions on
the module's router, which the module's builder function returns.

`create_app` calls every builder in `ROUTER_BUILDERS`, in order. A new module (the
dashboard's, for one) adds its builder here. Routers under `/v1` carry the token
dependency themselves (`dependencies=[Depends(require_token)]`); the auth test walks
the app's routes, so a new route that forgets it fails that test.
"""

from __future__ import annotations

#: "module:function" of each router builder; imported when an app is built.
ROUTER_BUILDERS = (
    "trainkit_api.routes.health:build_public_router",
    "trainkit_api.routes.health:build_router",
    "trainkit_api.routes.runs:build_router",
    "trainkit_api.routes.groups:build_router",
    "trainkit_api.routes.events:build_router",
    "trainkit_api.routes.models:build_router",
    "trainkit_api.routes.generate:build_router",
    "trainkit_api.routes.fine_tuning:build_router",
    "trainkit_api.routes.evals:build_router",
    "trainkit_api.routes.exports:build_router",
    "trainkit_api.routes.retention:build_router",
    "trainkit_api.routes.app:build_router",
    "trainkit_api.dashboard:build_router",
)

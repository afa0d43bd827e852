"""`/v1/app`: the provider's app lifecycle (status, deploy, stop), behind the token.

The same operations as `trainkit app status|deploy|stop`, through
`Provider.app_lifecycle()`: for a provider whose manifest declares `app_lifecycle`
(Modal). For any other (local) every route answers 400 with the reason and a hint.
A deploy builds images and can take minutes; the request waits for it.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends
from pydantic import BaseModel, Field

from trainkit_api.auth import require_token
from trainkit_api.errors import ERROR_RESPONSES
from trainkit_api.state import ApiState, get_state


class AppStatus(BaseModel):
    """Where the provider's app stands."""

    provider: str
    state: str = Field(description="`deployed`, `stopped` or `not-deployed`.")
    url: str | None = Field(default=None, description="The web API's URL, while deployed.")
    detail: dict[str, Any] = Field(
        default_factory=dict, description="What the provider reports: app id, version, functions, missing ones, notes."
    )


def _answer(state: ApiState, status: Any) -> AppStatus:
    return AppStatus(provider=state.provider.name, state=status.state, url=status.url, detail=dict(status.detail))


def app_status(state: ApiState = Depends(get_state)) -> AppStatus:
    """Whether the app is deployed, stopped or not deployed; its functions and the web API's URL."""
    return _answer(state, state.provider.app_lifecycle().status())


def app_deploy(state: ApiState = Depends(get_state)) -> AppStatus:
    """Build and deploy the app (images, volumes, functions, the web API); answers its new status."""
    return _answer(state, state.provider.app_lifecycle().deploy())


def app_stop(state: ApiState = Depends(get_state)) -> AppStatus:
    """Stop the app: running containers end, new calls are refused until the next deploy (404 when not deployed)."""
    deployment = state.provider.app_lifecycle()
    deployment.stop()
    return _answer(state, deployment.status())


def build_router() -> APIRouter:
    router = APIRouter(prefix="/v1", tags=["app"], dependencies=[Depends(require_token)], responses=ERROR_RESPONSES)
    router.add_api_route("/app", app_status, methods=["GET"], response_model=AppStatus)
    router.add_api_route("/app/deploy", app_deploy, methods=["POST"], response_model=AppStatus)
    router.add_api_route("/app/stop", app_stop, methods=["POST"], response_model=AppStatus)
    return router

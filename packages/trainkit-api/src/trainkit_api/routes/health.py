"""`/health` (no auth: load balancers ask it) and `/v1/info` (provider, versions, capabilities)."""

from __future__ import annotations

import importlib
import importlib.util
import platform
from importlib.metadata import PackageNotFoundError, version

from fastapi import APIRouter, Depends
from pydantic import BaseModel

from trainkit_api.auth import require_token
from trainkit_api.errors import ERROR_RESPONSES
from trainkit_api.state import ApiState, get_state

PACKAGES = ("trainkit-core", "trainkit-api", "trainkit-cli", "trainkit-modal")


class Health(BaseModel):
    status: str


class Info(BaseModel):
    provider: str
    provider_description: str
    capabilities: dict[str, bool | int]
    versions: dict[str, str]
    python: str
    auth: bool


def versions() -> dict[str, str]:
    """Each trainkit package's version: its distribution's, else its module's `__version__`.

    A Modal container has the trainkit sources and no distribution (no metadata), so
    the module is the only place that knows its version there.
    """
    found = {}
    for name in PACKAGES:
        try:
            found[name] = version(name)
            continue
        except PackageNotFoundError:
            pass
        module = name.replace("-", "_")
        if importlib.util.find_spec(module) is not None:
            found[name] = str(getattr(importlib.import_module(module), "__version__", "unknown"))
    return found


public_router = APIRouter(tags=["health"])


@public_router.get("/health", response_model=Health)
def health() -> Health:
    """Liveness: answers without a token and without touching the provider."""
    return Health(status="ok")


def build_public_router() -> APIRouter:
    """`/health`: the one route without a token."""
    return public_router


router = APIRouter(prefix="/v1", tags=["info"], dependencies=[Depends(require_token)], responses=ERROR_RESPONSES)


@router.get("/info", response_model=Info)
def info(state: ApiState = Depends(get_state)) -> Info:
    """Which provider serves this API, what it can do, and the installed trainkit packages."""
    return Info(
        provider=state.provider.name,
        provider_description=state.provider.manifest.description,
        capabilities=state.provider.capabilities.as_dict(),
        versions=versions(),
        python=platform.python_version(),
        auth=state.token is not None,
    )


def build_router() -> APIRouter:
    return router

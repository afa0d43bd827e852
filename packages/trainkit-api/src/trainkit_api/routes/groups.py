"""Sweep groups: the runs of a group and what they cost together.

`GET /v1/groups/{group_id}` answers with the group's runs (id, status, GPU-seconds,
cost) and its totals (`trainkit_core.runs.pricing.group_totals`): the number a user
checks against a sweep's budget. Handlers are module-level functions; `build_router`
only wires them.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path
from pydantic import BaseModel, Field

from trainkit_api.auth import require_token
from trainkit_api.errors import ERROR_RESPONSES
from trainkit_api.state import ApiState, get_state
from trainkit_core.errors import NotFoundError
from trainkit_core.runs.pricing import group_totals

GroupId = Annotated[str, Path(min_length=1, max_length=200, description="A sweep's group id (`grp-…`).")]


class GroupRun(BaseModel):
    id: str
    status: str
    gpu_seconds: float
    cost_usd: float | None = Field(description="None when the run has no price.")


class GroupTotals(BaseModel):
    runs: int
    gpu_seconds: float
    job_seconds: float
    cost_usd: float | None = Field(description="The sum of the runs' costs; None when a run is unpriced.")
    unpriced_runs: int


class Group(BaseModel):
    group_id: str
    runs: list[GroupRun]
    totals: GroupTotals


def get_group(group_id: GroupId, state: ApiState = Depends(get_state)) -> Group:
    """A sweep group's runs and totals (GPU-seconds, cost); 404 when no run has that group."""
    runs, _ = state.store.page(group_id=group_id, limit=100_000)
    if not runs:
        raise NotFoundError(f"no run in group {group_id!r}", hint="GET /v1/runs lists the runs and their groups")
    rows: list[dict[str, Any]] = [
        {"id": r.id, "status": r.status, "gpu_seconds": r.gpu_seconds, "cost_usd": r.cost_usd} for r in runs
    ]
    return Group(group_id=group_id, runs=[GroupRun(**row) for row in rows], totals=GroupTotals(**group_totals(runs)))


def build_router() -> APIRouter:
    router = APIRouter(prefix="/v1", tags=["runs"], dependencies=[Depends(require_token)], responses=ERROR_RESPONSES)
    router.add_api_route("/groups/{group_id}", get_group, methods=["GET"], response_model=Group)
    return router

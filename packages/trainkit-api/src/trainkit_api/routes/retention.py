"""`DELETE /v1/runs/{run_id}`: delete a run and what it left behind.

The same operation as `trainkit runs delete` (`trainkit_core.runs.retention.delete_run`):
409 with the reason for a run still running, a resumed delete when an earlier one was
interrupted, and with `dry_run=true` only the list of what would go and its bytes.
Handlers are module-level functions; `build_router` only collects them.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query
from pydantic import BaseModel, Field

from trainkit_api.auth import require_token
from trainkit_api.errors import ERROR_RESPONSES
from trainkit_api.run_paths import run_route
from trainkit_api.state import ApiState, get_state
from trainkit_core.ids import RUN_ID_PATTERN

RunId = Annotated[str, Path(pattern=RUN_ID_PATTERN.pattern, description="A run id, `run-YYYYMMDD-HHMMSS-xxxxxx`.")]


class Deleted(BaseModel):
    id: str
    deleted: bool = Field(description="False for a dry run.")
    paths: list[str] = Field(description="Folders removed from the models volume (or that would be).")
    bytes: int = Field(description="Bytes of the files removed (or that would be).")
    kv_keys: int = Field(description="Stored keys removed: record, events, stop flag.")
    resumed: bool = Field(description="True when this finished a delete that was interrupted.")


def delete_run(
    run_id: RunId,
    state: ApiState = Depends(get_state),
    keep_model: Annotated[bool, Query(description="Keep trained/<run id> and its exports.")] = False,
    dry_run: Annotated[bool, Query(description="Only report what would be removed.")] = False,
) -> Deleted:
    """Delete a run: record, events, history and (unless keep_model) its trained model and checkpoints."""
    from trainkit_core.runs.retention import delete_run
    from trainkit_core.runs.training_run import RunStore

    removal = delete_run(RunStore.for_provider(state.provider), run_id, keep_model=keep_model, dry_run=dry_run)
    return Deleted(
        id=run_id,
        deleted=not dry_run,
        paths=removal.paths,
        bytes=removal.bytes,
        kv_keys=removal.kv_keys,
        resumed=removal.resumed,
    )


def build_router() -> APIRouter:
    router = APIRouter(prefix="/v1", tags=["runs"], dependencies=[Depends(require_token)], responses=ERROR_RESPONSES)
    run_route(router, "DELETE", "/{run_id}", response_model=Deleted)(delete_run)
    return router

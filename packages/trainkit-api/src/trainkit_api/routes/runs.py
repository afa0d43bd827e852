"""Training runs: start, list, show, stop, cancel, resume, checkpoints.

Under `/v1/runs`, the API's name for a run: each is a `TrainingRun`, its id the run
id. Starting and resuming go through `trainkit_core.training.submit`, the same
functions the CLI calls, so the API adds no behaviour of its own. Blocking calls (SQLite, the provider) run in FastAPI's
thread pool: these handlers are plain `def`.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Path, Query, Response, status

from trainkit_api.auth import require_token
from trainkit_api.errors import ERROR_RESPONSES
from trainkit_api.run_paths import run_route
from trainkit_api.schemas import Checkpoint, CheckpointList, RunList
from trainkit_api.state import ApiState, get_state
from trainkit_api.training import DRY_RUN_RESPONSES, DryRun, RunCreate, RunResume, plan_run, resume_run, start_run
from trainkit_core.ids import RUN_ID_PATTERN
from trainkit_core.runs.statuses import RUN_STATUSES
from trainkit_core.runs.training_run import RunStore, TrainingRun

RunId = Annotated[str, Path(pattern=RUN_ID_PATTERN.pattern, description="A run id, `run-YYYYMMDD-HHMMSS-xxxxxx`.")]
Status = Annotated[
    str | None,
    Query(pattern=f"^({'|'.join(RUN_STATUSES)})$", description="Only runs with this status."),
]


def list_page_json(store: RunStore, *, status: str | None, group_id: str | None, limit: int, after: str | None) -> str:
    """One page of runs, newest first, as the `RunList` document: the same text `RunList(...).model_dump_json()` gives.

    Reads the runs index and the page's records only, so the cost does not grow with
    the number of runs. Unfinished runs on the page are reconciled first, so a run whose
    job died is listed (and filtered) as `failed`.

    Built from `RunStore.page_json`: a finished run whose record did not change since an
    earlier request of this server is not decoded, validated or encoded again, which
    was four fifths of a page's CPU (bench/bench_api_jobs.py, docs/developer/records/performance.md).
    """
    page, has_more = store.page_json(status=status, group_id=group_id, limit=limit, after=after)
    next_after = json.dumps(page[-1][0]) if has_more else "null"
    records = ",".join(text for _, text in page)
    return f'{{"object":"list","data":[{records}],"has_more":{json.dumps(has_more)},"next_after":{next_after}}}'


router = APIRouter(prefix="/v1", tags=["runs"], dependencies=[Depends(require_token)], responses=ERROR_RESPONSES)


@run_route(router, "POST", response_model=TrainingRun, status_code=status.HTTP_201_CREATED, responses=DRY_RUN_RESPONSES)
def create_run(body: RunCreate, state: ApiState = Depends(get_state), dry_run: DryRun = False) -> Any:
    """Start a training run on a dataset already synced to the data volume (`dry_run`: its plan only)."""
    return plan_run(state, body) if dry_run else start_run(state, body)


@run_route(router, "GET", response_model=RunList)
def list_runs(
    state: ApiState = Depends(get_state),
    status: Status = None,
    group_id: Annotated[str | None, Query(max_length=200, description="Only runs of this sweep group.")] = None,
    limit: Annotated[int, Query(ge=1, le=1000, description="Runs per page.")] = 100,
    after: Annotated[
        str | None,
        Query(pattern=RUN_ID_PATTERN.pattern, description="Start after this run id (the last of the previous page)."),
    ] = None,
) -> Response:
    """Runs, newest first, filtered by status and sweep group, a page at a time."""
    # Encoded here: returned as a model, FastAPI dumps it, checks the dump against
    # `RunList` again and encodes it with `json` (profiled: 2.5x the CPU of one
    # `model_dump_json`). The schema still comes from `response_model`.
    body = list_page_json(state.store, status=status, group_id=group_id, limit=limit, after=after)
    return Response(body, media_type="application/json")


@run_route(router, "GET", "/{run_id}", response_model=TrainingRun)
def get_run(run_id: RunId, state: ApiState = Depends(get_state)) -> TrainingRun:
    """One run's record: status, phase, step, timings, metrics, error text."""
    return state.run(run_id)


@run_route(router, "POST", "/{run_id}/stop", response_model=TrainingRun, status_code=status.HTTP_202_ACCEPTED)
def stop_run(run_id: RunId, state: ApiState = Depends(get_state)) -> TrainingRun:
    """Ask the run to stop gracefully: it saves its adapter and ends `stopped`. Safe to repeat."""
    run = state.run(run_id)
    run.stop("stop requested through the API")
    return run


@run_route(router, "POST", "/{run_id}/cancel", response_model=TrainingRun)
def cancel_run(run_id: RunId, state: ApiState = Depends(get_state)) -> TrainingRun:
    """End the run's job now, without saving; 409 when the run already ended."""
    run = state.run(run_id)
    run.cancel()
    return run


@run_route(router, "POST", "/{run_id}/resume", response_model=TrainingRun, status_code=status.HTTP_202_ACCEPTED)
def resume(
    run_id: RunId, state: ApiState = Depends(get_state), body: Annotated[RunResume | None, Body()] = None
) -> TrainingRun:
    """Continue a stopped, failed or preempted run from its latest checkpoint (409 when it cannot)."""
    return resume_run(state, run_id, body)


@run_route(router, "GET", "/{run_id}/checkpoints", response_model=CheckpointList)
def list_checkpoints(run_id: RunId, state: ApiState = Depends(get_state)) -> CheckpointList:
    """Complete checkpoints on the models volume, oldest first."""
    run = state.run(run_id, reconcile=False)
    return CheckpointList(data=[Checkpoint(step=c.step, path=c.path) for c in run.checkpoints()])


def build_router() -> APIRouter:
    return router

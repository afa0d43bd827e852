"""Evals: store eval examples, run an eval of a trained model, read its report.

Eval examples live on the eval volume in named sets (`sets/<name>/examples.jsonl`). `POST /v1/evals/run` starts the ``eval`` job and
answers at once with the report id; `GET /v1/evals/{report id}` answers 404 until the
job has stored the report (tuned vs base metrics, and with `examples=true` every
example with both answers). All checks (model path, set, dataset) run before the job
starts, through `trainkit_core.evals.client`, the entry the CLI uses too.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Path, Query, status
from pydantic import BaseModel, ConfigDict, Field

from trainkit_api.auth import require_token
from trainkit_api.errors import ERROR_RESPONSES
from trainkit_api.job_results import result_or_job_state
from trainkit_api.state import ApiState, get_state
from trainkit_core.ids import NAME_PATTERN

REPORT_ID = r"^ev-[0-9]{8}-[0-9]{6}-[0-9a-f]{6}$"

SetName = Annotated[str, Path(pattern=NAME_PATTERN.pattern, description="Eval set name.")]
ReportId = Annotated[str, Path(pattern=REPORT_ID, description="An eval report id, `ev-YYYYMMDD-HHMMSS-xxxxxx`.")]


class ExamplesIn(BaseModel):
    """Examples: `{"messages": [..., user, assistant reference]}` or `{"prompt", "completion"}`."""

    model_config = ConfigDict(extra="forbid")

    examples: list[dict[str, Any]] = Field(min_length=1, max_length=100_000)
    replace: bool = Field(False, description="Replace the set instead of adding to it.")


class ExamplesAdded(BaseModel):
    set: str
    added: int
    skipped: int = Field(description="Duplicates of examples already in the set.")
    total: int


class EvalRunIn(BaseModel):
    model_config = ConfigDict(extra="forbid", protected_namespaces=())

    model_path: str = Field(min_length=1, max_length=300, description="`trained/<run id>` or one of its checkpoints.")
    eval_set: str | None = Field(None, pattern=NAME_PATTERN.pattern, description="An eval set stored through the API.")
    dataset: str | None = Field(
        None, pattern=NAME_PATTERN.pattern, description="A dataset's eval split (default: the model's dataset)."
    )
    max_examples: int | None = Field(None, ge=1, le=100_000)
    max_new_tokens: int = Field(64, ge=1, le=4096)
    compare_base: bool = Field(True, description="Also score the base model, side by side.")


class EvalStarted(BaseModel):
    report_id: str
    call_id: str
    status: str = "started"


class EvalReport(BaseModel):
    """The stored report (`status` done), or where its eval job stands (running, failed)."""

    model_config = ConfigDict(extra="allow")

    report_id: str
    status: Literal["running", "done", "failed"] = "done"
    error: str | None = None


#: report id -> the eval job's call id, so a report not written yet can say why.
CALLS_NAMESPACE = "api_evals"


router = APIRouter(prefix="/v1", tags=["evals"], dependencies=[Depends(require_token)], responses=ERROR_RESPONSES)


@router.post("/evals/{set_name}/examples", response_model=ExamplesAdded, status_code=status.HTTP_201_CREATED)
def add_examples(set_name: SetName, body: ExamplesIn, state: ApiState = Depends(get_state)) -> ExamplesAdded:
    """Store eval examples in set `set_name`; every example is checked before the set is written."""
    from trainkit_core.evals.client import add_examples as add

    return ExamplesAdded.model_validate(add(state.provider, set_name, body.examples, replace=body.replace))


@router.post("/evals/run", response_model=EvalStarted, status_code=status.HTTP_202_ACCEPTED)
def run_eval(body: EvalRunIn, state: ApiState = Depends(get_state)) -> EvalStarted:
    """Start an eval of a trained model (tuned vs base); poll `GET /v1/evals/{report_id}`."""
    from trainkit_core.evals.client import start_eval

    report_id, handle = start_eval(state.provider, **body.model_dump())
    state.kv(CALLS_NAMESPACE).put(report_id, handle.call_id)
    return EvalStarted(report_id=report_id, call_id=handle.call_id)


@router.get("/evals/{report_id}", response_model=EvalReport)
def get_report(
    report_id: ReportId,
    state: ApiState = Depends(get_state),
    examples: Annotated[bool, Query(description="Include every example with the tuned and base answers.")] = False,
) -> EvalReport:
    """An eval report: metrics of the tuned and the base model, or `running` / `failed` until it exists."""
    from trainkit_core.evals.client import get_report as read

    answer = result_or_job_state(
        state, CALLS_NAMESPACE, report_id, lambda: read(state.provider, report_id, examples=examples), "eval"
    )
    return EvalReport.model_validate({**answer, "report_id": report_id})


def build_router() -> APIRouter:
    return router

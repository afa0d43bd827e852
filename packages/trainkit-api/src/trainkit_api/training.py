"""Starting and resuming runs: the request bodies, and the calls into core's `submit`.

`POST /v1/runs` takes a `TrainConfig` (the same fields as `trainkit train`) plus
`metadata` (a sweep's `group_id`, say); the dataset must be on the data volume already
(`trainkit sync`), or in the server's local datasets folder, which is synced first.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Query
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, field_validator

from trainkit_api.state import ApiState
from trainkit_core.errors import UsageError
from trainkit_core.ids import NAME_PATTERN
from trainkit_core.runs.metadata import MAX_BYTES, MAX_DEPTH, check_metadata
from trainkit_core.runs.training_run import TrainingRun
from trainkit_core.training.config import TrainConfig, check_finite
from trainkit_core.training.plan import Plan


class RunCreate(TrainConfig):
    """A training run to start: a `TrainConfig`, plus `metadata` stored on the run."""

    dataset: str = Field(pattern=NAME_PATTERN.pattern, description="Name of the dataset (synced to the data volume).")
    metadata: dict[str, Any] = Field(
        default_factory=dict,
        description=(
            f"Stored on the run; `group_id` groups a sweep. A JSON object of at most {MAX_BYTES} bytes, "
            f"nested at most {MAX_DEPTH} levels, without NaN or infinities."
        ),
    )
    strict_dataset: bool = Field(
        False, description="Refuse a dataset with warnings too (unknown keys, duplicates, lengths), like `--strict`."
    )
    max_cost_usd: float | None = Field(
        None, gt=0, le=1e9, description="Stop gracefully (adapter saved, `stopped`) once the run has cost this much."
    )
    max_duration_s: float | None = Field(
        None, gt=0, le=1e9, description="Stop gracefully (adapter saved, `stopped`) after this much job time."
    )

    @field_validator("max_cost_usd", "max_duration_s", mode="before")
    @classmethod
    def _finite_limits(cls, value: Any) -> Any:
        return check_finite(value)  # NaN is "not a number", not "should be less than or equal to"

    @field_validator("metadata")
    @classmethod
    def _metadata(cls, value: dict[str, Any]) -> dict[str, Any]:
        try:
            return check_metadata(value)
        except UsageError as exc:
            raise ValueError(exc.message) from None


#: Fields of `RunCreate` that are not the run's `TrainConfig`.
NOT_CONFIG = {"metadata", "strict_dataset", "max_cost_usd", "max_duration_s"}


class RunResume(BaseModel):
    model_config = ConfigDict(extra="forbid")

    steps: int | None = Field(None, ge=1, le=1_000_000, description="Train to this step (default: the run's own).")
    processes: int | None = Field(
        None, ge=1, le=64, description="Go on with this many CPU processes (default: the run's)."
    )
    gpus: int | None = Field(None, ge=1, le=64, description="Go on with this many GPUs (default: the run's).")


def start_run(state: ApiState, body: RunCreate) -> TrainingRun:
    from trainkit_core.training.submit import start_run

    config = TrainConfig.model_validate(body.model_dump(exclude=NOT_CONFIG))
    budget = {"max_cost_usd": body.max_cost_usd, "max_duration_s": body.max_duration_s}
    return start_run(state.provider, config, metadata=body.metadata, strict_dataset=body.strict_dataset, budget=budget)


DryRun = Annotated[
    bool,
    Query(description="Start nothing: answer 200 with the run's plan (examples, epochs, steps, tokens, time, cost)."),
]


DRY_RUN_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"model": Plan, "description": "With `dry_run`: the plan; nothing was started."}
}


def plan_run(state: ApiState, body: RunCreate) -> JSONResponse:
    """The plan of the run `body` asks for (`trainkit_core.training.plan`), tokens counted exactly where possible.

    The start's own checks (`check_request`, with the same `strict_dataset` and budget), so a
    dry run answers 200 only for a run that `start_run` would start.
    """
    from trainkit_core.training.plan import make_plan
    from trainkit_core.training.submit import check_request

    config = TrainConfig.model_validate(body.model_dump(exclude=NOT_CONFIG))
    budget = {"max_cost_usd": body.max_cost_usd, "max_duration_s": body.max_duration_s}
    request = check_request(state.provider, config, strict=body.strict_dataset, budget=budget)
    plan = make_plan(state.provider, request, exact=True)
    return JSONResponse(plan.model_dump(mode="json"), status_code=200)


def resume_run(state: ApiState, run_id: str, body: RunResume | None) -> TrainingRun:
    from trainkit_core.training.submit import resume_run

    if body is None:
        return resume_run(state.provider, run_id)
    return resume_run(state.provider, run_id, steps=body.steps, processes=body.processes, gpus=body.gpus)

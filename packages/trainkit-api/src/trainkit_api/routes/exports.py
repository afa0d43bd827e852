"""Merged exports: `POST /v1/exports` starts the ``export`` job, `GET /v1/exports/{name}` reads it.

The same entry as `trainkit export` (`trainkit_core.export.merged.start_export`): the model
path is checked before a job starts; the merge runs beside the models volume and
writes ``exports/<name>``, which `GET` reports once its info file is written (the last
file), `running` before that and `failed` with the job's error when it died. The
files themselves are fetched with `trainkit models download exports/<name>`.
Handlers are module-level functions; `build_router` only collects them.
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Path, status
from pydantic import BaseModel, ConfigDict, Field

from trainkit_api.auth import require_token
from trainkit_api.errors import ERROR_RESPONSES
from trainkit_api.job_results import result_or_job_state
from trainkit_api.state import ApiState, get_state

EXPORT_NAME = r"^run-[0-9]{8}-[0-9]{6}-[0-9a-f]{6}(-step[0-9]{8})?$"
ExportName = Annotated[
    str, Path(pattern=EXPORT_NAME, description="`<run id>` or `<run id>-step<8 digits>`: the folder under exports/.")
]

#: export path -> the export job's call id, so an export not written yet can say why.
CALLS_NAMESPACE = "api_exports"


class ExportIn(BaseModel):
    model_config = ConfigDict(extra="forbid", protected_namespaces=())

    model_path: str = Field(min_length=1, max_length=300, description="`trained/<run id>` or one of its checkpoints.")
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        "auto", description="Weights' dtype; auto keeps the base's (16-bit for a 4-bit base)."
    )
    gguf: (
        Literal[
            "f32",
            "f16",
            "q8_0",
            "q5_1",
            "q5_0",
            "q4_1",
            "q4_0",
            "q2_k",
            "q3_k_s",
            "q3_k_m",
            "q3_k_l",
            "q4_k_s",
            "q4_k_m",
            "q5_k_s",
            "q5_k_m",
            "q6_k",
        ]
        | None
    ) = Field(None, description="Also write a GGUF of this type and an Ollama Modelfile, checked in llama.cpp.")
    dataset: str | None = Field(
        None, max_length=200, description="The GGUF is checked on this dataset's eval prompts (default: the run's)."
    )


class ExportStarted(BaseModel):
    export_path: str
    call_id: str
    status: str = "started"


class ExportOut(BaseModel):
    """The export's `trainkit_export.json` (`status` done), or where its job stands."""

    model_config = ConfigDict(extra="allow")

    export_path: str
    status: Literal["running", "done", "failed"] = "done"
    error: str | None = None


def start_export(body: ExportIn, state: ApiState = Depends(get_state)) -> ExportStarted:
    """Merge a trained model into its base (full safetensors weights) on the models volume."""
    from trainkit_core.export.merged import start_export as start

    path, handle = start(state.provider, body.model_path, dtype=body.dtype, gguf=body.gguf, dataset=body.dataset)
    state.kv(CALLS_NAMESPACE).put(path, handle.call_id)
    return ExportStarted(export_path=path, call_id=handle.call_id)


def get_export(name: ExportName, state: ApiState = Depends(get_state)) -> ExportOut:
    """A finished export's description, or `running` / `failed` while it has none."""
    from trainkit_core.export.merged import read_export_info

    path = f"exports/{name}"
    volume = state.provider.volume("models")
    call_id = state.kv(CALLS_NAMESPACE).get(path)
    if call_id is not None:
        # The latest export job started here speaks first: an older export still at the path
        # is not this job's result while it runs, nor after it failed.
        call = state.provider.call(call_id).status()
        if not call.done:
            return ExportOut(export_path=path, status="running")
        if call.state != "succeeded":
            return ExportOut(
                export_path=path, status="failed", error=call.error or f"the export job ended {call.state}"
            )
    answer = result_or_job_state(state, CALLS_NAMESPACE, path, lambda: read_export_info(volume, path), "export")
    return ExportOut.model_validate({**answer, "export_path": path})


def build_router() -> APIRouter:
    router = APIRouter(prefix="/v1", tags=["exports"], dependencies=[Depends(require_token)], responses=ERROR_RESPONSES)
    router.add_api_route(
        "/exports", start_export, methods=["POST"], response_model=ExportStarted, status_code=status.HTTP_202_ACCEPTED
    )
    router.add_api_route("/exports/{name}", get_export, methods=["GET"], response_model=ExportOut)
    return router

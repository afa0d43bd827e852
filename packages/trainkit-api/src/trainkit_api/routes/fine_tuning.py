"""OpenAI's `files` and `fine_tuning.jobs` routes, as the `openai` SDK calls them (`trainkit_api.fine_tuning`).

Bodies are read here rather than declared, so that a malformed one is answered 400 with
the field in `param`, as OpenAI answers, instead of FastAPI's 422. Lists are OpenAI's
cursor pages (`data`, `has_more`, and `after` = the last id seen), which the SDK's
auto-pagination follows.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool

from trainkit_api.auth import require_token
from trainkit_api.errors import ERROR_RESPONSES, RequestError
from trainkit_api.fine_tuning import files, jobs, objects
from trainkit_api.state import ApiState, get_state
from trainkit_core.errors import ConflictError, NotFoundError

router = APIRouter(
    prefix="/v1", tags=["fine-tuning (OpenAI)"], dependencies=[Depends(require_token)], responses=ERROR_RESPONSES
)

JobId = Annotated[str, Path(max_length=100, description="The job id: the run id of the job's run.")]
FileId = Annotated[str, Path(max_length=100)]
Limit = Annotated[int, Query(ge=1, le=10_000)]


def _page(data: list[dict[str, Any]], has_more: bool) -> dict[str, Any]:
    return {
        "object": "list",
        "data": data,
        "has_more": has_more,
        "first_id": data[0]["id"] if data else None,
        "last_id": data[-1]["id"] if data else None,
    }


def _after(items: list[dict[str, Any]], after: str | None, limit: int) -> dict[str, Any]:
    """The page of `limit` items that follows the item with id `after` (an unknown `after`: empty)."""
    start = 0
    if after is not None:
        ids = [item["id"] for item in items]
        start = ids.index(after) + 1 if after in ids else len(items)
    page = items[start : start + limit]
    return _page(page, start + limit < len(items))


# ----------------------------------------------------------------------------- files


@router.post("/files")
async def upload_file(request: Request, state: ApiState = Depends(get_state)) -> JSONResponse:
    """Upload a fine-tuning file (multipart: `file`, `purpose="fine-tune"`); checked line by line first."""
    try:
        form = await request.form(max_files=1, max_fields=10)
    except Exception as exc:  # starlette's parser errors carry no common base worth naming
        raise RequestError(f"the body is not a multipart form: {exc}", param="file") from None
    upload, purpose = form.get("file"), form.get("purpose")
    if upload is None or isinstance(upload, str):
        raise RequestError("no file in the form", param="file")
    if not isinstance(purpose, str):
        raise RequestError("purpose is required", param="purpose")
    content = await upload.read()
    filename = (upload.filename or "")[:255]  # echoed back as given, within reason
    await form.close()
    result = await run_in_threadpool(files.upload, state, content, filename, purpose)
    return JSONResponse(result)


@router.get("/files")
def list_files(
    state: ApiState = Depends(get_state),
    purpose: str | None = None,
    limit: Limit = 10_000,
    order: Annotated[str, Query(pattern="^(asc|desc)$")] = "desc",
    after: str | None = None,
) -> dict[str, Any]:
    """Uploaded files, newest first (`order=asc`: oldest first)."""
    records = [files.public(r) for r in files.listing(state) if purpose in (None, r["purpose"])]
    if order == "asc":
        records.reverse()
    return _after(records, after, limit)


def _results_run(state: ApiState, file_id: str) -> Any:
    run_id = file_id.removeprefix(files.RESULTS_PREFIX)
    jobs.record_of(state, run_id)
    return state.run(run_id)


@router.get("/files/{file_id}")
def retrieve_file(file_id: FileId, state: ApiState = Depends(get_state)) -> dict[str, Any]:
    if file_id.startswith(files.RESULTS_PREFIX):
        return objects.results_file(_results_run(state, file_id))
    return files.public(files.get(state, file_id))


@router.get("/files/{file_id}/content")
def file_content(file_id: FileId, state: ApiState = Depends(get_state)) -> Response:
    """The file's bytes as uploaded; a job's results file is its metrics as CSV."""
    if file_id.startswith(files.RESULTS_PREFIX):
        return Response(objects.results_csv(_results_run(state, file_id)), media_type="text/csv")
    return Response(files.content(state, file_id), media_type="application/jsonl")


@router.delete("/files/{file_id}")
def delete_file(file_id: FileId, state: ApiState = Depends(get_state)) -> dict[str, Any]:
    """Remove the file and its dataset; 409 while a job that has not ended reads it."""
    using = []
    for run_id, record in jobs.all_records(state):
        if file_id in (record.get("training_file"), record.get("validation_file")):
            try:
                if not state.run(run_id).ended():
                    using.append(run_id)
            except NotFoundError:
                continue
    return files.delete(state, file_id, using)


# ----------------------------------------------------------------------------- jobs


@router.post("/fine_tuning/jobs")
async def create_job(request: Request, state: ApiState = Depends(get_state)) -> JSONResponse:
    """Start a job on uploaded files; the job's id is its trainkit run id."""
    body = await _json_body(request)
    run, record = await run_in_threadpool(jobs.create, state, body)
    return JSONResponse(objects.job_object(run, record))


def _metadata_filter(request: Request) -> dict[str, str]:
    """`metadata[key]=value` query parameters, as the SDK sends a metadata filter."""
    found = {}
    for key, value in request.query_params.multi_items():
        if key.startswith("metadata[") and key.endswith("]"):
            found[key[len("metadata[") : -1]] = value
    return found


@router.get("/fine_tuning/jobs")
def list_jobs(
    request: Request, state: ApiState = Depends(get_state), after: str | None = None, limit: Limit = 20
) -> dict[str, Any]:
    """Jobs, newest first; `metadata[key]=value` keeps those whose metadata has that pair.

    Only the page is read: the ids come in order from the store's keys, and records and runs
    are read from the cursor on until `limit` jobs (and one more, for `has_more`) are found.
    """
    wanted = _metadata_filter(request)
    ids = jobs.ids_newest_first(state)
    start = 0 if after is None else (ids.index(after) + 1 if after in ids else len(ids))
    found: list[dict[str, Any]] = []
    for run_id in ids[start:]:
        record = jobs.record_or_none(state, run_id)
        metadata = (record or {}).get("metadata") or {}
        if record is None or any(metadata.get(key) != value for key, value in wanted.items()):
            continue
        try:
            found.append(objects.job_object(state.run(run_id), record))
        except NotFoundError:
            continue  # its run record was removed (`trainkit gc`)
        if len(found) > limit:
            break
    return _page(found[:limit], len(found) > limit)


def _job(state: ApiState, job_id: str) -> tuple[Any, dict[str, Any]]:
    record = jobs.record_of(state, job_id)
    return state.run(job_id), record


@router.get("/fine_tuning/jobs/{job_id}")
def retrieve_job(job_id: JobId, state: ApiState = Depends(get_state)) -> dict[str, Any]:
    return objects.job_object(*_job(state, job_id))


@router.post("/fine_tuning/jobs/{job_id}/cancel")
def cancel_job(job_id: JobId, state: ApiState = Depends(get_state)) -> dict[str, Any]:
    """End the job now, without saving; 409 once it has ended."""
    run, record = _job(state, job_id)
    run.cancel()
    return objects.job_object(run, record)


@router.post("/fine_tuning/jobs/{job_id}/pause")
def pause_job(job_id: JobId, state: ApiState = Depends(get_state)) -> dict[str, Any]:
    """Stop gracefully: the run saves a checkpoint and ends `paused`; `resume` continues it."""
    run, record = _job(state, job_id)
    if run.ended():
        raise ConflictError(f"job {job_id} is {objects.status_of(run)}: only a queued or running job pauses")
    run.stop("paused through the fine-tuning API")
    return objects.job_object(run, record)


@router.post("/fine_tuning/jobs/{job_id}/resume")
def resume_job(job_id: JobId, state: ApiState = Depends(get_state)) -> dict[str, Any]:
    """Continue a paused job from its latest checkpoint."""
    from trainkit_core.training.submit import resume_run

    run, record = _job(state, job_id)
    if objects.status_of(run) != "paused":
        raise ConflictError(f"job {job_id} is {objects.status_of(run)}: only a paused job resumes")
    return objects.job_object(resume_run(state.provider, job_id), record)


@router.get("/fine_tuning/jobs/{job_id}/events")
def list_events(
    job_id: JobId, state: ApiState = Depends(get_state), after: str | None = None, limit: Limit = 20
) -> dict[str, Any]:
    """The job's events, newest first; `after` an event id: the events before it."""
    run, _ = _job(state, job_id)
    data, has_more = objects.events_page(run, after=after, limit=limit)
    return _page(data, has_more)


@router.get("/fine_tuning/jobs/{job_id}/checkpoints")
def list_checkpoints(
    job_id: JobId, state: ApiState = Depends(get_state), after: str | None = None, limit: Limit = 10
) -> dict[str, Any]:
    """The job's complete checkpoints, newest first, each usable as a chat completion's model."""
    run, record = _job(state, job_id)
    return _after(objects.checkpoint_objects(run, record), after, limit)


# ----------------------------------------------------------------------------- graders


async def _json_body(request: Request) -> dict[str, Any]:
    try:
        body = json.loads(await request.body())
    except ValueError:
        raise RequestError("the body is not JSON") from None
    if not isinstance(body, dict):
        raise RequestError("the body must be a JSON object")
    return body


@router.post("/fine_tuning/alpha/graders/validate")
async def validate_grader(request: Request, state: ApiState = Depends(get_state)) -> dict[str, Any]:
    """Check a grader as a reinforcement job would (`client.fine_tuning.alpha.graders.validate`)."""
    return {"grader": jobs.grader_of(state, (await _json_body(request)).get("grader"), "grader")}


@router.post("/fine_tuning/alpha/graders/run")
async def run_grader(request: Request, state: ApiState = Depends(get_state)) -> dict[str, Any]:
    """Score one `model_sample` for one dataset `item` (`client.fine_tuning.alpha.graders.run`).

    A field the item lacks is OpenAI's `invalid_variable_error`, a formula that fails its
    `formula_parse_error`: the reward is then 0, as OpenAI reports it. A python grader is
    refused here: the caller's code runs only inside a training job.
    """
    import time

    from trainkit_core.rewards.openai_graders import scores

    body = await _json_body(request)
    grader = jobs.grader_of(state, body.get("grader"), "grader")
    if grader["type"] == "python":
        raise RequestError(
            "a python grader runs only inside a training job, never in the API server",
            param="grader.type",
            code="invalid_grader",
        )
    sample, item = body.get("model_sample"), body.get("item") or {}
    if not isinstance(sample, str):
        raise RequestError("model_sample must be a string", param="model_sample")
    if not isinstance(item, dict):
        raise RequestError("item must be a JSON object", param="item")
    errors = dict.fromkeys(GRADER_ERRORS, False)
    started = time.perf_counter()
    reward, subs = 0.0, dict[str, float]()
    try:
        reward, subs = scores(grader, sample, item)
    except KeyError:
        errors["invalid_variable_error"] = True
    except ArithmeticError:
        errors["formula_parse_error"] = True
    metadata = {
        "name": grader.get("name") or "",
        "type": grader["type"],
        "errors": errors,
        "execution_time": time.perf_counter() - started,
        "scores": subs,
        "token_usage": None,
        "sampled_model_name": None,
    }
    return {"reward": reward, "metadata": metadata, "sub_rewards": subs, "model_grader_token_usage_per_model": {}}


#: The error flags of OpenAI's grader-run metadata.
GRADER_ERRORS = (
    "formula_parse_error",
    "invalid_variable_error",
    "model_grader_parse_error",
    "model_grader_refusal_error",
    "model_grader_server_error",
    "other_error",
    "python_grader_runtime_error",
    "python_grader_server_error",
    "sample_parse_error",
    "truncated_observation_error",
    "unresponsive_reward_error",
)


def build_router() -> APIRouter:
    return router

"""Fine-tuning jobs: OpenAI's request mapped onto a trainkit run.

A job is a run: its id is the run id, so `trainkit runs show <job id>` and the dashboard
show the same thing the SDK does. What OpenAI's request said (the files, the model name,
the suffix, the method and its hyperparameters, the metadata) is kept beside the run in
the key-value store, because OpenAI's objects answer with it.

The mapping, recorded on the job:

- `model`: a preset (`tiny`, `4b`, ...), a Hugging Face id (`org/name`), or an `ft:` name
  of an earlier job (trained on, as `--from` does);
- `method.type`: `supervised` -> sft, `dpo` -> dpo, `reinforcement` -> grpo;
- `n_epochs` -> epochs, `batch_size` -> the examples per optimizer step (batch size with
  no accumulation), `learning_rate_multiplier` -> that multiple of the preset's learning
  rate for the method, `beta` -> DPO's beta; `"auto"` leaves trainkit's default;
- `grader` -> the same grader, run by trainkit (`trainkit_core.rewards.openai_graders`:
  `string_check`, `text_similarity`, `multi`; the others are refused with the reason);
- a training file of fewer than 10 examples is refused, as OpenAI refuses it;
- hyperparameters trainkit has no counterpart for (`compute_multiplier`, `eval_interval`,
  `eval_samples`, `reasoning_effort`) are accepted as `"auto"` and refused otherwise, so a
  job never silently ignores a setting.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from trainkit_api.errors import RequestError, validation_message
from trainkit_api.fine_tuning import files, names
from trainkit_api.state import ApiState
from trainkit_core.errors import NotFoundError, UsageError
from trainkit_core.runs.training_run import TrainingRun

#: The key-value namespace of the jobs' OpenAI requests (key: the run id).
NAMESPACE = "openai-jobs"
#: OpenAI's method types and the trainkit methods they run.
METHODS = {"supervised": "sft", "dpo": "dpo", "reinforcement": "grpo"}
#: OpenAI's metadata bounds: 16 pairs, keys of 64 characters, values of 512.
MAX_METADATA = 16

Auto = Literal["auto"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Hyperparameters(_Strict):
    batch_size: Auto | int | None = Field(None, ge=1, le=4096)
    learning_rate_multiplier: Auto | float | None = Field(None, gt=0, le=1000)
    n_epochs: Auto | int | None = Field(None, ge=1, le=1000)


class DpoHyperparameters(Hyperparameters):
    beta: Auto | float | None = Field(None, gt=0, le=100)


class ReinforcementHyperparameters(Hyperparameters):
    compute_multiplier: Auto | float | None = None
    eval_interval: Auto | int | None = None
    eval_samples: Auto | int | None = None
    reasoning_effort: str | None = None


class Supervised(_Strict):
    hyperparameters: Hyperparameters | None = None


class Dpo(_Strict):
    hyperparameters: DpoHyperparameters | None = None


class Reinforcement(_Strict):
    grader: dict[str, Any]
    hyperparameters: ReinforcementHyperparameters | None = None


class Method(_Strict):
    type: Literal["supervised", "dpo", "reinforcement"]
    supervised: Supervised | None = None
    dpo: Dpo | None = None
    reinforcement: Reinforcement | None = None


class JobCreate(_Strict):
    """The body of `client.fine_tuning.jobs.create`."""

    model: str = Field(min_length=1, max_length=300)
    training_file: str = Field(min_length=1, max_length=100)
    validation_file: str | None = Field(None, max_length=100)
    suffix: str | None = Field(None, min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")
    seed: int | None = Field(None, ge=0, le=2**31 - 1)
    metadata: dict[str, str] | None = None
    method: Method | None = None
    hyperparameters: Hyperparameters | None = Field(None, description="Deprecated by OpenAI for `method`.")
    integrations: list[dict[str, Any]] | None = None


def parse_body(body: Any) -> JobCreate:
    """The request, or a 400 naming the field (OpenAI answers 400, not 422, to a bad body)."""
    try:
        job = JobCreate.model_validate(body)
    except ValidationError as exc:
        message, param = validation_message([{**e, "loc": ("body", *e["loc"])} for e in exc.errors()])
        raise RequestError(message, param=param, code="invalid_request") from None
    if job.integrations:
        raise RequestError(
            "integrations are not supported: trainkit reports to TensorBoard or W&B with its own setting",
            param="integrations",
            hint="leave integrations out; set report_to on the server (TRAINKIT_REPORT_TO) for W&B",
        )
    metadata = job.metadata or {}
    if len(metadata) > MAX_METADATA or any(len(k) > 64 or len(v) > 512 for k, v in metadata.items()):
        raise RequestError(
            f"metadata holds at most {MAX_METADATA} pairs, keys of at most 64 characters and values of 512",
            param="metadata",
        )
    if job.method is not None and job.hyperparameters is not None:
        raise RequestError("give hyperparameters inside method, not both", param="hyperparameters")
    return job


# ----------------------------------------------------------------------------- mapping


def method_of(job: JobCreate) -> tuple[str, Hyperparameters]:
    """(OpenAI's method type, its hyperparameters; defaults when none were given)."""
    method = job.method or Method(type="supervised", supervised=Supervised(hyperparameters=job.hyperparameters))
    section = getattr(method, method.type)
    if section is None and method.type == "reinforcement":
        raise RequestError("a reinforcement job needs method.reinforcement.grader", param="method.reinforcement")
    hyper = section.hyperparameters if section is not None else None
    default = {"dpo": DpoHyperparameters, "reinforcement": ReinforcementHyperparameters}.get(
        method.type, Hyperparameters
    )
    return method.type, hyper or default()


def _set(value: Any) -> bool:
    return value is not None and value != "auto"


def _unsupported_hyperparameters(kind: str, hyper: Hyperparameters) -> None:
    for name in ("compute_multiplier", "eval_interval", "eval_samples"):
        if _set(getattr(hyper, name, None)):
            raise RequestError(
                f'{name} has no counterpart in trainkit\'s GRPO; leave it "auto"',
                param=f"method.{kind}.hyperparameters.{name}",
            )
    effort = getattr(hyper, "reasoning_effort", None)
    if effort not in (None, "default"):
        raise RequestError(
            "reasoning_effort applies to OpenAI's reasoning models; leave it out",
            param=f"method.{kind}.hyperparameters.reasoning_effort",
        )


def grader_of(state: ApiState, grader: Any, where: str = "method.reinforcement.grader") -> dict[str, Any]:
    """A grader, checked (`trainkit_core.rewards.openai_graders`); a 400 naming its field.

    A python grader is code the caller sends: refused unless the server allows them.
    """
    from trainkit_core.rewards.openai_graders import GraderError, check

    try:
        checked = check(grader, where)
    except GraderError as exc:
        raise RequestError(exc.message, param=exc.param, code="invalid_grader") from None
    if checked["type"] == "python" and not state.settings.compute.allow_python_graders:
        raise RequestError(
            "python graders run code the caller sends; this server does not allow them",
            param=f"{where}.type",
            code="invalid_grader",
            hint="the server's operator sets TRAINKIT_ALLOW_PYTHON_GRADERS=1 to allow them (they run only in the training job)",
        )
    return checked


def target_of(state: ApiState, model: str) -> dict[str, Any]:
    """The `TrainConfig` fields that choose the base model of `model`; a 400 listing the presets when unknown."""
    from trainkit_core.models.presets import PRESETS

    if model in PRESETS:
        return {"model_size": model}
    if model.startswith(names.PREFIX):
        try:
            return {"from_model": fine_tuned_model_path(state, model)}
        except NotFoundError as exc:
            raise RequestError(exc.message, param="model", code="model_not_found") from None
    if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*", model):
        return {"base_model": model}
    raise RequestError(
        f"model {model[:120]!r} is not available: give a preset ({', '.join(PRESETS)}), a Hugging Face id "
        "(org/name) or the fine_tuned_model of an earlier job",
        param="model",
        code="model_not_available",
    )


def job_dataset(state: ApiState, training: dict[str, Any], validation: dict[str, Any] | None) -> str:
    """The dataset a job trains on: the training file's own, or one joining it and the validation file."""
    if validation is None:
        return str(training["dataset"])
    if validation["format"] != training["format"]:
        raise RequestError(
            f"validation_file {validation['id']} holds {validation['format']} data, the training file "
            f"{training['format']} data",
            param="validation_file",
            code="invalid_file",
        )
    parts = {"train.jsonl": files.content(state, training["id"]), "eval.jsonl": files.content(state, validation["id"])}
    digest = hashlib.sha256(b"\0".join(hashlib.sha256(data).digest() for data in parts.values())).hexdigest()
    name = f"ftjob-{digest[:24]}"
    files.sync_folder(state, name, parts, training["format"], eval_file="eval.jsonl")
    return name


def config_fields(state: ApiState, job: JobCreate) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the run's `TrainConfig` fields, the job's record) for request `job`; 400s name the field at fault."""
    from trainkit_core.datasets.openai_files import MIN_EXAMPLES
    from trainkit_core.training.config import TrainConfig
    from trainkit_core.training.methods import get_method

    kind, hyper = method_of(job)
    _unsupported_hyperparameters(kind, hyper)
    training = files.get(state, job.training_file, param="training_file")
    validation = files.get(state, job.validation_file, param="validation_file") if job.validation_file else None
    method = METHODS[kind]
    grader = None
    if kind == "reinforcement":
        assert job.method is not None and job.method.reinforcement is not None
        grader = grader_of(state, job.method.reinforcement.grader)
    wanted = get_method(method).formats
    if training["format"] not in wanted:
        raise RequestError(
            f"training_file {training['id']} holds {training['format']} data; a {kind} job trains on "
            f"{' or '.join(wanted)} data",
            param="training_file",
            code="invalid_file",
        )
    examples = training.get("examples")
    if isinstance(examples, int) and examples < MIN_EXAMPLES:
        raise RequestError(
            f"training_file {training['id']} has {examples} examples; a job needs at least {MIN_EXAMPLES}, "
            "as OpenAI's do",
            param="training_file",
            code="invalid_file",
        )
    fields: dict[str, Any] = {**target_of(state, job.model), "method": method}
    if job.seed is not None:
        fields["seed"] = job.seed
    if _set(hyper.n_epochs):
        fields["epochs"] = hyper.n_epochs
    if _set(hyper.batch_size):
        fields["batch_size"], fields["grad_accum"] = hyper.batch_size, 1
    if _set(getattr(hyper, "beta", None)):
        fields["dpo_beta"] = hyper.beta  # type: ignore[attr-defined]
    if grader is not None:
        fields["openai_graders"] = [grader]
    fields["dataset"] = job_dataset(state, training, validation)
    base = TrainConfig.parse(fields).resolve().learning_rate or 0.0  # the preset's, for the method
    if _set(hyper.learning_rate_multiplier):
        rate = base * float(hyper.learning_rate_multiplier)  # type: ignore[arg-type]
        if not 0 < rate <= 1:
            raise RequestError(
                f"learning_rate_multiplier {hyper.learning_rate_multiplier} gives a learning rate of {rate:g}, "
                "outside (0, 1]",
                param=f"method.{kind}.hyperparameters.learning_rate_multiplier",
            )
        fields["learning_rate"] = rate
    record = {
        "model": job.model,
        "training_file": training["id"],
        "validation_file": validation["id"] if validation else None,
        "suffix": job.suffix,
        "seed": job.seed,
        "metadata": job.metadata,
        "method": {"type": kind, "hyperparameters": hyper.model_dump(exclude_none=True)},
        "grader": job.method.reinforcement.grader if job.method and job.method.reinforcement else None,
        "base_learning_rate": base,
    }
    return fields, record


def create(state: ApiState, body: Any) -> tuple[TrainingRun, dict[str, Any]]:
    """Start the run `body` asks for; (the run, the job's record)."""
    from trainkit_core.errors import TrainkitError
    from trainkit_core.training.config import TrainConfig
    from trainkit_core.training.plan import make_plan
    from trainkit_core.training.submit import check_request, start_run

    job = parse_body(body)
    fields, record = config_fields(state, job)
    config = TrainConfig.parse(fields)
    try:
        request = check_request(state.provider, config)
        try:  # the plan's time, for `estimated_finish` before the first step is measured
            record["estimated_seconds"] = make_plan(state.provider, request, exact=False).estimated_seconds
        except TrainkitError:
            record["estimated_seconds"] = None
        run = start_run(state.provider, request, metadata=dict(job.metadata or {}))
    except UsageError as exc:
        if isinstance(exc, RequestError):
            raise
        raise RequestError(exc.message, hint=exc.hint) from None
    record["fine_tuned_model"] = names.model_name(names.base_of(job.model), job.suffix, run.id)
    state.kv(NAMESPACE).put(run.id, record)
    return run, record


def record_of(state: ApiState, job_id: str) -> dict[str, Any]:
    """The job's request record; `NotFoundError` for a run that no fine-tuning job started."""
    from trainkit_core.ids import RUN_ID_PATTERN

    record = state.kv(NAMESPACE).get(job_id) if RUN_ID_PATTERN.fullmatch(job_id) else None
    if not isinstance(record, dict):
        raise NotFoundError(
            f"no fine-tuning job {job_id[:60]!r}",
            hint="GET /v1/fine_tuning/jobs lists them; runs started otherwise are under /v1/runs",
        )
    return record


def all_records(state: ApiState) -> list[tuple[str, dict[str, Any]]]:
    return [(key, value) for key, value in state.kv(NAMESPACE).items() if isinstance(value, dict)]


def ids_newest_first(state: ApiState) -> list[str]:
    """Every job's id, newest first, read from the store's keys alone (no record read).

    A job id is its run id, stamped to the second it was created (`ids.new_run_id`, the
    run's `created_at`), so this is the order of `created_at`, ties by id.
    """
    ids = sorted(state.kv(NAMESPACE).keys())
    return sorted(ids, key=lambda job_id: job_id[len("run-") : len("run-YYYYMMDD-HHMMSS")], reverse=True)


def record_or_none(state: ApiState, job_id: str) -> dict[str, Any] | None:
    record = state.kv(NAMESPACE).get(job_id)
    return record if isinstance(record, dict) else None


class ModelNotFoundError(NotFoundError):
    """A 404 with OpenAI's `code` for a model name no job made."""

    code = "model_not_found"


def fine_tuned_model_path(state: ApiState, name: str) -> str:
    """The model path an `ft:` name stands for; `NotFoundError` (404, `model_not_found`) when no job made it."""
    parsed = names.parse(name)
    record = state.kv(NAMESPACE).get(parsed[1]) if parsed is not None else None
    if parsed is None or not isinstance(record, dict) or record.get("fine_tuned_model") != parsed[0]:
        raise ModelNotFoundError(
            f"model {name[:120]!r}: no fine-tuning job made it", hint="GET /v1/fine_tuning/jobs lists the jobs"
        )
    return names.model_path(parsed[1], parsed[2])

"""Starting and resuming training runs from the client side (CLI, API, Python).

`start_run(provider, config)` checks everything it can before anything is written:
the config, a base model folder (`trainkit_core.models.base_models.check_source`), that the
provider can run the `train` job, and the dataset (validated and
synced to the data volume only when its content changed, or already on the volume
when there is no local copy). Only then does it create the run record (`pending`) and
spawn the `train` job; a spawn that fails leaves the record `failed` with the reason.

`resume_run(provider, run_id, steps=None)` continues an ended run (failed, stopped,
preempted, or succeeded with a larger step count) from its latest checkpoint.
No heavy imports: submitting never imports torch.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from trainkit_core.errors import ConflictError, NotFoundError, TrainkitError, UsageError
from trainkit_core.ids import new_run_id
from trainkit_core.runs.pricing import price_for_run
from trainkit_core.runs.record_writes import APP_FIELDS
from trainkit_core.runs.statuses import UNFINISHED
from trainkit_core.runs.training_run import RunStore, TrainingRun
from trainkit_core.training.config import TrainConfig
from trainkit_core.training.methods import METHODS, get_method

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CheckedRequest:
    """A training request after every check a start makes before it writes anything.

    Made once by `check_request`; the plan (CLI ``--plan``, the API's dry run) and the
    start (`start_run`) both take it, so a plan is never shown for a run the start would
    refuse, and the dataset is looked up once.
    """

    config: TrainConfig  # resolved against its preset and method
    dataset_format: str
    price: dict[str, Any]  # what the run records (`trainkit_core.runs.pricing`)
    budget: dict[str, float]  # the checked limits (`trainkit_core.training.budget`)
    local: Any = None  # the local copy (`LocalDataset`), None when only the data volume has it
    synced_hash: str | None = None  # the volume's version, when there is no local copy


def _refuse_python_graders(provider: Any, config: TrainConfig) -> None:
    """A python grader is code the caller sent: run only where the server's settings allow it."""
    from trainkit_core.rewards.openai_graders import python_graders

    found = python_graders(config.openai_graders)
    if found and not provider.settings.compute.allow_python_graders:
        raise UsageError(
            f"openai_graders[{found[0]}] is a python grader, code that the training job would run; "
            "this server does not allow them",
            hint="the server's operator sets TRAINKIT_ALLOW_PYTHON_GRADERS=1 to allow them",
        )


def check_request(
    provider: Any,
    config: TrainConfig | dict[str, Any],
    *,
    strict: bool = False,
    budget: dict[str, Any] | None = None,
) -> CheckedRequest:
    """Validate a training request once: the config, the base model, the budget, the dataset, the method.

    The dataset must exist (locally, else synced to the data volume) before its format is
    compared with the method's, so a missing dataset is reported as missing whatever
    `--method` says. Images are refused here for the text-only `tiny` and for DPO/GRPO.
    A dataset that is only on the volume is validated here (the start syncs a local copy,
    which validates it).
    """
    from pathlib import Path

    from trainkit_core.datasets.local import find_local
    from trainkit_core.datasets.sync import synced_hash
    from trainkit_core.datasets.validate import DatasetInvalidError, LengthCheck, read_current_manifest, validate_synced
    from trainkit_core.training.budget import check_budget
    from trainkit_core.training.methods import check_format

    config = checked_config(provider, config)
    _refuse_python_graders(provider, config)
    provider.check_scale(config.gpus, config.nodes)  # a provider that cannot place the run refuses before any record
    _check_processes(provider, config)
    price = price_for_run(provider, config.gpu or "")  # a bad price table fails before anything is written
    limits = check_budget(budget, price)
    try:
        local = find_local(Path(provider.settings.datasets.datasets_dir), config.dataset)
    except NotFoundError as missing:
        volume = provider.volume("data")
        digest = synced_hash(volume, config.dataset)
        if digest is None:
            raise NotFoundError(
                f"{missing.message}, and never synced to the {provider.name} data volume",
                hint=missing.hint or "trainkit datasets lists the local datasets",
            ) from None
        dataset_format = read_current_manifest(volume, config.dataset).format
        check_format(config.method, dataset_format, config.dataset)
        length = LengthCheck.estimate(config.max_seq_length or config.preset.max_seq_length)
        report = validate_synced(volume, config.dataset, length=length)
        if not report.ok(strict=strict):
            raise DatasetInvalidError(report, strict=strict) from None
        _refuse_images_on_a_text_model(config, report.images)
        _refuse_audio_without_a_tower(config, report.audio)
        return CheckedRequest(config, dataset_format, price, limits, synced_hash=digest)
    dataset_format = local.spec.format if local.spec is not None else "chat"  # a broken spec: validation reports it
    check_format(config.method, dataset_format, config.dataset)
    if local.spec is not None:
        data_files = [local.path / f for f in local.spec.files if (local.path / f).is_file()]
        _refuse_images_on_a_text_model(config, sum(1 for f in data_files if _names_images(f.read_bytes())))
        _refuse_audio_without_a_tower(config, sum(1 for f in data_files if b'"input_audio"' in f.read_bytes()))
        _refuse_thinking_without_a_place(config, local.spec.format, data_files)
    return CheckedRequest(config, dataset_format, price, limits, local=local)


def _prepare_dataset(
    provider: Any, request: CheckedRequest, *, progress: Any = None, strict: bool = False
) -> tuple[str, dict[str, Any]]:
    """(dataset hash, sync summary): sync the local copy if it changed, else use the volume's (checked already)."""
    from trainkit_core.datasets.sync import sync_dataset
    from trainkit_core.datasets.validate import LengthCheck

    config = request.config
    if request.local is None:
        return str(request.synced_hash), {"synced": False, "source": "volume"}
    length = LengthCheck.estimate(config.max_seq_length or config.preset.max_seq_length)
    result = sync_dataset(provider, config.dataset, provider.settings, length=length, progress=progress, strict=strict)
    summary = {
        "synced": not result.unchanged,
        "version": result.version,
        "uploaded_bytes": result.uploaded_bytes,
        "files_sent": list(result.files_sent),
    }
    return result.hash, summary


def checked_config(provider: Any, config: TrainConfig | dict[str, Any]) -> TrainConfig:
    """`config` resolved against its preset and its source model, checked by its method (GRPO: its graders).

    The dataset is checked by `check_request`, which calls this first.
    """
    if not isinstance(config, TrainConfig):
        config = TrainConfig.parse(config)
    if config.from_model:
        from trainkit_core.training.start_from import apply_source, read_source_card

        config = apply_source(config, read_source_card(provider, config.from_model))
    if config.base_model:
        from trainkit_core.models.base_models import chat_format_for_config, check_source

        # A folder is checked where the job will look for it; its chat format is read from its config.json.
        found = check_source(provider, config.base_model)
        if found is not None and config.chat_format is None:
            config = config.model_copy(update={"chat_format": chat_format_for_config(found)})
    config = config.resolve(gpu_override=provider.settings.compute.gpu)
    get_method(config.method).check_request(config)
    return config


def _names_images(data: bytes) -> bool:
    """Whether a JSONL file's lines hold an image part, wherever in the record (a preference
    pair's ``input.messages`` too), or a data: URL. An ``"image_url"`` inside a text would
    be escaped (``\\"image_url\\"``), so only a real part or key matches."""
    return b'"image_url"' in data or b"data:image" in data


def _refuse_audio_without_a_tower(config: TrainConfig, audio: int) -> None:
    """A dataset with audio trains only a model with an audio tower (a preset that says so; a model given by
    id or folder is checked by the job, which loads its processor), and as images do: SFT, no packing, no fsdp."""
    if not audio:
        return
    if not config.base_model and not config.preset.audio:
        raise UsageError(
            f"dataset {config.dataset!r} has audio, but model size {config.model_size} has no audio tower",
            hint="train e2b or e4b (Gemma 4's audio models; tiny-gemma4-e is their twin), or remove the audio parts",
        )
    _refuse_images_on_a_text_model(config, audio, what="audio")


def _refuse_images_on_a_text_model(config: TrainConfig, images: int, what: str = "images") -> None:
    """A dataset with pictures cannot train the text-only `tiny` model, nor with DPO/GRPO or `--packing`: said now."""
    from trainkit_core.models.presets import TINY_BASE_MODEL

    if images and config.resolved_base_model == TINY_BASE_MODEL:
        raise UsageError(
            f"dataset {config.dataset!r} has {what}, but {config.resolved_base_model} (model size tiny) is a text-only model",
            hint=f"train a multimodal preset (4b, 12b, 31b), or remove the {what}",
        )
    if images and not get_method(config.method).images:
        with_images = ", ".join(f"--method {m.name}" for m in METHODS.values() if m.images)
        raise UsageError(
            f"dataset {config.dataset!r} has {what}; --method {config.method} trains on text only so far",
            hint=f"train {what} with {with_images}",
        )
    if images and config.packing:
        raise UsageError(
            f"dataset {config.dataset!r} has {what}; --packing packs text only (the vision collator batches whole "
            "conversations with their pixels or sounds, and trl refuses packing for vision data)",
            hint="train without --packing",
        )
    from trainkit_core.training.distributed import world_size
    from trainkit_core.training.sharding import choose

    if images and world_size(config) > 1 and choose(config)[0] == "fsdp":
        raise UsageError(
            f"dataset {config.dataset!r} has {what}; strategy fsdp cannot train them yet (the towers' "
            "optimizer is built before the model is sharded)",
            hint=f"train {what} with --strategy ddp",
        )


def _refuse_thinking_without_a_place(config: TrainConfig, dataset_format: str, files: list[Any]) -> None:
    """Thinking in the data of a model whose chat format has none (Gemma 3): named at its line, before any record."""
    from trainkit_core.models.chat_format import get_format

    if not config.keep_thinking or get_format(config.chat_format or "gemma3").native_tools:
        return
    from trainkit_core.datasets.examples import parse_jsonl

    for path in files:
        data = path.read_bytes()
        if b'"reasoning_content"' not in data and b'"thinking"' not in data:
            continue
        examples, _ = parse_jsonl(data, path.name, dataset_format)
        thinking = next((e for e in examples if any("reasoning_content" in f for f in e.extra_fields().values())), None)
        if thinking is not None:
            raise UsageError(
                f"dataset {config.dataset!r} has thinking ({thinking.where}), which the {config.chat_format} chat "
                f"format of {config.resolved_base_model} has no place for",
                hint="train a Gemma 4 model, or drop the thinking with --drop-thinking",
            )


def start_run(
    provider: Any,
    config: TrainConfig | dict[str, Any] | CheckedRequest,
    *,
    metadata: dict[str, Any] | None = None,
    sync_progress: Any = None,
    strict_dataset: bool = False,
    budget: dict[str, Any] | None = None,
) -> TrainingRun:
    """Validate, sync the dataset if changed, create the record, spawn the `train` job.

    `strict_dataset` refuses a dataset with warnings too (unknown keys, duplicates,
    lengths), as ``trainkit sync --strict`` does. `config` may be `check_request`'s
    answer already (what a plan was made from; its budget was given to `check_request`):
    it is not checked again. `budget` holds limits that stop the run gracefully
    (`trainkit_core.training.budget`: max_cost_usd, max_duration_s, and a sweep's
    group_max_cost_usd, group_max_duration_s).
    """
    from trainkit_core.runs.metadata import check_metadata

    metadata = check_metadata(dict(metadata or {}))
    if isinstance(config, CheckedRequest):
        if budget:
            raise TypeError("a checked request has its budget already: give it to check_request")
        request = config
    else:
        request = check_request(provider, config, strict=strict_dataset, budget=budget)
    config, price, limits = request.config, request.price, request.budget
    provider.deployment().check(["train"])
    dataset_hash, sync = _prepare_dataset(provider, request, progress=sync_progress, strict=strict_dataset)

    store = RunStore.for_provider(provider)
    now = time.time()
    run = TrainingRun(
        id=new_run_id(now),
        provider=provider.name,
        config=config.model_dump(mode="json"),
        dataset_id=config.dataset,
        dataset_hash=dataset_hash,
        status="pending",
        phase="provisioning",
        created_at=now,
        metadata=dict(metadata or {}),
        app_name=provider.settings.provider.app_name,
        base_model=config.resolved_base_model,
        price=price,
        budget=limits,
    ).attach(store)
    run.save()
    run.events.append("status", status="pending", dataset_sync=sync)
    _spawn(provider, run, resume=False)
    return run


def _spawn(provider: Any, run: TrainingRun, *, resume: bool) -> None:
    try:
        handle = provider.spawn("train", run_id=run.id, resume=resume)
    except TrainkitError as exc:
        _fail(run, f"could not start the train job: {exc.message}")
        raise
    except Exception as exc:
        _fail(run, f"could not start the train job: {type(exc).__name__}: {exc}")
        raise
    # Which app and deployment run the job, where the provider says (`RunHandle.app`).
    app = getattr(handle, "app", None) or {}

    def note_call(stored: TrainingRun) -> None:
        stored.call_id = handle.call_id
        for field in APP_FIELDS:
            if app.get(field):
                setattr(stored, field, str(app[field]))

    # On the stored record: the job may have started and saved its progress already.
    run.update_shared(note_call)


def _fail(run: TrainingRun, reason: str) -> None:
    run.status = "failed"
    run.ended_at = time.time()
    run.error_message = reason
    run.save()
    run.events.append("status", status="failed", reason=reason)


def resume_run(
    provider: Any, run_id: str, *, steps: int | None = None, processes: int | None = None, gpus: int | None = None
) -> TrainingRun:
    """Continue run `run_id` from its latest checkpoint, to `steps` (default: its own step count).

    `processes` or `gpus` resume it on another number of ranks (a checkpoint holds the whole
    LoRA state, whatever the number of ranks that wrote it): a run that lost a GPU goes on on
    fewer, a CPU test resumes a 2-process checkpoint in one process.
    """
    store = RunStore.for_provider(provider)
    run = store.get(run_id)
    if not run.ended():
        from trainkit_core.runs.reconcile import reconcile_run

        reconcile_run(run)
    if run.status in UNFINISHED:
        raise ConflictError(f"run {run_id} is still {run.status}", hint=f"trainkit runs stop {run_id} first")
    latest = run.latest_checkpoint()
    if latest is None:
        raise ConflictError(
            f"run {run_id} has no complete checkpoint to resume from",
            hint="start a new run with trainkit train (checkpoints are saved every --save-every steps)",
        )
    config = TrainConfig.model_validate(run.config)
    if steps is not None:
        if steps <= latest.step:
            raise UsageError(f"--steps {steps} is not beyond the checkpoint at step {latest.step}")
        config = TrainConfig.parse(config.model_dump(), steps=steps, epochs=None)
    if processes is not None or gpus is not None:
        config = _on_other_ranks(provider, config, processes, gpus)
    target = config.steps
    if run.status == "succeeded" and (target is None or target <= run.step):
        raise ConflictError(
            f"run {run_id} already succeeded at step {run.step}", hint="pass --steps N beyond it to train further"
        )
    provider.deployment().check(["train"])
    store.stop_flag(run_id).clear()
    run.config = config.model_dump(mode="json")
    run.status = "pending"
    run.ended_at = None
    run.completed_at = None
    run.error_message = None
    run.stop_reason = None
    run.call_id = ""  # the old call's; the new one is noted by `_spawn` or by the job itself
    run.attempt += 1
    run.metadata["resumes"] = int(run.metadata.get("resumes", 0)) + 1
    run.save()
    run.events.append("status", status="pending", resume_from_step=latest.step, steps=target)
    _spawn(provider, run, resume=True)
    return run


def _on_other_ranks(provider: Any, config: TrainConfig, processes: int | None, gpus: int | None) -> TrainConfig:
    """`config` with another number of processes or GPUs, checked as a new run's would be."""
    from pydantic import ValidationError

    from trainkit_core.training.config import describe_errors, with_gpu_count

    changes: dict[str, Any] = {}
    if processes is not None:
        changes["processes"] = processes
    if gpus is not None:
        changes["gpus"] = gpus
        changes["gpu"] = with_gpu_count(config.gpu, gpus)
    values = {**config.model_dump(), **changes}
    try:
        changed = TrainConfig.model_validate(values)
    except ValidationError as exc:
        raise UsageError(f"cannot resume on other ranks: {describe_errors(exc)}") from None
    provider.check_scale(changed.gpus, changed.nodes)
    _check_processes(provider, changed)
    from trainkit_core.training.sharding import choose

    before, after = choose(config)[0], choose(changed)[0]
    if before != after and "fsdp" in (before, after):
        raise UsageError(
            f"cannot resume on other ranks: the run trained with {before} and would go on with {after}; "
            "a checkpoint keeps the optimizer state in its strategy's own form",
            hint=f"resume it on several ranks with --strategy {before}"
            if before == "fsdp"
            else "resume it with the same number of ranks",
        )
    return changed


def _check_processes(provider: Any, config: TrainConfig) -> None:
    """`--processes N` needs a provider that declares CPU processes; refused here, before any record."""
    if config.processes > 1 and not provider.capabilities.cpu_processes:
        raise UsageError(
            f"processes={config.processes}: provider {provider.name!r} does not declare CPU processes "
            "(the local provider does)",
            hint="drop --processes, or ask for --gpus N where the provider declares several GPUs",
        )
    from trainkit_core.training.distributed import world_size
    from trainkit_core.training.sharding import choose, refusal

    if world_size(config) > 1:
        strategy, why = choose(config)
        refused = refusal(config, strategy)
        if refused:
            raise UsageError(f"strategy {strategy} ({why}): {refused}", hint="ask for --strategy ddp")

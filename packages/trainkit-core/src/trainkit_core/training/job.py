"""The `train` job function: runs inside the provider's process or container.

``train(ctx, run_id, resume=False)`` reads the run's record (created by
`trainkit_core.training.submit.start_run`), trains, and leaves the result on the models
volume (layout in `trainkit_core.models.trained.layout`). It never imports a provider SDK:
state goes through `RunStore.for_job(ctx)`, files through `ctx.path(kind)`, and
`ctx.commit("models")` follows every checkpoint and the end.

Resuming: with `resume=True` (from `resume_run`), or when the job finds its run still
`running` (the provider restarted the same input after a preemption or crash), it
continues from the latest complete checkpoint: adapter, optimizer, scheduler, RNG
and step count are restored by the trainer.

Ends: `succeeded`; `stopped` when the stop flag was set (the adapter is saved and a
checkpoint written, so it can be resumed); `preempted` on SIGINT (how a provider
preempts a container; not terminal, so a restart resumes); on any other exception the
error is recorded and raised again, so the provider sees the call fail. Every end writes
the run's history to the models volume.

Attempts: a provider that retries a failed call (Modal: `modal.Retries`, and restarts
after a container crash) runs this job again for the same call. The job counts the
attempts of its call on the run record (`call_attempts`, against `ctx.max_attempts`,
which the provider sets): an attempt that raises before the last leaves the run
`pending` with its error, for the next attempt to resume; the last one fails the run.
An attempt beyond the cap (a crash loop: the container died each time without a word)
fails the run at once, and so does any later retry of that call, so the call's outcome
is always the run's.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

from trainkit_core.errors import JobError
from trainkit_core.models.chat_format import (
    ChatFormat,
    check_loss_mask,
    encode_example,
    get_format,
    render,
    render_example,
)
from trainkit_core.models.presets import TINY_BASE_MODEL
from trainkit_core.models.trained.layout import base_model_path as local_base_path
from trainkit_core.models.trained.layout import make_card, resolve_base_model, write_card
from trainkit_core.models.trained.paths import trained_dir
from trainkit_core.plugins.job_context import JobContext
from trainkit_core.runs.training_run import RunStore, TrainingRun
from trainkit_core.training.background import JobWrites
from trainkit_core.training.config import TrainConfig

log = logging.getLogger(__name__)

#: Fixed prompts (the first eval examples) generated on at every checkpoint.
ROLLOUT_PROMPTS = 2
ROLLOUT_TOKENS = 32


def _record_rollout(run: TrainingRun, model: Any, tokenizer: Any, fmt: Any, prompts: list[Any], step: int) -> None:
    """Greedy answers to fixed prompts at a checkpoint (`TrainingRun.record_latest_rollout`).

    A sample that cannot be generated (e.g. a backend whose training mode refuses
    `generate`) is a warning, never a failure of the run.
    """
    import torch

    from trainkit_core.evals.greedy import greedy_answers
    from trainkit_core.models.chat_format import render_prompt

    samples = []
    was_training = model.training
    try:
        model.eval()
        device = next(model.parameters()).device
        for messages in prompts:
            prompt = render_prompt(messages, fmt)
            ids = tokenizer(prompt, add_special_tokens=False, return_tensors="pt").input_ids.to(device)
            [(answer_ids, _)] = greedy_answers(
                model,
                {"input_ids": ids, "attention_mask": torch.ones_like(ids)},
                stops=fmt.stop_ids(tokenizer),
                pad_token_id=tokenizer.pad_token_id,
                max_new_tokens=ROLLOUT_TOKENS,
            )
            answer = tokenizer.decode(answer_ids, skip_special_tokens=True)
            user = [m["content"] for m in messages if m["role"] == "user"]
            samples.append({"prompt": user[-1] if user else "", "output": answer})
    except Exception as exc:  # a sample is a nicety, not the run
        run.events.append("warning", message=f"no sample generations at step {step}: {type(exc).__name__}: {exc}")
        return
    finally:
        if was_training:
            model.train()
    run.record_latest_rollout({"step": step, "samples": samples})


def train(ctx: JobContext, run_id: str, resume: bool = False) -> dict[str, Any]:
    """Train run `run_id`; returns a summary (status, step, metrics)."""
    store = RunStore.for_job(ctx)
    store.events(run_id).lazy_hint = True  # one store call per event written here, not two
    run = store.get(run_id)
    from trainkit_core.training import distributed

    if distributed.world_size(run.config) > 1 and not distributed.in_rank():
        # Several processes: torchrun's ranks train; rank 0 keeps this run's record.
        return distributed.launch(ctx, run, resume, end=_end, retry_later=_retry_later)
    same_call = bool(run.attempt_call_id) and run.attempt_call_id == ctx.call_id
    if run.ended():
        if same_call and run.status == "failed":
            # The provider retried a call whose run already failed: the call fails too.
            raise JobError(f"run {run_id} failed: {run.error_message or 'no error text'}")
        log.warning("run %s already ended %s; nothing to do", run_id, run.status)
        return {"run_id": run_id, "status": run.status, "skipped": True}
    restarted = (run.status in ("running", "preempted") or same_call) and not resume
    _count_attempt(ctx, run, same_call)  # saved below with the status, before any work
    # The submitter saves the call id after the provider started us; should it die first,
    # this is the only record of it, which cancel and the reconciler need.
    run.call_id = run.call_id or ctx.call_id
    if run.call_attempts > run.max_attempts:
        error = (
            f"gave up after {run.max_attempts} attempt(s): the provider started the job again "
            f"(its container crashed or was restarted); last error: {run.error_message or 'none recorded'}"
        )
        _end(ctx, run, "failed", error=error)
        raise JobError(f"run {run_id} failed: {error}")
    if restarted:
        run.attempt += 1
        run.events.append(
            "warning",
            message=f"the job was restarted (attempt {run.attempt}, {run.call_attempts} of {run.max_attempts} "
            "for this call); resuming",
        )
    os.environ["HF_HOME"] = str(ctx.path("hf-cache"))
    now = time.time()
    run.status = "running"
    run.started_at = run.started_at or now
    run.begin_attempt(now)
    run.ended_at = None
    run.error_message = None
    run.start_phases()
    run.save()  # written now: the attempt is counted before anything can crash
    # From here on the job's record saves and events are written by background threads
    # (`JobWrites`): a slow store costs the job nothing until the end waits for them.
    writes = JobWrites(run).start()
    run.events.append(
        "status", status="running", attempt=run.attempt, call_attempt=run.call_attempts, max_attempts=run.max_attempts
    )
    scratch = Path(tempfile.mkdtemp(prefix=f"trainkit-{run_id}-"))
    try:
        status = _train(ctx, run, scratch, resume=resume or restarted)
    except KeyboardInterrupt:
        # SIGINT: how a provider preempts a container. Not terminal: the provider's
        # restart of the same input (or `trainkit runs resume`) continues from the checkpoint.
        _end(
            ctx,
            run,
            "preempted",
            error="interrupted (SIGINT: preempted); it resumes from its latest checkpoint when restarted",
        )
        raise
    except BaseException as exc:
        text = f"{type(exc).__name__}: {exc}"
        log.error("run %s failed: %s", run_id, traceback.format_exc())
        if distributed.in_rank():
            distributed.record_rank_error(text)  # the launching job ends the run, naming the rank that died
        elif run.call_attempts < run.max_attempts:
            _retry_later(ctx, run, text)
        else:
            _end(ctx, run, "failed", error=text)
        raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        writes.close()  # every record copy and event of the job is in the store
    return {"run_id": run_id, "status": status, "step": run.step, "metrics": run.metrics}


def _count_attempt(ctx: JobContext, run: TrainingRun, same_call: bool) -> None:
    """One more attempt of this call (a new call starts at 1); a preempted attempt is not counted."""
    if not same_call:
        run.attempt_call_id = ctx.call_id
        run.call_attempts = 1
    elif run.status != "preempted":
        run.call_attempts += 1
    run.max_attempts = max(1, int(ctx.max_attempts))


def _retry_later(ctx: JobContext, run: TrainingRun, error: str) -> None:
    """An attempt failed, and the provider will run another: the run stays resumable, its error kept."""
    run.status = "pending"
    run.error_message = error
    run.end_attempt(time.time())
    run.end_phase()
    run.save()
    run.events.append(
        "status",
        status="pending",
        error=error,
        attempt=run.attempt,
        call_attempt=run.call_attempts,
        max_attempts=run.max_attempts,
        retrying=True,
    )
    ctx.commit("models")


def _end(ctx: JobContext, run: TrainingRun, status: str, *, error: str | None = None) -> None:
    now = time.time()
    run.status = status  # type: ignore[assignment]
    run.ended_at = now
    run.completed_at = now if status == "succeeded" else None
    run.end_attempt(now)
    run.error_message = error
    if status == "stopped" and run.stop_reason is None:
        flag = run.store.stop_flag(run.id).read()
        run.stop_reason = str((flag or {}).get("reason") or "stop requested")
    if status in ("succeeded", "stopped"):
        run.enter_phase("done", save=False)  # saved below, once
    run.end_phase()
    run.save()
    run.events.append("status", status=status, **({"error": error} if error else {}))
    run.write_history()
    ctx.commit("models")


def _read_dataset(ctx: JobContext, run: TrainingRun, config: TrainConfig) -> Any:
    """The synced dataset, with a warning when it changed since the run started; `JobError` when it trains nothing."""
    from trainkit_core.datasets.reader import read_synced

    dataset = read_synced(ctx.path("data"), config.dataset)
    if run.dataset_hash and dataset.hash != run.dataset_hash:
        run.events.append(
            "warning",
            message=f"dataset {config.dataset} changed since the run started ({run.dataset_hash[:12]} -> {dataset.hash[:12]})",
        )
    run.dataset_hash = dataset.hash
    if not dataset.train:
        raise JobError(f"dataset {config.dataset} has no training examples")
    return dataset


def _tokenizer(adapter_dir: Path | None, base_model: str, source: str, dataset: Any, fmt: ChatFormat) -> Any:
    """The run's tokenizer: the trained model's own when it goes on from one, tiny's built from its data, else the base's."""
    from transformers import AutoTokenizer

    if adapter_dir is not None:
        # The trained model's own tokenizer (tiny's is built from its first dataset).
        tokenizer = AutoTokenizer.from_pretrained(str(adapter_dir))
        tokenizer.chat_template = fmt.chat_template
    elif base_model == TINY_BASE_MODEL:
        from trainkit_core.models.tiny_model import build_tokenizer

        texts = [text for example in dataset.train for text in _texts(example, fmt)]
        tokenizer = build_tokenizer(texts, fmt.name)
    else:
        # From where the model was loaded (a folder, a twin, or the id in HF_HOME), as a real model's.
        tokenizer = AutoTokenizer.from_pretrained(source)
        tokenizer = getattr(tokenizer, "tokenizer", tokenizer)  # a processor's text tokenizer
        tokenizer.chat_template = fmt.chat_template
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def _training_rows(
    run: TrainingRun,
    config: TrainConfig,
    method: Any,
    dataset: Any,
    tokenizer: Any,
    fmt: ChatFormat,
    source: str,
    media: bool,
) -> tuple[Any, Any, list[Any]]:
    """(processor, collator, rows) the trainer takes: the processor's rows for pictures or sounds, else token rows.

    A method whose trainer tokenizes its own data (trl's DPO and GRPO) gets none. An example
    with no answer left within `max_seq_length` is dropped with a warning; none left is a `JobError`.
    """
    from trainkit_core.training.vision import prepare_vision

    rows: list[Any] = []
    dropped = 0
    processor = collator = None
    with run.substep("loading_dataset", "tokenize") as tokenized:
        if not method.tokenizes_rows:  # trl tokenizes pairs and prompts itself
            tokenized.update(examples=len(dataset.train))
        elif media:
            processor, collator, rows = prepare_vision(run, source, fmt, dataset.train, config)
            tokenized.update(examples=len(rows))
        else:
            for example in dataset.train:
                row = encode_example(
                    tokenizer, example, fmt, max_length=config.max_seq_length, keep_thinking=config.keep_thinking
                )
                if any(label != -100 for label in row["labels"]):
                    rows.append(row)
                else:
                    dropped += 1
            tokenized.update(examples=len(rows), tokens=sum(len(r["input_ids"]) for r in rows))
    if dropped:
        run.events.append(
            "warning", message=f"{dropped} examples have no answer left within max_seq_length {config.max_seq_length}"
        )
    if not rows and method.tokenizes_rows:
        raise JobError(f"no example of {config.dataset} fits in max_seq_length {config.max_seq_length}")
    return processor, collator, rows


def _train(ctx: JobContext, run: TrainingRun, scratch: Path, *, resume: bool) -> str:
    from trainkit_core.training import distributed
    from trainkit_core.training.backends import cuda_available, load_model, select_backend
    from trainkit_core.training.gpu import check_gpu_visible
    from trainkit_core.training.post import after_training, trained_logits
    from trainkit_core.training.progress import Reporter, make_callback
    from trainkit_core.training.vision import (
        has_audio,
        has_images,
        has_media,
        vision_optimizer,
        with_vision_modules,
    )

    check_gpu_visible()  # a GPU that torch cannot use fails the run now, not after hours on the CPU
    config = TrainConfig.model_validate(run.config)
    from trainkit_core.training import sharding

    world = distributed.world_size(config)
    strategy, why = sharding.choose(config) if world > 1 else ("", "")
    sharded = strategy == "fsdp"
    fmt = get_format(config.chat_format or "gemma3")
    models_root = ctx.path("models")
    hf_cache = ctx.path("hf-cache")

    # The dataset is read first (cheap; a bad one fails before a long model load), but
    # the phases advance in their fixed order: the model, then the dataset's tokens.
    dataset = _read_dataset(ctx, run, config)
    from trainkit_core.training.methods import TrainerInputs, check_format, get_method

    method = get_method(config.method)
    check_format(config.method, dataset.format, config.dataset)  # the data may have changed since the submit
    adapter_dir = _start_from(ctx, config)

    run.enter_phase("loading_model")
    backend = select_backend(config.backend, sharded=sharded)
    run.framework = backend
    if backend == "unsloth":
        import unsloth  # noqa: F401  (before anything imports transformers, so its patches apply)
    base_model = config.resolved_base_model
    base_model_path = local_base_path(base_model)  # tiny and the twins: their folder on the hf-cache volume
    source = resolve_base_model({"base_model": base_model}, hf_cache)
    run.base_model = base_model
    images = has_media(dataset.train)  # pictures or sounds: the processor's path
    if images and sharded:
        raise JobError(
            f"strategy fsdp ({why}) cannot train on images or audio yet: the vision tower's optimizer is built before the "
            "model is sharded; train it with --strategy ddp"
        )
    config = with_vision_modules(config, source, backend, has_images(dataset.train), has_audio(dataset.train))
    with run.substep("loading_model", "load_model"):
        # The adapters' initial weights are drawn here, before the trainer seeds anything:
        # unseeded, one `--seed` gave a different model on every run.
        from transformers import set_seed

        set_seed(config.seed)
        model = load_model(backend, source, config, adapter_dir)

    run.enter_phase("loading_dataset")
    tokenizer = _tokenizer(adapter_dir, base_model, source, dataset, fmt)
    mask = check_loss_mask(tokenizer, fmt)
    run.events.append("log", message="loss mask checked on the tokenizer", **mask)
    processor, collator, rows = _training_rows(run, config, method, dataset, tokenizer, fmt, source, images)

    def card(step: int | None = None) -> dict[str, Any]:
        return make_card(
            run_id=run.id,
            base_model=base_model,
            base_model_path=base_model_path,
            preset=config.preset_name,
            chat_format=fmt.name,
            dataset_id=config.dataset,
            dataset_hash=dataset.hash,
            config=config.model_dump(mode="json"),
            backend=backend,
            metrics=run.metrics,
            step=step,
            extra={"accounting": run.accounting(time.time())},  # the clock that timed the attempt
        )

    # Rollouts and kept-checkpoint scores are text-only (an image run has none yet).
    rollout_prompts = [] if images else [e["messages"] for e in (dataset.eval or dataset.train)[:ROLLOUT_PROMPTS]]

    keep_eval_rows = [] if images else _keep_eval_rows(config, dataset, tokenizer, fmt)

    def checkpoint_extras(folder: Path, step: int) -> None:
        tokenizer.save_pretrained(folder)
        if processor is not None:  # a checkpoint of an image run answers about images too
            from trainkit_core.models.processors import save_processor

            save_processor(processor, folder)
        write_card(folder, card(step))
        # GRPO records its own latest group (`methods.grpo.RolloutKeeper`); a sharded model
        # generates only with all its ranks, so rank 0 alone records no samples.
        if method.records_rollouts and not sharded:
            _record_rollout(run, model, tokenizer, fmt, rollout_prompts, step)
        if config.keep_checkpoints:
            _keep_checkpoints(run, config.keep_checkpoints, model, keep_eval_rows, folder, step, card(step))

    reporter = Reporter(
        run,
        models_root=models_root,
        save_checkpoint_extras=checkpoint_extras,
        commit=lambda: ctx.commit("models"),
        event_fields=method.event_fields(config),
    )
    _tracking(run, config, models_root)
    trainer = method.build_trainer(
        TrainerInputs(
            run=run,
            config=config,
            fmt=fmt,
            dataset=dataset,
            rows=rows,
            backend=backend,
            model=model,
            tokenizer=tokenizer,
            output_dir=scratch,
            callbacks=[make_callback(reporter)],
            data_collator=collator,
            optimizer=vision_optimizer(model, config) if collator is not None and backend == "hf" else None,
        )
    )

    checkpoint = None
    if resume:
        latest = run.latest_checkpoint()
        if latest is not None:
            checkpoint = str(models_root / latest.path)
            run.metadata["resumed_from_step"] = latest.step
            run.events.append("log", message=f"resuming from checkpoint at step {latest.step}", step=latest.step)
        else:
            run.events.append("warning", message="no complete checkpoint to resume from; training from the start")

    if world > 1:
        if sharded:
            sharding.enable_on_cpu(trainer)
        per_device = distributed.per_device_batch(config)
        where = f"{world} GPUs" if config.processes == 1 else f"{world} processes"
        run.events.append(
            "log",
            message=f"training on {where} with {strategy} ({why}; {'nccl' if cuda_available() else 'gloo'}), "
            f"global batch {per_device * world} ({per_device} per rank x {world})",
            processes=world,
            strategy=strategy,
        )
    run.enter_phase("training")
    try:
        result = trainer.train(resume_from_checkpoint=checkpoint)
    finally:
        # Held-back events written, background threads ended: on any end. The record is
        # saved next on every way on (`saving`, a retry, a failure, a preemption).
        reporter.close(save=False)
    run.step = trainer.state.global_step
    out_dir = models_root / trained_dir(run.id)
    # A sharded model is gathered, and runs its forward, only with every rank taking part.
    held = sharding.held_parameters(trainer.model) if sharded else None  # before a forward gathers the root
    state = sharding.gathered_state_dict(trainer)
    trained = trained_logits(run, trainer.model, tokenizer) if state is not None else None
    if not distributed.is_main_rank():
        return "succeeded"  # rank 0 saves the one adapter and ends the run
    if held is not None:
        own, total = held
        run.events.append(
            "log", message=f"fsdp: rank 0 held {own:,} of the model's {total:,} parameters", held=own, total=total
        )
    run.metrics.update(
        {
            "first_loss": reporter.first_loss,
            "final_loss": reporter.last_loss,
            "train_runtime_s": round(float(result.metrics.get("train_runtime", 0.0)), 3),
            "steps": trainer.state.global_step,
            "train_examples": method.train_examples(rows, dataset),
        }
    )
    summary, warnings = method.training_summary(list(trainer.state.log_history))
    run.metrics.update(summary)
    for warning in warnings:
        run.events.append("warning", message=warning)

    run.enter_phase("saving")
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "trained_model.json").unlink(missing_ok=True)  # the card is written last
    with run.substep("saving", "save_adapter"):
        method.before_save(trainer)
        trainer.model.save_pretrained(out_dir, **({"state_dict": state} if state is not None else {}))
        tokenizer.save_pretrained(out_dir)
        if processor is not None:
            from trainkit_core.models.processors import save_processor

            save_processor(processor, out_dir)  # what inference resizes images with

    extra = after_training(
        ctx,
        run,
        trainer.model,
        tokenizer,
        out_dir,
        stopped=reporter.stop_requested,
        processor=processor,
        trained=trained,
        why=warnings,
    )
    if extra:
        run.metrics.update(extra)
        run.events.append("metrics", **extra)
    write_card(out_dir, card())
    ctx.commit("models")
    run.events.append("metrics", **{k: v for k, v in run.metrics.items() if k != "loss"})
    status = "stopped" if reporter.stop_requested else "succeeded"
    _end(ctx, run, status)
    return status


def _texts(example: dict[str, Any], fmt: Any) -> list[str]:
    """What a built tokenizer must cover of one example: the conversation, each answer of a pair, a reference."""
    if "chosen" in example:
        from trainkit_core.evals.preference import with_answer

        return [render(with_answer(example, side), fmt, tools=example.get("tools")) for side in ("chosen", "rejected")]
    texts = [render_example(example, fmt)]
    if isinstance(example.get("reference"), str):
        texts.append(example["reference"])
    return texts


def _start_from(ctx: JobContext, config: TrainConfig) -> Path | None:
    """The folder of the `--from` model on the mounted models volume (checked again here), or None."""
    if not config.from_model:
        return None
    from trainkit_core.models.trained.paths import local_model_dir, parse_model_path

    folder = local_model_dir(parse_model_path(config.from_model), ctx.path("models"))
    if not (folder / "adapter_config.json").is_file():
        raise JobError(f"--from {config.from_model}: no adapter at {folder}")
    return Path(folder)


def _keep_eval_rows(config: TrainConfig, dataset: Any, tokenizer: Any, fmt: Any) -> list[dict[str, list[int]]]:
    """The eval rows that score checkpoints for `keep_checkpoints` (none without an eval split)."""
    from trainkit_core.training.keep import EVAL_EXAMPLES

    if not config.keep_checkpoints or not dataset.eval:
        return []
    rows = [
        encode_example(tokenizer, e, fmt, max_length=config.max_seq_length, keep_thinking=config.keep_thinking)
        for e in dataset.eval[:EVAL_EXAMPLES]
    ]
    return [r for r in rows if any(label != -100 for label in r["labels"])]


def _keep_checkpoints(
    run: TrainingRun, keep: int, model: Any, rows: list[Any], folder: Path, step: int, card: dict[str, Any]
) -> None:
    """Score the new checkpoint on the eval rows (when there are some), then prune older ones."""
    from trainkit_core.training.keep import eval_loss, prune

    losses: dict[str, float] = run.metadata.setdefault("checkpoint_eval_loss", {})
    if rows:
        losses[str(step)] = round(eval_loss(model, rows), 6)
        write_card(folder, {**card, "eval_loss": losses[str(step)]})
    removed = prune(folder.parent, keep, step, {int(k): v for k, v in losses.items()})
    if removed:
        for old in removed:
            losses.pop(str(old), None)
        run.events.append("log", message=f"removed checkpoints {removed} (keep_checkpoints={keep})", removed=removed)


def _tracking(run: TrainingRun, config: TrainConfig, models_root: Path) -> None:
    """Where trl's TensorBoard / W&B reporters write (`report_to`); trainkit's events stay the record.

    TensorBoard: event files under ``runs/<id>/tensorboard`` on the models volume
    (committed with each checkpoint and at the end, deleted with the run). W&B: its key
    comes from the environment (on a cloud provider, a provider secret holding
    ``WANDB_API_KEY``); ``WANDB_MODE=offline`` writes under ``runs/<id>/wandb`` instead.
    """
    import importlib.util

    from trainkit_core.errors import MissingExtraError
    from trainkit_core.runs.training_run import history_dir

    if config.report_to == "tensorboard":
        if importlib.util.find_spec("tensorboard") is None and importlib.util.find_spec("tensorboardX") is None:
            raise MissingExtraError(
                "--report-to tensorboard needs tensorboardX or tensorboard",
                hint="pip install 'trainkit-core[tracking]'",
            )
        folder = models_root / history_dir(run.id) / "tensorboard"
        os.environ["TENSORBOARD_LOGGING_DIR"] = str(folder)
        run.metadata["tensorboard_dir"] = f"{history_dir(run.id)}/tensorboard"
    elif config.report_to == "wandb":
        if importlib.util.find_spec("wandb") is None:
            raise MissingExtraError(
                "--report-to wandb needs wandb installed where the job runs", hint="pip install wandb"
            )
        if not os.environ.get("WANDB_API_KEY") and os.environ.get("WANDB_MODE") not in ("offline", "disabled"):
            raise JobError(
                "--report-to wandb needs WANDB_API_KEY in the job's environment (or WANDB_MODE=offline); "
                "on a cloud provider put it in a provider secret"
            )
        os.environ.setdefault("WANDB_PROJECT", "trainkit")
        os.environ.setdefault("WANDB_NAME", run.id)
        os.environ.setdefault("WANDB_DIR", str(models_root / history_dir(run.id)))

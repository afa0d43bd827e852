"""A run as OpenAI's fine-tuning objects: the job, its events, its checkpoints, its metrics file.

Statuses: ``pending`` (and ``preempted``, waiting for its retry) is `queued`; a graceful stop
is `paused`, since `resume` continues it from its checkpoint, as OpenAI's pause does;
``stopped`` by a cancel is `cancelled`. trainkit checks the files before a job is created,
so a job is never `validating_files`.

Events are OpenAI's two kinds: `metrics` for each progress event (step, training loss,
token accuracy where measured), `message` for the rest (status, phases, checkpoints,
warnings at level `warn`). Their ids are ``ftevent-<run id>-<sequence number>``, listed
newest first as OpenAI lists them.
"""

from __future__ import annotations

import csv
import io
import time
from typing import Any

from trainkit_api.fine_tuning import names
from trainkit_api.fine_tuning.files import RESULTS_PREFIX, RESULTS_PURPOSE
from trainkit_api.state import event_log
from trainkit_core.runs.training_run import TrainingRun

ORGANIZATION = "trainkit"


def status_of(run: TrainingRun) -> str:
    if run.status in ("pending", "preempted"):
        return "queued"
    if run.status == "stopped":
        return "cancelled" if run.stop_reason == "cancelled" else "paused"
    return run.status


def _hyperparameters(run: TrainingRun, record: dict[str, Any]) -> dict[str, Any]:
    """What the run trains with, in OpenAI's terms: the resolved values where trainkit has them."""
    config = run.config or {}
    asked = record.get("method", {}).get("hyperparameters", {})
    batch = (config.get("batch_size") or 0) * (config.get("grad_accum") or 1) or asked.get("batch_size", "auto")
    base, rate = record.get("base_learning_rate"), config.get("learning_rate")
    multiplier = round(rate / base, 6) if base and rate else asked.get("learning_rate_multiplier", "auto")
    out: dict[str, Any] = {
        "batch_size": batch,
        "learning_rate_multiplier": multiplier,
        "n_epochs": config.get("epochs") or asked.get("n_epochs", "auto"),
    }
    if record.get("method", {}).get("type") == "dpo":
        out["beta"] = config.get("dpo_beta") or asked.get("beta", "auto")
    return out


def _estimated_finish(run: TrainingRun, record: dict[str, Any]) -> int | None:
    """From the steps so far once training has begun; before that from the plan made at creation."""
    if run.status not in ("pending", "running"):
        return None
    if run.total_steps and run.step and run.attempt_started_at:
        elapsed = max(0.0, time.time() - run.attempt_started_at)
        return int(time.time() + elapsed / run.step * max(0, run.total_steps - run.step))
    planned = record.get("estimated_seconds")
    return int((run.started_at or run.created_at) + planned) if isinstance(planned, int | float) else None


def job_object(run: TrainingRun, record: dict[str, Any]) -> dict[str, Any]:
    status = status_of(run)
    ended = status in ("succeeded", "failed", "cancelled")
    hyper = _hyperparameters(run, record)
    kind = record.get("method", {}).get("type", "supervised")
    method: dict[str, Any] = {"type": kind, kind: {"hyperparameters": hyper}}
    if kind == "reinforcement" and record.get("grader"):
        method[kind]["grader"] = record["grader"]
    error = None
    if status == "failed":
        error = {"code": "job_failed", "message": run.error_message or "the training job failed", "param": None}
    return {
        "object": "fine_tuning.job",
        "id": run.id,
        "created_at": int(run.created_at),
        "error": error,
        "fine_tuned_model": record["fine_tuned_model"] if status == "succeeded" else None,
        "finished_at": int(run.ended_at) if ended and run.ended_at else None,
        "hyperparameters": hyper,
        "model": record["model"],
        "organization_id": ORGANIZATION,
        "result_files": [f"{RESULTS_PREFIX}{run.id}"] if ended or status == "paused" else [],
        "seed": (run.config or {}).get("seed", record.get("seed") or 0),
        "status": status,
        "trained_tokens": run.metrics.get("tokens_seen") if ended else None,
        "training_file": record["training_file"],
        "validation_file": record.get("validation_file"),
        "estimated_finish": _estimated_finish(run, record),
        "integrations": [],
        "metadata": record.get("metadata"),
        "method": method,
        "user_provided_suffix": record.get("suffix"),
    }


# ----------------------------------------------------------------------------- events


def _message(event: dict[str, Any]) -> tuple[str, str]:
    """(level, message) of a trainkit event that is not a progress event."""
    kind = event.get("type", "")
    if kind == "status":
        detail = event.get("error") or event.get("reason")
        return ("error" if event.get("status") == "failed" else "info"), (
            f"Job status: {event.get('status')}" + (f" ({detail})" if detail else "")
        )
    if kind == "phase":
        return "info", f"Phase: {event.get('phase')}"
    if kind == "checkpoint":
        return "info", f"Checkpoint created at step {event.get('step')}"
    if kind == "warning":
        return "warn", str(event.get("message", "warning"))
    if kind == "log":
        return "info", str(event.get("message", ""))
    skip = {"seq", "time", "type"}
    shown = ", ".join(
        f"{key}={value}" for key, value in event.items() if key not in skip and not isinstance(value, (dict, list))
    )
    return "info", f"{kind.capitalize()}: {shown}" if shown else kind.capitalize()


def event_object(run_id: str, event: dict[str, Any]) -> dict[str, Any]:
    base = {
        "object": "fine_tuning.job.event",
        "id": f"ftevent-{run_id}-{int(event['seq'])}",
        "created_at": int(event.get("time", 0)),
    }
    if event.get("type") == "progress":
        data = {"step": event.get("step"), "total_steps": event.get("total_steps"), "train_loss": event.get("loss")}
        if event.get("mean_token_accuracy") is not None:
            data["train_mean_token_accuracy"] = event["mean_token_accuracy"]
        loss = event.get("loss")
        text = (
            f"Step {event.get('step')}/{event.get('total_steps')}: training loss={loss:.4f}"
            if isinstance(loss, (int, float))
            else f"Step {event.get('step')}/{event.get('total_steps')}"
        )
        return {**base, "level": "info", "message": text, "type": "metrics", "data": data}
    level, message = _message(event)
    return {**base, "level": level, "message": message, "type": "message", "data": {}}


def events_page(run: TrainingRun, *, after: str | None, limit: int) -> tuple[list[dict[str, Any]], bool]:
    """Up to `limit` events older than event id `after` (all when None), newest first; and whether more are older."""
    log = event_log(run)
    top = log.last_seq()
    if after is not None:
        prefix = f"ftevent-{run.id}-"
        if not after.startswith(prefix) or not after[len(prefix) :].isdigit():
            return [], False
        top = int(after[len(prefix) :]) - 1
    start = max(0, top - limit)
    events = [e for e in log.read(start) if int(e["seq"]) <= top]
    events.sort(key=lambda e: -int(e["seq"]))
    page = events[:limit]
    return [event_object(run.id, e) for e in page], bool(page) and int(page[-1]["seq"]) > 1


# ----------------------------------------------------------------------------- checkpoints and results


def _losses(run: TrainingRun) -> dict[int, float]:
    """Training loss per logged step, from the run's progress events."""
    losses: dict[int, float] = {}
    for event in event_log(run).read(0):
        if event.get("type") != "progress":
            continue
        for step, loss in event.get("losses") or []:
            losses[int(step)] = float(loss)
        if isinstance(event.get("loss"), (int, float)):
            losses[int(event["step"])] = float(event["loss"])
    return losses


def checkpoint_objects(run: TrainingRun, record: dict[str, Any]) -> list[dict[str, Any]]:
    """The run's complete checkpoints, newest first, named as models a chat completion takes."""
    losses = _losses(run)
    out = []
    for checkpoint in sorted(run.checkpoints(), key=lambda c: -c.step):
        earlier = [step for step in losses if step <= checkpoint.step]
        metrics: dict[str, Any] = {"step": float(checkpoint.step)}
        if earlier:
            metrics["train_loss"] = losses[max(earlier)]
        out.append(
            {
                "object": "fine_tuning.job.checkpoint",
                "id": f"ftckpt-{run.id}-{checkpoint.step}",
                "created_at": int(run.updated_at or run.created_at),
                "fine_tuned_model_checkpoint": names.checkpoint_name(record["fine_tuned_model"], checkpoint.step),
                "fine_tuning_job_id": run.id,
                "metrics": metrics,
                "step_number": checkpoint.step,
            }
        )
    return out


RESULTS_COLUMNS = ("step", "train_loss", "train_accuracy", "valid_loss", "valid_mean_token_accuracy")


def results_csv(run: TrainingRun) -> bytes:
    """The job's metrics per step, with the columns of OpenAI's results file (empty where not measured)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(RESULTS_COLUMNS)
    losses = _losses(run)
    last = max(losses) if losses else None
    for step in sorted(losses):
        valid = run.metrics.get("eval_loss") if step == last else None
        writer.writerow([step, f"{losses[step]:.6g}", "", "" if valid is None else f"{float(valid):.6g}", ""])
    return out.getvalue().encode()


def results_file(run: TrainingRun) -> dict[str, Any]:
    return {
        "id": f"{RESULTS_PREFIX}{run.id}",
        "object": "file",
        "bytes": len(results_csv(run)),
        "created_at": int(run.ended_at or run.updated_at or run.created_at),
        "filename": "step_metrics.csv",
        "purpose": RESULTS_PURPOSE,
        "status": "processed",
        "status_details": None,
    }

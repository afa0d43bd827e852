"""`trainkit runs list|show|logs|wait|stop|resume|cancel`: look after training runs.

Every command goes through the provider facade and `RunStore`; unfinished runs are
reconciled when looked at, so a run whose job died shows `failed` with the reason.
The live progress bar and the event lines are `trainkit_cli.run_progress`'s.
`runs plot` is added by `commands/runs_plot.py`.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import click

from trainkit_cli.run_progress import (
    all_events_written,
    describe_event,
    fmt_loss,
    follow_run,
    print_run_summary,
    refresh_run,
)
from trainkit_cli.state import CliState, console, json_option, pass_state, print_json
from trainkit_core.runs.statuses import RUN_STATUSES


def _store(state: CliState) -> Any:
    from trainkit_core.runs.training_run import RunStore

    return RunStore.for_provider(state.provider)


def _fmt_time(ts: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts)) if ts else "-"


def _strategy(run: Any) -> str:
    """The run's strategy as asked, and what `auto` chose (the rule the job itself applies)."""
    asked = str(run.config.get("strategy") or "auto")
    if asked != "auto":
        return asked
    from trainkit_core.training.config import TrainConfig
    from trainkit_core.training.sharding import choose

    return f"auto: {choose(TrainConfig.model_validate(run.config))[0]}"


def _run_row(run: Any) -> dict[str, Any]:
    return {
        "id": run.id,
        "status": run.status,
        "phase": run.phase,
        "step": run.step,
        "total_steps": run.total_steps,
        "dataset": run.dataset_id,
        "method": run.method,
        "from": run.config.get("from_model") or "",
        "model": run.config.get("model_size") or run.config.get("base_model") or "",
        "loss": run.metrics.get("final_loss", run.metrics.get("loss")),
        "created_at": run.created_at,
        "group_id": run.group_id,
        "error": run.error_message,
        "gpu_seconds": run.gpu_seconds,
        "cost_usd": run.cost_usd,
    }


@click.group()
def runs() -> None:
    """Training runs: list, show, follow, wait, stop, resume, cancel."""


@runs.command("list")
@click.option(
    "--status",
    default=None,
    type=click.Choice(list(RUN_STATUSES)),
    help="Only runs with this status.",
)
@click.option("--group", "group_id", default=None, help="Only runs of this sweep group.")
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1), help="At most this many runs.")
@click.option("--reindex", is_flag=True, help="Rebuild the runs index from every record first (reads them all).")
@json_option
@pass_state
def list_runs(
    state: CliState, status: str | None, group_id: str | None, limit: int, reindex: bool, as_json: bool
) -> None:
    """List runs, newest first (reads the runs index and the listed records only)."""
    store = _store(state)
    if reindex:
        store.index.rebuild()
    found, _ = store.page(status=status, group_id=group_id, limit=limit)
    if as_json:
        print_json([_run_row(r) for r in found])
        return
    from rich.table import Table

    from trainkit_core.runs.pricing import format_cost, group_totals

    table = Table(box=None)
    for column in ("run", "status", "phase", "method", "step", "dataset", "model", "loss", "cost", "created", "group"):
        table.add_column(column, no_wrap=column in ("run", "created"))
    for run in found:
        row = _run_row(run)
        table.add_row(
            row["id"],
            row["status"],
            row["phase"],
            row["method"],
            f"{row['step']}/{row['total_steps'] or '?'}",
            row["dataset"],
            row["model"],
            fmt_loss(row["loss"]),
            format_cost(row["cost_usd"]),
            _fmt_time(row["created_at"]),
            row["group_id"] or "",
        )
    if not found:
        console().print("no runs yet: start one with trainkit train --dataset NAME")
    else:
        console().print(table)
        if group_id:
            totals = group_totals(found)
            console().print(
                f"group {group_id}: {totals['runs']} runs, {totals['gpu_seconds']:.0f} GPU-s, "
                f"cost {format_cost(totals['cost_usd'])}"
            )


@runs.command("show")
@click.argument("run_id")
@json_option
@pass_state
def show(state: CliState, run_id: str, as_json: bool) -> None:
    """Show a run's record and checkpoints."""
    run = refresh_run(_store(state).get(run_id))
    checkpoints = [c.model_dump() for c in run.checkpoints()]
    if as_json:
        print_json({**run.model_dump(mode="json"), "checkpoints": checkpoints})
        return
    out = console()
    print_run_summary(run)
    out.print(f"  phase {run.phase}, backend {run.framework or '-'}, attempt {run.attempt}")
    if run.call_attempts > 1 or run.max_attempts > 1:
        out.print(f"  job attempts {run.call_attempts} of {run.max_attempts} allowed (call {run.attempt_call_id})")
    if run.provider_app_id or run.deployment_id:
        app = f"  app {run.app_name or '-'} ({run.provider_app_id or '-'}), deployment {run.deployment_id or '-'}"
        out.print(app + (f", {run.provider_app_url}" if run.provider_app_url else ""))
    out.print(f"  dataset {run.dataset_id} ({run.dataset_hash[:12]}), model {_run_row(run)['model']}")
    start = f", from {run.config['from_model']}" if run.config.get("from_model") else ""
    out.print(f"  method {run.method}{start}")
    gpus, nodes = run.config.get("gpus") or 1, run.config.get("nodes") or 1  # what the run asked for
    out.print(f"  gpus {gpus} per node ({run.config.get('gpu') or 'no GPU kind'}), nodes {nodes}")
    if (run.config.get("processes") or 1) > 1:
        out.print(f"  processes {run.config['processes']} (CPU ranks over gloo, strategy {_strategy(run)})")
    elif gpus * nodes > 1:
        out.print(f"  strategy {_strategy(run)}")
    out.print(
        f"  created {_fmt_time(run.created_at)}, started {_fmt_time(run.started_at)}, ended {_fmt_time(run.ended_at)}"
    )
    if run.duration_seconds:
        out.print(f"  duration {run.duration_seconds:.1f} s")
    from trainkit_core.runs.pricing import format_cost

    price = run.price
    rate = price.get("usd_per_hour")
    priced = f"${rate:g}/h x {max(1, int(price.get('gpus') or 0))}" if rate is not None else "no price"
    out.print(
        f"  {run.gpu_seconds:.0f} GPU-s on {price.get('gpu') or '?'}, cost {format_cost(run.cost_usd)} ({priced})"
    )
    if run.stop_reason:
        out.print(f"  stopped: {run.stop_reason}")
    config = ", ".join(f"{k}={v}" for k, v in run.config.items() if v is not None)
    out.print(f"  config: {config}")
    for key, value in sorted(run.metrics.items()):
        out.print(f"  {key}: {value}")
    out.print(f"  checkpoints: {', '.join(str(c['step']) for c in checkpoints) or 'none'}")
    _print_rollout(out, run.latest_rollout)
    if run.metadata.get("tensorboard_dir"):  # --report-to tensorboard
        out.print(f"  tensorboard: {run.metadata['tensorboard_dir']} on the models volume")


def _print_rollout(out: Any, rollout: dict[str, Any] | None) -> None:
    """The latest rollout: GRPO's scored group, or the sample answers at the latest checkpoint."""
    if not rollout:
        return
    out.print(f"  latest rollout (step {rollout.get('step', '?')}):")
    for sample in rollout.get("samples") or []:
        answer = sample.get("completion", sample.get("output", ""))
        rewards = sample.get("rewards")
        scored = "  " + ", ".join(f"{k}={v:g}" for k, v in rewards.items()) if isinstance(rewards, dict) else ""
        out.print(f"    {sample.get('prompt', '')!r} -> {answer!r}{scored}", markup=False)


@runs.command("logs")
@click.argument("run_id")
@click.option("--follow", "-f", is_flag=True, help="Keep printing events until the run ends.")
@click.option("--after", default=0, type=click.IntRange(0), help="Only events after this sequence number.")
@json_option
@pass_state
def logs(state: CliState, run_id: str, follow: bool, after: int, as_json: bool) -> None:
    """Print a run's events (one JSON object per line with --json)."""
    import json

    from trainkit_core.runs.events import follow as follow_events

    run = _store(state).get(run_id)
    events = (
        follow_events(run.events, after=after, is_done=lambda: all_events_written(refresh_run(run)), poll_s=0.3)
        if follow
        else iter(run.events.read(after))
    )
    for event in events:
        click.echo(json.dumps(event) if as_json else describe_event(event))
        sys.stdout.flush()


@runs.command("wait")
@click.argument("run_id")
@click.option("--timeout", default=None, type=float, help="Give up after this many seconds (exit 6).")
@json_option
@pass_state
def wait(state: CliState, run_id: str, timeout: float | None, as_json: bool) -> None:
    """Wait for a run to end; exit 1 unless it succeeded."""
    run = _store(state).get(run_id).wait(timeout=timeout)
    if as_json:
        print_json(run.model_dump(mode="json"))
    else:
        print_run_summary(run)
    if run.status != "succeeded":
        sys.exit(1)


@runs.command("stop")
@click.argument("run_id")
@click.option("--wait", "wait_", is_flag=True, help="Wait until the run has stopped.")
@json_option
@pass_state
def stop(state: CliState, run_id: str, wait_: bool, as_json: bool) -> None:
    """Stop a run gracefully: it saves a checkpoint and its adapter, and ends `stopped`."""
    from trainkit_core.errors import ConflictError

    run = refresh_run(_store(state).get(run_id))
    if run.ended():
        raise ConflictError(f"run {run_id} already ended {run.status}")
    run.stop("stop requested from the CLI")
    if wait_:
        run.wait()
    if as_json:
        print_json(run.model_dump(mode="json"))
    elif wait_:
        print_run_summary(run)
    else:
        console().print(f"stop requested for run {run_id}; it saves its adapter and ends `stopped`")


@runs.command("cancel")
@click.argument("run_id")
@json_option
@pass_state
def cancel(state: CliState, run_id: str, as_json: bool) -> None:
    """End a run's job now, without saving (use `stop` to keep the adapter)."""
    run = _store(state).get(run_id)
    run.cancel()
    if as_json:
        print_json(run.model_dump(mode="json"))
    else:
        console().print(f"run {run_id} cancelled ({run.status})")


@runs.command("resume")
@click.argument("run_id")
@click.option("--steps", default=None, type=click.IntRange(1), help="Train to this step count (default: the run's).")
@click.option(
    "--processes",
    default=None,
    type=click.IntRange(1, 64),
    help="Go on with this many CPU processes (default: the run's).",
)
@click.option(
    "--gpus", default=None, type=click.IntRange(1, 64), help="Go on with this many GPUs (default: the run's)."
)
@click.option("--detach", is_flag=True, help="Return once the job started.")
@json_option
@pass_state
def resume(
    state: CliState,
    run_id: str,
    steps: int | None,
    processes: int | None,
    gpus: int | None,
    detach: bool,
    as_json: bool,
) -> None:
    """Continue a failed, stopped or preempted run from its latest checkpoint."""
    from trainkit_core.errors import JobError
    from trainkit_core.training.submit import resume_run

    run = resume_run(state.provider, run_id, steps=steps, processes=processes, gpus=gpus)
    if not as_json:
        console(stderr=True).print(f"resuming run {run.id} (attempt {run.attempt})")
    if not detach:
        follow_run(run, quiet=as_json)
    if as_json:
        print_json(run.model_dump(mode="json"))
    elif not detach:
        print_run_summary(run)
    if not detach and run.status not in ("succeeded", "stopped"):
        raise JobError(f"run {run.id} ended {run.status}: {run.error_message or 'no error text'}")


def register(cli: click.Group) -> None:
    cli.add_command(runs)

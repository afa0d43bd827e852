"""Following a training run in the terminal: the live progress bar, event lines, the summary.

Shared by `trainkit train`, `trainkit demo` and `trainkit runs`.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import click

from trainkit_cli.state import console


def refresh_run(run: Any) -> Any:
    """Reload the run and reconcile it when unfinished (a dead job becomes `failed`)."""
    from trainkit_core.runs.reconcile import reconcile_run

    run.reload()
    if not run.ended():
        reconcile_run(run)
    return run


def all_events_written(run: Any) -> bool:
    """Whether a follower of `run` has every event: ended, and its log holds the end (`runs.events.all_written`)."""
    from trainkit_core.runs.events import all_written

    return all_written(run.ended(), run.ended_at, run.events)


def fmt_loss(value: Any) -> str:
    return f"{value:.4f}" if isinstance(value, (int, float)) else "-"


def describe_event(event: dict[str, Any]) -> str:
    """One event as a line of text."""
    kind = event.get("type", "?")
    stamp = time.strftime("%H:%M:%S", time.localtime(event.get("time", 0)))
    head = f"#{event.get('seq', 0):<5} {stamp} {kind:<10}"
    if kind == "progress":
        parts = [f"step {event.get('step')}/{event.get('total_steps')}", f"loss {fmt_loss(event.get('loss'))}"]
        if event.get("learning_rate") is not None:
            parts.append(f"lr {event['learning_rate']:.2e}")
        if event.get("tokens_per_s"):
            parts.append(f"{event['tokens_per_s']:.0f} tok/s")
        if event.get("eta_s") is not None:
            parts.append(f"eta {event['eta_s']:.0f}s")
        if event.get("memory_mb"):
            parts.append(f"{event['memory_mb']:.0f} MB")
        return f"{head} " + "  ".join(parts)
    rest = {k: v for k, v in event.items() if k not in ("seq", "time", "type")}
    if kind == "phase":
        return f"{head} {rest.get('phase')}"
    if kind == "status":
        extra = rest.get("error") or rest.get("reason") or ""
        return f"{head} {rest.get('status')}" + (f": {extra}" if extra else "")
    if "message" in rest:
        message = rest.pop("message")
        more = " ".join(f"{k}={v}" for k, v in rest.items())
        return f"{head} {message}" + (f" ({more})" if more else "")
    return f"{head} " + " ".join(f"{k}={v}" for k, v in rest.items())


def follow_run(run: Any, *, quiet: bool = False, interruptible: bool = True) -> Any:
    """Show a live progress bar (loss, tokens/s, ETA) until the run ends; returns it reloaded.

    Ctrl-C asks whether to stop the run, detach (leave it running) or keep watching.
    """
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from trainkit_core.runs.events import follow

    err = console(stderr=True)
    after = 0
    with Progress(
        TextColumn("[bold]{task.fields[phase]:<15}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("loss {task.fields[loss]}"),
        TextColumn("{task.fields[speed]}"),
        TextColumn("eta {task.fields[eta]}"),
        TimeElapsedColumn(),
        console=err,
        disable=quiet,
        transient=False,
    ) as bar:
        task = bar.add_task("train", total=run.total_steps or None, phase=run.phase, loss="-", speed="", eta="-")
        while True:
            try:
                for event in follow(
                    run.events, after=after, is_done=lambda: all_events_written(refresh_run(run)), poll_s=0.3
                ):
                    after = event["seq"]
                    kind = event["type"]
                    if kind == "progress":
                        bar.update(
                            task,
                            total=event.get("total_steps") or None,
                            completed=event.get("step", 0),
                            loss=fmt_loss(event.get("loss")),
                            speed=f"{event['tokens_per_s']:.0f} tok/s" if event.get("tokens_per_s") else "",
                            eta=f"{event['eta_s']:.0f}s" if event.get("eta_s") is not None else "-",
                        )
                    elif kind == "phase":
                        bar.update(task, phase=event.get("phase", ""))
                    elif kind in ("warning", "checkpoint", "status") and not quiet:
                        bar.console.print(describe_event(event))
                return run
            except KeyboardInterrupt:
                if not interruptible or not sys.stdin.isatty():
                    raise
                bar.stop()
                choice = click.prompt(
                    f"\nrun {run.id} is still going: [s]top it, [d]etach (it keeps running), or [c]ontinue watching?",
                    type=click.Choice(["s", "d", "c"]),
                    default="d",
                )
                if choice == "s":
                    run.stop("stopped from the CLI (Ctrl-C)")
                    err.print(f"stop requested; waiting for run {run.id} to save its adapter")
                elif choice == "d":
                    err.print(f"detached; follow it with: trainkit runs logs {run.id} --follow")
                    return run.reload()
                bar.start()


def print_run_summary(run: Any) -> None:
    out = console()
    colour = {"succeeded": "green", "failed": "red", "stopped": "yellow"}.get(run.status, "cyan")
    out.print(f"run [bold]{run.id}[/bold]: [{colour}]{run.status}[/{colour}] at step {run.step}/{run.total_steps}")
    if run.error_message:
        out.print(f"  error: {run.error_message}")
    metrics = run.metrics or {}
    if metrics.get("first_loss") is not None and metrics.get("final_loss") is not None:
        out.print(f"  loss {metrics['first_loss']:.4f} -> {metrics['final_loss']:.4f}")
    if run.status in ("succeeded", "stopped"):
        out.print(f"  model: trained/{run.id}")

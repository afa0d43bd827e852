"""Sweeps: several runs over a grid of settings, under one group id.

``expand_grid(["learning_rate=1e-3,1e-2", "lora_r=4,8"])`` gives the four
combinations; a misspelt field gets a "did you mean" (modal-dojo's `TrainingGroup`
does the same). `start_sweep` checks every combination's `TrainConfig` before it
starts any run, then starts them (at most `max_parallel` at once when given) with
``metadata.group_id``; `compare` turns the finished runs into rows for a table.
No heavy imports.
"""

from __future__ import annotations

import difflib
import itertools
import secrets
import time
from collections.abc import Callable, Sequence
from typing import Any

from trainkit_core.errors import UsageError
from trainkit_core.runs.training_run import TrainingRun
from trainkit_core.training.config import TUNABLE_FIELDS, TrainConfig

#: Short names a grid may use for a field.
ALIASES = {"lr": "learning_rate", "r": "lora_r", "alpha": "lora_alpha", "bs": "batch_size"}


def new_group_id(now: float | None = None) -> str:
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(now if now is not None else time.time()))
    return f"grp-{stamp}-{secrets.token_hex(3)}"


def parse_axis(text: str) -> tuple[str, list[str]]:
    """``"lr=1e-3,1e-2"`` -> ("learning_rate", ["1e-3", "1e-2"])."""
    key, sep, values = text.partition("=")
    key = key.strip().replace("-", "_")
    if not sep or not key or not values.strip():
        raise UsageError(f"--grid {text!r} must look like name=value1,value2")
    key = ALIASES.get(key, key)
    if key not in TUNABLE_FIELDS:
        close = difflib.get_close_matches(key, [*TUNABLE_FIELDS, *ALIASES], n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise UsageError(f"--grid: {key!r} is not a field a sweep can vary{hint} (fields: {', '.join(TUNABLE_FIELDS)})")
    items = [v.strip() for v in values.split(",") if v.strip()]
    if len(set(items)) != len(items):
        raise UsageError(f"--grid {text!r} repeats a value")
    return key, items


def expand_grid(axes: Sequence[str]) -> list[dict[str, str]]:
    """Every combination of the axes, in order (the last axis varies fastest)."""
    parsed = [parse_axis(a) for a in axes]
    keys = [k for k, _ in parsed]
    if len(set(keys)) != len(keys):
        raise UsageError("--grid names a field twice")
    if not parsed:
        raise UsageError("a sweep needs at least one --grid name=v1,v2")
    return [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*(v for _, v in parsed))]


def sweep_configs(base: dict[str, Any], axes: Sequence[str]) -> list[tuple[dict[str, str], TrainConfig]]:
    """The config of each combination, all validated before any run starts."""
    configs = []
    for combo in expand_grid(axes):
        try:
            configs.append((combo, TrainConfig.parse({**base, **combo})))
        except UsageError as exc:
            raise UsageError(f"sweep combination {combo}: {exc.message}") from None
    return configs


def start_sweep(
    provider: Any,
    base: dict[str, Any],
    axes: Sequence[str],
    *,
    max_parallel: int = 0,
    on_start: Callable[[TrainingRun, dict[str, str]], None] | None = None,
    poll_s: float = 2.0,
    budget: dict[str, Any] | None = None,
    on_skip: Callable[[dict[str, str], str], None] | None = None,
) -> tuple[str, list[TrainingRun]]:
    """Start every combination under a new group id; returns (group id, runs).

    With `max_parallel` > 0, waits for running ones to end before starting more.
    `budget` is the whole group's (group_max_cost_usd, group_max_duration_s): every run
    stops once the group has spent it, and a combination not started by then is
    skipped (`on_skip` hears of it).
    """
    from trainkit_core.training.budget import group_over_budget
    from trainkit_core.training.submit import start_run

    configs = sweep_configs(base, axes)
    group_id = new_group_id()
    runs: list[TrainingRun] = []
    limits = {k: float(v) for k, v in (budget or {}).items() if v is not None}
    for combo, config in configs:
        while max_parallel and sum(not r.reload().done() for r in runs) >= max_parallel:
            time.sleep(poll_s)
        spent = group_over_budget([r.reload() for r in runs], limits) if limits and runs else None
        if spent is not None:
            if on_skip is not None:
                on_skip(combo, spent)
            continue
        run = start_run(provider, config, metadata={"group_id": group_id, "sweep": combo}, budget=limits or None)
        runs.append(run)
        if on_start is not None:
            on_start(run, combo)
    return group_id, runs


def compare(runs: Sequence[TrainingRun]) -> list[dict[str, Any]]:
    """One row per run: its grid values, status, losses, eval metrics, duration; best final loss first."""
    rows = []
    for run in runs:
        metrics = run.metrics or {}
        rows.append(
            {
                "run_id": run.id,
                "params": dict(run.metadata.get("sweep", {})),
                "status": run.status,
                "step": run.step,
                "first_loss": metrics.get("first_loss"),
                "final_loss": metrics.get("final_loss"),
                **{k: v for k, v in metrics.items() if k.startswith("eval_")},
                "duration_s": run.duration_seconds,
                "gpu_seconds": run.gpu_seconds,
                "cost_usd": run.cost_usd,
            }
        )
    return sorted(rows, key=lambda r: (r["final_loss"] is None, r["final_loss"] or 0.0))

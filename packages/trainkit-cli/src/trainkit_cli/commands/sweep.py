"""`trainkit sweep --dataset NAME --grid lr=1e-3,1e-2 --grid lora_r=4,8`: a group of runs.

Every combination is validated before any run starts; the runs share a group id
(``trainkit runs list --group ID``). Unless `--detach`, the command waits for all of
them and prints a comparison table, best final loss first.
"""

from __future__ import annotations

from typing import Any

import click

from trainkit_cli.state import CliState, console, json_option, pass_state, print_json
from trainkit_cli.train_options import budget_options, config_options, config_values


@click.command()
@config_options
@budget_options
@click.option(
    "--grid", "axes", multiple=True, required=True, metavar="NAME=V1,V2", help="A field and its values (repeat)."
)
@click.option("--max-parallel", default=0, type=click.IntRange(0), help="Runs at once (0: all).")
@click.option("--detach", is_flag=True, help="Start the runs and return.")
@click.option("--timeout", default=None, type=float, help="Give up waiting after this many seconds.")
@json_option
@pass_state
def sweep(
    state: CliState,
    axes: tuple[str, ...],
    max_parallel: int,
    detach: bool,
    timeout: float | None,
    as_json: bool,
    max_cost: float | None,
    max_duration: float | None,
    **kwargs: Any,
) -> None:
    """Start one run per combination of the grid, then compare them."""
    from trainkit_core.runs.training_run import wait_all
    from trainkit_core.training.sweep import compare, start_sweep

    err = console(stderr=True)

    def started(run: Any, combo: dict[str, str]) -> None:
        if not as_json:
            err.print(f"started {run.id}: " + ", ".join(f"{k}={v}" for k, v in combo.items()))

    def skipped(combo: dict[str, str], reason: str) -> None:
        if not as_json:
            err.print(f"not started ({reason}): " + ", ".join(f"{k}={v}" for k, v in combo.items()))

    group_id, runs = start_sweep(
        state.provider,
        config_values(kwargs),
        list(axes),
        max_parallel=max_parallel,
        on_start=started,
        on_skip=skipped,
        budget={"group_max_cost_usd": max_cost, "group_max_duration_s": max_duration},
    )
    if not as_json:
        err.print(f"sweep group [bold]{group_id}[/bold]: {len(runs)} runs")
    if detach:
        if as_json:
            print_json({"group_id": group_id, "runs": [r.id for r in runs]})
        return
    wait_all(runs, timeout=timeout, poll_interval=2.0)
    rows = compare(runs)
    if as_json:
        from trainkit_core.runs.pricing import group_totals

        print_json({"group_id": group_id, "runs": rows, "totals": group_totals(runs)})
        return
    from rich.table import Table

    keys = list(dict.fromkeys(k for row in rows for k in row["params"]))
    extra = list(dict.fromkeys(k for row in rows for k in row if k.startswith("eval_")))
    table = Table(title=f"sweep {group_id}")
    from trainkit_core.runs.pricing import format_cost, group_totals

    for column in ("run", *keys, "status", "step", "first loss", "final loss", *extra, "time", "cost"):
        table.add_column(column)

    def num(value: Any) -> str:
        return f"{value:.4f}" if isinstance(value, (int, float)) else "-"

    for row in rows:
        table.add_row(
            row["run_id"],
            *(str(row["params"].get(k, "")) for k in keys),
            row["status"],
            str(row["step"]),
            num(row["first_loss"]),
            num(row["final_loss"]),
            *(num(row.get(k)) for k in extra),
            f"{row['duration_s']:.0f}s" if row["duration_s"] else "-",
            format_cost(row["cost_usd"]),
        )
    console().print(table)
    totals = group_totals(runs)
    console().print(f"sweep total: {totals['gpu_seconds']:.0f} GPU-s, cost {format_cost(totals['cost_usd'])}")


def register(cli: click.Group) -> None:
    cli.add_command(sweep)

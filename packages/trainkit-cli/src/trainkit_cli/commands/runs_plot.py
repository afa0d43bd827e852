"""`trainkit runs plot ID [ID…] [--out loss.png]`: the loss curve of one or more runs.

Attached to the `runs` group that `commands/runs.py` defines (modules register in
alphabetical order, so that group exists by the time this one runs); when it is
absent, a bare `runs` group is made so the command still works.
"""

from __future__ import annotations

from pathlib import Path

import click

from trainkit_cli.commands.runs import runs
from trainkit_cli.state import CliState, console, json_option, pass_state, print_json


@click.command("plot")
@click.argument("run_ids", metavar="ID [ID…]", nargs=-1, required=True)
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write a PNG here (needs trainkit-cli[plot]); without it, print a sparkline.",
)
@click.option(
    "--width", default=60, show_default=True, type=click.IntRange(8, 400), help="Sparkline width in characters."
)
@json_option
@pass_state
def plot(state: CliState, run_ids: tuple[str, ...], out: Path | None, width: int, as_json: bool) -> None:
    """Plot the training loss of runs (several IDs are overlaid)."""
    from trainkit_cli.plot import loss_series, read_run_events, sparkline, write_loss_png
    from trainkit_core.runs.training_run import RunStore

    store = RunStore.for_provider(state.provider)
    series = [loss_series(run_id, read_run_events(store, run_id)) for run_id in dict.fromkeys(run_ids)]
    if out is not None:
        write_loss_png(series, out)
    if as_json:
        print_json(
            {
                "out": str(out) if out is not None else None,
                "runs": [{"run_id": s.run_id, "steps": s.steps, "losses": s.losses} for s in series],
            }
        )
        return
    term = console()
    name_width = max(len(s.run_id) for s in series)
    everything = [loss for s in series for loss in s.losses]
    scale = (min(everything), max(everything)) if everything else None
    for s in series:
        if not len(s):
            term.print(f"{s.run_id:<{name_width}}  [dim]no loss reported yet[/dim]")
            continue
        summary = (
            f"loss {s.losses[0]:.4g} → {s.losses[-1]:.4g} (min {min(s.losses):.4g}), steps {s.steps[0]}–{s.steps[-1]}"
        )
        line = "" if out is not None else f"{sparkline(s.losses, width, scale=scale)}  "
        term.print(f"{s.run_id:<{name_width}}  {line}{summary}", soft_wrap=True)
    if out is not None:
        term.print(f"wrote {out}")


def register(cli: click.Group) -> None:
    runs.add_command(plot)

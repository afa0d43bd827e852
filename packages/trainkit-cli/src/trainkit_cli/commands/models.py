"""`trainkit models`: the trained models on the provider's models volume."""

from __future__ import annotations

import time

import click

from trainkit_cli.state import CliState, console, human_size, json_option, pass_state, print_json


def _metric(metrics: dict, *names: str) -> str:  # type: ignore[type-arg]
    for name in names:
        value = metrics.get(name)
        if isinstance(value, (int, float)):
            return f"{value:.3g}"
    return ""


@click.group("models", invoke_without_command=True)
@json_option
@pass_state
@click.pass_context
def models_command(ctx: click.Context, state: CliState, as_json: bool) -> None:
    """List trained models (trained/<run id>): base, preset, dataset, metrics, created, size.

    `models download` and `models rm` are added by `commands/models_files.py`.
    """
    if ctx.invoked_subcommand is not None:
        return
    from trainkit_core.models.trained import list_trained_models

    models = list_trained_models(state.provider.volume("models"))
    if as_json:
        print_json({"models": [m.as_dict() for m in models]})
        return
    out = console()
    if not models:
        out.print("no trained models yet (trainkit train --dataset NAME starts a run)")
        return
    from rich.table import Table

    table = Table(title="trained models", title_justify="left")
    for column in ("model path", "preset", "base model", "dataset", "final loss", "eval EM", "created", "size"):
        # A model path is what the user copies next: wrap it rather than cut it.
        table.add_column(
            column,
            justify="right" if column in ("final loss", "eval EM", "size") else "left",
            overflow="fold",
            no_wrap=column != "model path",
        )
    for m in models:
        created = time.strftime("%Y-%m-%d %H:%M", time.localtime(m.created_at)) if m.created_at else ""
        table.add_row(
            m.model_path,
            m.preset or "-",
            m.base_model,
            m.dataset_id,
            _metric(m.metrics, "final_loss", "loss"),
            _metric(m.metrics, "eval_exact_match"),
            created,
            human_size(m.size_bytes),
        )
    out.print(table)


def register(cli: click.Group) -> None:
    cli.add_command(models_command)

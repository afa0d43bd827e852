"""`trainkit models download PATH OUT` and `trainkit models rm PATH`: trained models and exports.

`download` streams a trained model or an export to a local folder; `rm` removes one
(`trainkit_core.runs.retention.delete_model`).

Attached to the `models` group that `commands/models.py` defines (modules register in
alphabetical order, so the group exists by the time this one runs).
"""

from __future__ import annotations

from pathlib import Path

import click

from trainkit_cli.state import CliState, console, human_size, json_option, pass_state, print_json


def _models_group(cli: click.Group) -> click.Group:
    group = cli.commands.get("models")
    if isinstance(group, click.Group):
        return group

    @cli.group("models")
    def models() -> None:
        """Trained models and exports on the models volume."""

    return models


@click.command("download")
@click.argument("path", metavar="PATH")
@click.argument("out", metavar="OUT", type=click.Path(file_okay=False, path_type=Path))
@json_option
@pass_state
def download_command(state: CliState, path: str, out: Path, as_json: bool) -> None:
    """Stream PATH (trained/<run id>[/checkpoints/<step>] or exports/<…>) into folder OUT (new or empty)."""
    from trainkit_core.export.merged import download

    written = download(state.provider.volume("models"), path, out)
    if as_json:
        print_json({"path": path, "out": str(out), "bytes": written})
        return
    console().print(f"downloaded {path} to {out} ({human_size(written)})")


@click.command("rm")
@click.argument("paths", metavar="PATH [PATH…]", nargs=-1, required=True)
@click.option("--dry-run", is_flag=True, help="Say what would be removed and the bytes it frees; remove nothing.")
@json_option
@pass_state
def rm_command(state: CliState, paths: tuple[str, ...], dry_run: bool, as_json: bool) -> None:
    """Remove trained models (trained/<run id>, with checkpoints), checkpoints or exports (exports/<…>)."""
    from trainkit_core.runs.retention import delete_model
    from trainkit_core.runs.training_run import RunStore

    store = RunStore.for_provider(state.provider)
    removed = [delete_model(store, path, dry_run=dry_run).as_dict() for path in dict.fromkeys(paths)]
    total = sum(r["bytes"] for r in removed)
    if as_json:
        print_json({"removed": removed, "bytes": total, "dry_run": dry_run})
        return
    for r in removed:
        console().print(f"  {r['paths'][0]} ({human_size(r['bytes'])})")
    console().print(f"{'would free' if dry_run else 'freed'} {human_size(total)}")


def register(cli: click.Group) -> None:
    group = _models_group(cli)
    group.add_command(download_command)
    group.add_command(rm_command)

"""`trainkit models download PATH OUT`: a trained model or an export, streamed to a local folder.

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
    from trainkit_core.exports import download

    written = download(state.provider.volume("models"), path, out)
    if as_json:
        print_json({"path": path, "out": str(out), "bytes": written})
        return
    console().print(f"downloaded {path} to {out} ({human_size(written)})")


def register(cli: click.Group) -> None:
    _models_group(cli).add_command(download_command)

"""`trainkit gc`: remove dataset versions and files nothing references.

The work is `trainkit_core.runs.retention.collect_garbage`; `--dry-run` lists what would go
and the bytes it would free.
"""

from __future__ import annotations

import click

from trainkit_cli.state import CliState, console, human_size, json_option, pass_state, print_json


@click.command("gc")
@click.option("--dry-run", is_flag=True, help="Say what would be removed and the bytes it frees; remove nothing.")
@json_option
@pass_state
def gc_command(state: CliState, dry_run: bool, as_json: bool) -> None:
    """Remove dataset versions no run uses and is not current, their blobs, and abandoned temporary files."""
    from trainkit_core.runs.retention import collect_garbage
    from trainkit_core.runs.training_run import RunStore

    removal = collect_garbage(RunStore.for_provider(state.provider), state.provider.volume("data"), dry_run=dry_run)
    if as_json:
        print_json(removal.as_dict())
        return
    out = console()
    for path in removal.paths:
        out.print(f"  {path}")
    for note in removal.skipped:
        out.print(f"warning: {note}")
    verb = "would free" if dry_run else "freed"
    out.print(f"{verb} {human_size(removal.bytes)} in {len(removal.paths)} paths")


def register(cli: click.Group) -> None:
    cli.add_command(gc_command)

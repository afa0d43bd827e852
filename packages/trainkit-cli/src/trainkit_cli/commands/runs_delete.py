"""`trainkit runs delete ID [ID…]`: a run's record, events, history, checkpoints and trained model.

Attached to the `runs` group that `commands/runs.py` defines (modules register in
alphabetical order, so that group exists by the time this one runs). The work is
`trainkit_core.runs.retention.delete_run`: a running run is refused with the reason, and a
delete that was interrupted is finished by running it again.
"""

from __future__ import annotations

import click

from trainkit_cli.commands.runs import runs
from trainkit_cli.state import CliState, console, human_size, json_option, pass_state, print_json


@click.command("delete")
@click.argument("run_ids", metavar="ID [ID…]", nargs=-1, required=True)
@click.option(
    "--keep-model", is_flag=True, help="Keep trained/<run id> (the model and its checkpoints) and its exports."
)
@click.option("--dry-run", is_flag=True, help="Say what would be removed and the bytes it frees; remove nothing.")
@json_option
@pass_state
def delete_command(state: CliState, run_ids: tuple[str, ...], keep_model: bool, dry_run: bool, as_json: bool) -> None:
    """Delete runs: record, events, history and (unless --keep-model) the trained model and checkpoints."""
    from trainkit_core.runs.retention import delete_run
    from trainkit_core.runs.training_run import RunStore

    store = RunStore.for_provider(state.provider)
    done = []
    for run_id in dict.fromkeys(run_ids):
        removal = delete_run(store, run_id, keep_model=keep_model, dry_run=dry_run)
        done.append({"run_id": run_id, **removal.as_dict()})
        if not as_json:
            verb = "would free" if dry_run else "freed"
            again = " (finished an interrupted delete)" if removal.resumed else ""
            console().print(
                f"{run_id}: {verb} {human_size(removal.bytes)} in {len(removal.paths)} folders, "
                f"{removal.kv_keys} stored keys{again}"
            )
            for path in removal.paths:
                console().print(f"  {path}")
    if as_json:
        print_json({"deleted": done, "bytes": sum(d["bytes"] for d in done), "dry_run": dry_run})


def register(cli: click.Group) -> None:
    runs.add_command(delete_command)

"""`trainkit train`: validate and sync the dataset, start a run, follow it live.

Everything is checked before anything starts, once (`check_request`: the
`TrainConfig`, the dataset and the method; then the provider's ability to run the
`train` job), and the plan printed is made from that same checked request; then `start_run` spawns the job and the
command shows a progress bar until the run ends (Ctrl-C: stop, detach or keep
watching). `--detach` returns at once with the run id.
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
    "--plan",
    "plan_only",
    is_flag=True,
    help="Print the plan (examples, epochs, steps, tokens, GPU, estimated time and cost) and start nothing.",
)
@click.option("--detach", is_flag=True, help="Start the run and return at once.")
@json_option
@pass_state
def train(
    state: CliState,
    detach: bool,
    as_json: bool,
    max_cost: float | None,
    max_duration: float | None,
    plan_only: bool,
    **kwargs: Any,
) -> None:
    """Fine-tune a model with LoRA on a dataset."""
    from trainkit_cli.plan_report import print_plan
    from trainkit_cli.run_progress import follow_run, print_run_summary
    from trainkit_core.errors import JobError
    from trainkit_core.training.config import TrainConfig
    from trainkit_core.training.submit import check_request, start_run

    # Checked once: the plan and the start work from the same checked request.
    budget = {"max_cost_usd": max_cost, "max_duration_s": max_duration}
    request = check_request(state.provider, TrainConfig.parse(config_values(kwargs)), budget=budget)
    if print_plan(state, request, plan_only=plan_only, as_json=as_json):
        return
    run = start_run(state.provider, request)
    err = console(stderr=True)
    if not as_json:
        err.print(
            f"started run [bold]{run.id}[/bold] on {state.provider.name} ({run.config.get('model_size') or run.config.get('base_model')}, dataset {run.dataset_id})"
        )
    if detach:
        if as_json:
            print_json(run.model_dump(mode="json"))
        else:
            click.echo(run.id)
        return
    follow_run(run, quiet=as_json)
    if as_json:
        print_json(run.model_dump(mode="json"))
    else:
        print_run_summary(run)
    if run.status == "failed":
        raise JobError(f"run {run.id} failed: {run.error_message or 'no error text'}")


def register(cli: click.Group) -> None:
    cli.add_command(train)

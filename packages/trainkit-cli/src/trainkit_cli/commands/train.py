"""`trainkit train`: validate and sync the dataset, start a run, follow it live.

Everything is checked before anything starts (`TrainConfig`, the dataset, the
provider's ability to run the `train` job); then `start_run` spawns the job and the
command shows a progress bar until the run ends (Ctrl-C: stop, detach or keep
watching). `--detach` returns at once with the run id.
"""

from __future__ import annotations

from typing import Any

import click

from trainkit_cli.state import CliState, console, json_option, pass_state, print_json


def config_options(func: Any) -> Any:
    """The options that make a `TrainConfig` (shared with `trainkit sweep`)."""
    options = [
        click.option("--dataset", required=True, help="Dataset name (a folder of the datasets dir)."),
        click.option(
            "--model-size", default=None, help="Preset: tiny (CPU, built locally), 4b, 12b or 31b. Default tiny."
        ),
        click.option(
            "--base-model",
            default=None,
            help="Instead of a preset: a Hugging Face id, a model folder (local provider), or hf-cache:FOLDER.",
        ),
        click.option("--chat-format", default=None, type=click.Choice(["gemma3", "gemma4"]), help="Override."),
        click.option("--steps", default=None, type=int, help="Optimizer steps (default: the preset's)."),
        click.option("--epochs", default=None, type=float, help="Epochs, instead of --steps."),
        click.option("--lr", "learning_rate", default=None, type=float, help="Learning rate."),
        click.option(
            "--lr-scheduler",
            default=None,
            type=click.Choice(["constant", "linear", "cosine"]),
            help="Learning-rate schedule (default: the preset's).",
        ),
        click.option("--warmup-steps", default=None, type=int, help="Warm-up steps (default: the preset's)."),
        click.option("--lora-r", default=None, type=int, help="LoRA rank."),
        click.option("--lora-alpha", default=None, type=int, help="LoRA alpha."),
        click.option("--batch-size", default=None, type=int, help="Per-device batch size."),
        click.option("--grad-accum", default=None, type=int, help="Gradient accumulation steps."),
        click.option("--max-seq-length", default=None, type=int, help="Longest example, in tokens."),
        click.option("--save-every", default=None, type=int, help="Checkpoint every N steps (default 50)."),
        click.option("--seed", default=None, type=int, help="Random seed (default 42)."),
        click.option("--backend", default=None, type=click.Choice(["auto", "hf", "unsloth"]), help="Force a backend."),
        click.option("--gpu", default=None, help="GPU for this run (default TRAINKIT_GPU, else the preset's)."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def budget_options(func: Any) -> Any:
    """`--max-cost` and `--max-duration` (shared with `trainkit sweep`, where they bound the whole group)."""
    func = click.option(
        "--max-duration",
        default=None,
        type=click.FloatRange(min=0, min_open=True),
        metavar="SECONDS",
        help="Stop gracefully (adapter saved, status stopped) after this much job time.",
    )(func)
    return click.option(
        "--max-cost",
        default=None,
        type=click.FloatRange(min=0, min_open=True),
        metavar="USD",
        help="Stop gracefully (adapter saved, status stopped) once the run has cost this much (see the price table).",
    )(func)


def config_values(kwargs: dict[str, Any]) -> dict[str, Any]:
    """The given (non-None) `TrainConfig` fields out of the command's keyword arguments."""
    from trainkit_core.training.config import TrainConfig

    return {k: v for k, v in kwargs.items() if k in TrainConfig.model_fields and v is not None}


def register(cli: click.Group) -> None:
    @cli.command()
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
        from trainkit_cli.commands.plan import print_plan
        from trainkit_cli.commands.runs import follow_run, print_run_summary
        from trainkit_core.errors import JobError
        from trainkit_core.training.config import TrainConfig
        from trainkit_core.training.submit import start_run

        config = TrainConfig.parse(config_values(kwargs))
        if print_plan(state, config, plan_only=plan_only, as_json=as_json):
            return
        run = start_run(state.provider, config, budget={"max_cost_usd": max_cost, "max_duration_s": max_duration})
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

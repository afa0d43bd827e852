"""`trainkit demo`: the README's main job, end to end on the current provider.

1. validate the demo dataset (``datasets/demo``, else the copy shipped in trainkit-core) and sync it to the data volume
   (only when its content changed);
2. train the ``tiny`` preset (built locally, never downloaded) with a progress bar;
3. evaluate base vs tuned on the dataset's eval split and print the table;
4. generate with the result (and with its base, for comparison).

`python3 run.py demo` runs it from a fresh clone through the nox session ``demo``.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
import time
from pathlib import Path

import click

from trainkit_cli.state import CliState, console, pass_state

#: Prompts the demo answers after training: words of the demo task, in combinations the dataset does not hold.
DEMO_PROMPTS = ("Opposites: happy early loud", "Opposites: cold night far", "Opposites: hot big")
#: What the closing hint suggests trying (also a combination the dataset does not hold).
TRY_PROMPT = "Opposites: young rich strong"


def trainkit_command() -> str:
    """How a new shell runs this very `trainkit`: the bare name only where that finds it.

    A virtual environment (the one `python3 run.py demo` makes, or one the user
    activated) is gone in a new shell, so its `trainkit` is printed with its full path;
    without the console script (``python -m trainkit_cli``) the interpreter's path.
    """
    script = Path(sys.executable).parent / "trainkit"
    in_venv = sys.prefix != sys.base_prefix
    on_path = shutil.which("trainkit")
    if not in_venv and on_path and Path(on_path).resolve() == script.resolve():
        return "trainkit"
    if script.is_file() and os.access(script, os.X_OK):
        return shlex.quote(str(script))
    return f"{shlex.quote(sys.executable)} -m trainkit_cli"


@click.command("demo")
@click.option(
    "--dataset",
    default="demo",
    show_default=True,
    help="Dataset under TRAINKIT_DATASETS_DIR (demo also ships with trainkit).",
)
@click.option("--steps", type=click.IntRange(min=1), default=None, help="Training steps (default: the tiny preset's).")
@click.option("--prompt", "prompts", multiple=True, help="Prompts to answer at the end (repeatable).")
@pass_state
def demo(state: CliState, dataset: str, steps: int | None, prompts: tuple[str, ...]) -> None:
    """Validate and sync the demo dataset, train tiny, evaluate base vs tuned, generate."""
    from rich.markup import escape
    from rich.table import Table

    import trainkit_core.inference.client as client
    from trainkit_cli.eval_report import print_report
    from trainkit_cli.run_progress import follow_run, print_run_summary
    from trainkit_core.datasets.local import find_local
    from trainkit_core.datasets.sync import sync_dataset
    from trainkit_core.datasets.validate import DatasetInvalidError, length_check_for, validate_local
    from trainkit_core.errors import JobError
    from trainkit_core.evals.client import run_eval
    from trainkit_core.training.config import TrainConfig
    from trainkit_core.training.submit import start_run

    # The tiny model's matrices are too small for torch's threads to pay off: on the
    # shared 2-core machine the whole demo took 47 s with one thread and over 16 min
    # with the default two. The jobs started below inherit this; a user's value wins.
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    out = console()
    started = time.monotonic()
    # The dataset first: a bad name is the user's to fix, whatever is installed.
    local = find_local(Path(state.settings.datasets.datasets_dir), dataset)
    provider = state.provider
    provider.deployment().deploy()
    provider.deployment().check(["train", "infer", "eval"])

    out.rule(f"1. dataset {dataset}")
    length = length_check_for("tiny")
    report = validate_local(local.path, length=length)
    if not report.ok():
        raise DatasetInvalidError(report)
    out.print(f"validated {escape(str(local.path))}: {escape(report.summary())}")
    synced = sync_dataset(provider, dataset, length=length)
    what = "unchanged on the volume" if synced.unchanged else f"uploaded {synced.uploaded_bytes} bytes"
    out.print(f"synced to the {provider.name} data volume: version {synced.version} ({what})")

    out.rule("2. train the tiny preset")
    config = TrainConfig.parse({"dataset": dataset, "model_size": "tiny", **({"steps": steps} if steps else {})})
    run = start_run(provider, config)
    out.print(f"run {run.id} started (tiny Gemma-architecture model, built locally)")
    follow_run(run, interruptible=False)
    run.reload()
    print_run_summary(run)
    if run.status != "succeeded":
        raise JobError(f"run {run.id} ended {run.status}: {run.error_message or 'no error text'}")
    model_path = f"trained/{run.id}"
    gate = run.metrics
    if "gate_effect_max_abs_diff" in gate:
        out.print(
            f"adapter gate: saved = trained (max |Δlogit| {gate['gate_round_trip_max_abs_diff']:.2g}), "
            f"effect on the base {gate['gate_effect_max_abs_diff']:.3g}"
        )

    out.rule("3. evaluate base vs tuned")
    evaluation = run_eval(provider, model_path=model_path, dataset=dataset)
    print_report(evaluation, title=f"{model_path} on the {dataset} eval split ({evaluation['report_id']})")

    out.rule("4. generate")
    table = Table(show_lines=False)
    table.add_column("prompt")
    table.add_column("base")
    table.add_column("tuned")
    for prompt in prompts or DEMO_PROMPTS:
        answers = [
            client.generate(provider, {"model_path": model_path, "prompt": prompt, "max_new_tokens": 24, "base": base})
            for base in (True, False)
        ]
        table.add_row(escape(prompt), *(escape(repr(a["text"])) for a in answers))
    out.print(table)
    provider_option = "" if provider.name == "local" else f" --provider {provider.name}"
    try_command = f"{trainkit_command()} infer{provider_option} --model-path {model_path} --prompt '{TRY_PROMPT}'"
    out.print(
        f"done in {time.monotonic() - started:.0f} s. The demo's 60 words are 30 pairs of opposites, e.g. hot/cold, "
        "big/small, early/late, loud/quiet, rich/poor, strong/weak (the dictionary is in scripts/make_demo_dataset.py)."
    )
    # Last and on a line of its own, never wrapped: it is copied into a shell as printed.
    out.print(f"Try: {try_command}", markup=False, highlight=False, soft_wrap=True)


def register(cli: click.Group) -> None:
    cli.add_command(demo)

"""`trainkit eval add|run|show|sets`: eval sets on the eval volume and reports of tuned vs base."""

from __future__ import annotations

from pathlib import Path

import click

from trainkit_cli.eval_report import print_report
from trainkit_cli.state import CliState, console, json_option, pass_state, print_json


@click.group("eval")
def eval_group() -> None:
    """Evaluate trained models: eval sets, runs, reports."""


@eval_group.command("add")
@click.option("--name", "name", required=True, help="Eval set name (lower-case letters, digits, - and _).")
@click.option("--replace", is_flag=True, help="Replace the set instead of adding to it.")
@click.argument("file", type=click.Path(dir_okay=False))
@json_option
@pass_state
def eval_add(state: CliState, name: str, replace: bool, file: str, as_json: bool) -> None:
    """Store the examples of FILE (JSONL: messages ending with the reference answer) in set NAME."""
    import trainkit_core.evals.client as client
    import trainkit_core.evals.sets as sets
    from trainkit_core.errors import UsageError

    try:
        data = Path(file).read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read {file}: {exc.strerror}") from None
    examples = sets.parse_jsonl(data, file=file)
    result = client.add_examples(state.provider, name, examples, replace=replace)
    if as_json:
        print_json(result)
    else:
        console().print(
            f"eval set {name}: {result['added']} added, {result['skipped']} already there, {result['total']} in all"
        )


@eval_group.command("sets")
@json_option
@pass_state
def eval_sets(state: CliState, as_json: bool) -> None:
    """List the eval sets on the eval volume."""
    import trainkit_core.evals.sets as sets

    found = sets.list_sets(state.provider.volume("eval"))
    if as_json:
        print_json({"sets": found})
        return
    for s in found or [{"name": "(none)", "examples": 0}]:
        click.echo(f"{s['name']}\t{s['examples']} examples")


@eval_group.command("run")
@click.option("--model-path", required=True, metavar="PATH", help="trained/<run id> (or a checkpoint).")
@click.option("--set", "eval_set", metavar="NAME", help="An eval set (default: the model's dataset's eval split).")
@click.option("--dataset", metavar="NAME", help="Use this dataset's eval split.")
@click.option("--max-examples", type=click.IntRange(min=1), default=None)
@click.option("--max-new-tokens", type=click.IntRange(1, 4096), default=64, show_default=True)
@click.option("--no-base", is_flag=True, help="Skip the base model.")
@click.option("--timeout", default=3600.0, show_default=True, help="Seconds to wait for the job.")
@json_option
@pass_state
def eval_run(
    state: CliState,
    model_path: str,
    eval_set: str | None,
    dataset: str | None,
    max_examples: int | None,
    max_new_tokens: int,
    no_base: bool,
    timeout: float,
    as_json: bool,
) -> None:
    """Score a trained model and its base: loss, perplexity, exact match, token F1."""
    import trainkit_core.evals.client as client

    report = client.run_eval(
        state.provider,
        timeout=timeout,
        model_path=model_path,
        eval_set=eval_set,
        dataset=dataset,
        max_examples=max_examples,
        max_new_tokens=max_new_tokens,
        compare_base=not no_base,
    )
    if as_json:
        print_json(report)
        return
    print_report(report)
    console().print(
        f"report {report['report_id']} stored on the eval volume (trainkit eval show {report['report_id']})"
    )


@eval_group.command("show")
@click.argument("report_id")
@click.option("--examples", is_flag=True, help="Also show each example with both answers.")
@json_option
@pass_state
def eval_show(state: CliState, report_id: str, examples: bool, as_json: bool) -> None:
    """Show a stored eval report."""
    import trainkit_core.evals.client as client

    report = client.get_report(state.provider, report_id, examples=examples)
    if as_json:
        print_json(report)
        return
    print_report(report)
    if examples:
        out = console()
        for row in report.get("examples", []):
            prompt = row["messages"][-1]["content"] if row.get("messages") else ""
            out.print(f"[bold]{prompt}[/bold]  reference: {row['reference']}")
            for label in ("base", "tuned"):
                if label in row:
                    out.print(f"  {label:5}: {row[label]['answer']}  (EM {row[label]['exact_match']:.0f})")


def register(cli: click.Group) -> None:
    cli.add_command(eval_group)

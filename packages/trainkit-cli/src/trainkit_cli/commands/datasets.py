"""`trainkit datasets`, `trainkit sync NAME`, `trainkit validate NAME`.

Thin: the work is in `trainkit_core.datasets`; the data volume comes from the
provider facade (`state.provider.volume("data")`), so these commands work the same on
every provider.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from trainkit_cli.state import CliState, console, human_size, json_option, pass_state, print_json

if TYPE_CHECKING:
    from trainkit_core.datasets.problems import Report

#: Uploads at least this large get a progress bar.
PROGRESS_MIN_BYTES = 1 << 20


def _length_options(func: Any) -> Any:
    func = click.option(
        "--max-tokens",
        type=click.IntRange(min=1),
        default=None,
        help="Longest example allowed (default: the model size's, else 2048).",
    )(func)
    return click.option(
        "--model-size", default=None, metavar="SIZE", help="Check lengths for this model preset (tiny, 4b, 12b, 31b)."
    )(func)


def _print_report(report: Report, strict: bool) -> None:
    from rich.markup import escape

    out = console()
    for problem in report.problems:
        colour = "red" if problem.severity == "error" else "yellow"
        out.print(
            f"{problem.where}: [{colour}]{problem.severity}[/{colour}] {escape('[' + problem.code + '] ' + problem.message)}",
            markup=True,
            soft_wrap=True,
        )
    status = "[green]ok[/green]" if report.ok(strict=strict) else "[red]failed[/red]"
    where = f", version {report.version}" if report.version else ""
    out.print(f"{status}: {escape(report.summary())}{where}", soft_wrap=True)
    if report.length_check:
        out.print(f"  lengths: {report.length_check}")


@click.group("datasets", invoke_without_command=True)
@click.option("--no-remote", is_flag=True, help="Do not ask the provider's data volume which version it holds.")
@json_option
@pass_state
def datasets_command(state: CliState, no_remote: bool, as_json: bool) -> None:
    """List the local datasets (TRAINKIT_DATASETS_DIR) and whether the data volume holds the same version."""
    if click.get_current_context().invoked_subcommand is not None:
        return
    from trainkit_core.datasets.local import list_local
    from trainkit_core.datasets.sync import synced_hash
    from trainkit_core.errors import TrainkitError

    folder = Path(state.settings.datasets.datasets_dir)
    rows = [d.as_dict() for d in list_local(folder)]
    volume = None
    remote_error = None
    if not no_remote and rows:
        try:
            volume = state.provider.volume("data")
        except TrainkitError as exc:
            remote_error = exc.message
    for row in rows:
        if volume is None:
            row["synced"] = "unknown"
            continue
        try:
            remote = synced_hash(volume, row["name"])
        except TrainkitError as exc:
            row["synced"], remote_error = "unknown", exc.message
            continue
        row["synced"] = "never" if remote is None else ("same" if remote == row.get("hash") else "different")
        row["synced_hash"] = remote
    if as_json:
        print_json({"datasets_dir": str(folder), "datasets": rows, "remote_error": remote_error})
        return
    out = console()
    if not rows:
        out.print(f"no datasets in {folder} (a dataset is <dir>/<name>/dataset.toml plus JSONL files)")
        return
    from rich.table import Table

    table = Table(title=f"datasets in {folder}", title_justify="left")
    for column in ("name", "format", "files", "train", "eval", "size", "hash", "on volume"):
        table.add_column(column, justify="right" if column in ("files", "train", "eval", "size") else "left")
    for row in rows:
        if "hash" not in row:
            problem = row.get("problems", [{}])[0]
            table.add_row(row["name"], "[red]invalid[/red]", "", "", "", "", "", str(problem.get("message", "")))
            continue
        table.add_row(
            row["name"],
            row["format"],
            str(len(row["files"])),
            str(row["train_examples"]),
            str(row["eval_examples"]),
            human_size(row["size"]),
            row["hash"][:12],
            row["synced"],
        )
    out.print(table)
    if remote_error:
        out.print(f"[yellow]could not read the data volume:[/yellow] {remote_error}")


@datasets_command.command("import-openai")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.argument("name")
@click.option(
    "--validation-file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="OpenAI's validation file: the dataset's eval split.",
)
@json_option
@pass_state
def import_openai_command(state: CliState, file: Path, name: str, validation_file: Path | None, as_json: bool) -> None:
    """Make dataset NAME from an OpenAI fine-tuning FILE (supervised, DPO or reinforcement JSONL), as it is.

    The format is read from the file's first line. Checked before anything is written, with
    OpenAI's rule of at least 10 examples too: every problem is printed as file:line, exit 2.
    """
    from trainkit_core.datasets.openai_files import import_openai_file
    from trainkit_core.datasets.validate import DatasetInvalidError

    folder = Path(state.settings.datasets.datasets_dir)
    try:
        report = import_openai_file(file, name, folder, validation=validation_file)
    except DatasetInvalidError as exc:
        if as_json:
            print_json({**exc.report.as_dict(), "ok": False})
        else:
            _print_report(exc.report, strict=False)
        sys.exit(DatasetInvalidError.exit_code)
    if as_json:
        print_json({**report.as_dict(), "ok": True, "path": str(folder / name)})
        return
    _print_report(report, strict=False)
    console().print(f"made {folder / name}; train on it with: trainkit train --dataset {name}")


@click.command("sync")
@click.argument("name")
@click.option("--strict", is_flag=True, help="Refuse on warnings too (duplicates, length).")
@_length_options
@json_option
@pass_state
def sync_command(
    state: CliState, name: str, strict: bool, model_size: str | None, max_tokens: int | None, as_json: bool
) -> None:
    """Upload dataset NAME to the data volume if its content changed (validated first; atomic)."""
    from trainkit_core.datasets.sync import sync_dataset
    from trainkit_core.datasets.validate import length_check_for

    length = length_check_for(model_size, max_tokens=max_tokens)
    provider = state.provider
    if as_json or not sys.stderr.isatty():
        result = sync_dataset(provider, name, length=length, strict=strict)
    else:
        result = _sync_with_progress(provider, name, length, strict)
    if as_json:
        print_json(result.as_dict())
        return
    from rich.markup import escape

    out = console()
    if result.report:
        for problem in result.report.warnings:
            out.print(
                f"{problem.where}: [yellow]warning[/yellow] {escape('[' + problem.code + '] ' + problem.message)}",
                soft_wrap=True,
            )
    if result.unchanged:
        out.print(f"{result.name}: unchanged (version {result.version}); nothing sent")
    else:
        out.print(
            f"{result.name}: synced version {result.version}: sent {len(result.files_sent)} file(s), "
            f"{human_size(result.uploaded_bytes)}; {len(result.files_reused)} unchanged file(s) reused"
        )


@click.command("validate")
@click.argument("name")
@click.option(
    "--local", "local", is_flag=True, help="Check the local copy instead of the data volume's current version."
)
@click.option("--strict", is_flag=True, help="Fail on warnings too (duplicates, length).")
@_length_options
@json_option
@pass_state
def validate_command(
    state: CliState,
    name: str,
    local: bool,
    strict: bool,
    model_size: str | None,
    max_tokens: int | None,
    as_json: bool,
) -> None:
    """Check dataset NAME as training will read it (on the data volume), or the local copy with --local.

    Every problem is printed as file:line. Exits 2 on errors (or on warnings with --strict).
    """
    from trainkit_core.datasets.images import ImageLimits
    from trainkit_core.datasets.local import find_local
    from trainkit_core.datasets.validate import (
        DatasetInvalidError,
        length_check_for,
        validate_local,
        validate_synced,
    )

    length = length_check_for(model_size, max_tokens=max_tokens)
    if local:
        dataset = find_local(Path(state.settings.datasets.datasets_dir), name)
        limits = ImageLimits.from_settings(state.settings.datasets)
        report = validate_local(dataset.path, length=length, image_limits=limits)
    else:
        limits = ImageLimits.from_settings(state.settings.datasets)
        report = validate_synced(state.provider.volume("data"), name, length=length, image_limits=limits)
    if as_json:
        print_json({**report.as_dict(), "ok": report.ok(strict=strict), "strict": strict})
    else:
        _print_report(report, strict)
    if not report.ok(strict=strict):
        sys.exit(DatasetInvalidError.exit_code)


def register(cli: click.Group) -> None:
    cli.add_command(datasets_command)
    cli.add_command(sync_command)
    cli.add_command(validate_command)


def _sync_with_progress(provider: Any, name: str, length: Any, strict: bool) -> Any:
    """`sync_dataset` with a byte progress bar on stderr, shown for uploads of 1 MB and more."""
    from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn, TransferSpeedColumn

    from trainkit_core.datasets.sync import sync_dataset

    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        console=console(stderr=True),
        transient=True,
    ) as bar:
        task = None

        def progress(sent: int, total: int) -> None:
            nonlocal task
            if total < PROGRESS_MIN_BYTES:
                return
            if task is None:
                task = bar.add_task(f"sync {name}", total=total)
            bar.update(task, completed=sent)

        return sync_dataset(provider, name, length=length, strict=strict, progress=progress)

"""The root `trainkit` group, built in a function so nothing happens at import.

Every module in `trainkit_cli.commands` that defines `register(group)` adds its
commands; the modules import nothing heavy at module level, so `trainkit --help`
stays fast (no torch, transformers or provider SDK).
"""

from __future__ import annotations

import importlib
import pkgutil
import sys

import click

from trainkit_cli import __version__, commands
from trainkit_cli.state import CliState

PROVIDER_HELP = "Provider to use (default: TRAINKIT_PROVIDER, else local)."


def build_cli() -> click.Group:
    @click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
    @click.version_option(__version__, prog_name="trainkit")
    @click.option(
        "--provider",
        "provider_name",
        metavar="NAME",
        default=None,
        help=PROVIDER_HELP,
    )
    @click.pass_context
    def cli(ctx: click.Context, provider_name: str | None) -> None:
        """Fine-tune open chat models with LoRA on your own data, and serve them."""
        ctx.obj = CliState(provider_name=provider_name)

    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{commands.__name__}.{info.name}")
        register = getattr(module, "register", None)
        if register is not None:
            register(cli)
    accept_provider_after(cli)
    return cli


def __getattr__(name: str) -> click.Group:
    """`trainkit_cli.main.cli`, built when asked for: the documentation's CLI page reads it (mkdocs-click)."""
    if name == "cli":
        return build_cli()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def accept_provider_after(group: click.Group) -> None:
    """Give every command below the root its own `--provider`, meaning the root's.

    Users type the provider where they type the other options (`trainkit ping
    --provider modal`); click would only take it before the subcommand. Both places
    work; two different names are refused rather than one silently winning.
    """
    for command in group.commands.values():
        if not any("--provider" in getattr(p, "opts", ()) for p in command.params):
            command.params.append(
                click.Option(
                    ["--provider"],
                    metavar="NAME",
                    expose_value=False,
                    callback=_set_provider,
                    help=PROVIDER_HELP,
                )
            )
        if isinstance(command, click.Group):
            accept_provider_after(command)


def _set_provider(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    if value is None:
        return
    state = ctx.ensure_object(CliState)
    if state.provider_name not in (None, value):
        raise click.UsageError(
            f"--provider given twice with different names ({state.provider_name!r} and {value!r}); give it once",
            ctx=ctx,
        )
    state.provider_name = value


def main(argv: list[str] | None = None) -> None:
    """Console entry point: trainkit's errors become a message and an exit status."""
    from trainkit_core.errors import TrainkitError

    cli = build_cli()
    try:
        cli.main(args=argv, prog_name="trainkit", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except TrainkitError as exc:
        click.echo(f"error: {exc.message}", err=True)
        if exc.hint:
            click.echo(f"hint: {exc.hint}", err=True)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(130)
    sys.exit(0)

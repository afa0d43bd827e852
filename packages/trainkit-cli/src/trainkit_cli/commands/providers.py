"""`trainkit providers`: what is installed, from which package, able to do what."""

from __future__ import annotations

import click

from trainkit_cli.state import console, json_option, print_json


@click.command()
@json_option
def providers(as_json: bool) -> None:
    """List the installed providers with their package, version and capabilities.

    A plugin that fails to load is listed with its error (the others still work).
    """
    from trainkit_core import list_providers

    found = [p.as_dict() for p in list_providers()]
    if as_json:
        print_json(found)
        return
    from rich.markup import escape
    from rich.table import Table

    table = Table("provider", "package", "version", "capabilities", "hooks")
    for p in found:
        caps = ", ".join(name for name, on in p["capabilities"].items() if on)
        if p["error"]:
            caps = f"[red]broken[/red]: {escape(p['error'])}"
        table.add_row(p["name"], p["package"], p["version"], caps, ", ".join(h for h in p["hooks"]))
    console().print(table)


def register(cli: click.Group) -> None:
    cli.add_command(providers)

"""`trainkit app deploy|status|stop`: the provider's app lifecycle, without the provider's own CLI.

Generic over `provider.deployment()`: any provider whose manifest declares
`app_lifecycle` (Modal: deploy the app from the SDK, inspect it, stop it) gets these
commands; for the others they say so and exit non-zero.
"""

from __future__ import annotations

import contextlib
import sys
from typing import Any

import click

from trainkit_cli.state import CliState, console, json_option, pass_state, print_json


def _deployment(state: CliState) -> Any:
    return state.provider.app_lifecycle()


def _show(status: Any, provider: str, as_json: bool) -> None:
    data = {"provider": provider, "state": status.state, "url": status.url, "detail": dict(status.detail)}
    if as_json:
        print_json(data)
        return
    out = console()
    detail = data["detail"]
    name = detail.get("app_name", "")
    out.print(f"[bold]{provider}[/bold] app {name!s}: {status.state}")
    if status.url:
        out.print(f"  web API   {status.url}")
    for key in ("app_id", "version", "deployed_at", "deployed_by"):
        if detail.get(key) is not None:
            out.print(f"  {key:9} {detail[key]}")
    if detail.get("functions"):
        out.print(f"  functions {', '.join(detail['functions'])}")
    for note in detail.get("notes") or []:
        out.print(f"  [yellow]note[/yellow]      {note}")
    if detail.get("missing"):
        out.print(f"  [yellow]not deployed yet[/yellow] {', '.join(detail['missing'])} (run `trainkit app deploy`)")


@click.group()
def app() -> None:
    """Deploy, inspect and stop the provider's app (providers with an app lifecycle)."""


@app.command()
@json_option
@pass_state
def deploy(state: CliState, as_json: bool) -> None:
    """Build and deploy the app: images, volumes, functions, the web API."""
    deployment = _deployment(state)
    if as_json:  # the provider's build output goes to stderr, the answer alone to stdout
        with contextlib.redirect_stdout(sys.stderr):
            status = deployment.deploy()
    else:
        status = deployment.deploy()
    _show(status, state.provider.name, as_json)


@app.command()
@json_option
@pass_state
def status(state: CliState, as_json: bool) -> None:
    """Whether the app is deployed, its functions and the web API's URL."""
    _show(_deployment(state).status(), state.provider.name, as_json)


@app.command()
@json_option
@pass_state
def stop(state: CliState, as_json: bool) -> None:
    """Stop the app: running containers end, new calls are refused until the next deploy."""
    deployment = _deployment(state)
    deployment.stop()
    _show(deployment.status(), state.provider.name, as_json)


def register(cli: click.Group) -> None:
    cli.add_command(app)

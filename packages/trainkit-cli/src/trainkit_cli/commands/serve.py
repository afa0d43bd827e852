"""`trainkit serve`: run the web API (uvicorn), or the provider's own web endpoint.

Locally the API listens on 127.0.0.1 by default. Any other address needs
`TRAINKIT_API_TOKEN`: an open API on a network would let anyone start jobs and read
models. When the provider declares the `web_endpoint` capability and its deployment
has a `serve()` method (Modal: the dev-mode web app, like `modal serve`, printing its
URL), that runs instead of uvicorn here; such an endpoint is public, so it too needs
the token.
"""

from __future__ import annotations

import ipaddress

import click

from trainkit_cli.state import CliState, pass_state

LOOPBACK_NAMES = ("localhost",)


def is_loopback(host: str) -> bool:
    """True for 127.0.0.0/8, ::1 and `localhost`; False for anything else (0.0.0.0 included)."""
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535), help="Port to listen on.")
@click.option(
    "--log-level", default="info", show_default=True, type=click.Choice(["debug", "info", "warning", "error"])
)
@pass_state
def serve(state: CliState, host: str, port: int, log_level: str) -> None:
    """Serve the web API and the dashboard: uvicorn here, or the provider's endpoint."""
    from trainkit_core.errors import UsageError

    provider = state.provider
    no_token = state.settings.api.api_token is None
    if provider.capabilities.web_endpoint:
        serve_remote = getattr(provider.deployment(), "serve", None)
        if callable(serve_remote):
            if no_token:
                raise UsageError(
                    f"refusing to serve the {provider.name} web endpoint without a token: its URL is public",
                    hint="set TRAINKIT_API_TOKEN",
                )
            serve_remote()
            return
    if no_token and not is_loopback(host):
        raise UsageError(
            f"refusing to serve on {host!r} without a token: anyone who can reach it could start jobs",
            hint="set TRAINKIT_API_TOKEN, or listen on 127.0.0.1 (the default)",
        )

    try:
        import uvicorn

        from trainkit_api.app import create_app
    except ImportError as exc:
        from trainkit_core.errors import web_api_missing

        raise web_api_missing(exc.name or "trainkit_api") from None

    app = create_app(state.settings, provider=provider)
    click.echo(f"trainkit API on http://{host}:{port} (provider {provider.name}; Ctrl-C stops)", err=True)
    uvicorn.run(app, host=host, port=port, log_level=log_level, timeout_graceful_shutdown=5)


def register(cli: click.Group) -> None:
    cli.add_command(serve)

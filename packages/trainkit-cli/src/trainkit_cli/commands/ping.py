"""`trainkit ping`: run the ping job on the provider and show where it ran."""

from __future__ import annotations

import click

from trainkit_cli.state import CliState, console, json_option, pass_state, print_json


def register(cli: click.Group) -> None:
    @cli.command()
    @click.option("--timeout", default=300.0, show_default=True, help="Seconds to wait for the job.")
    @json_option
    @pass_state
    def ping(state: CliState, timeout: float, as_json: bool) -> None:
        """Run a tiny job on the provider: python, volumes, GPU, whether HF_TOKEN is set."""
        provider = state.provider
        deployment = provider.deployment()
        if deployment.status().state == "not-deployed":
            deployment.deploy()
        result = provider.spawn("ping").wait(timeout=timeout)
        if as_json:
            print_json(result)
            return
        out = console()
        out.print(f"[bold]{result['provider']}[/bold] ok (call {result['call_id']}, python {result['python']})")
        for kind, vol in result["volumes"].items():
            out.print(f"  volume {kind:9} {vol['path']}")
        gpu = result.get("gpu")
        out.print(f"  gpu       {gpu['name'] + ' x' + str(gpu['count']) if gpu else 'none'}")
        out.print(f"  HF_TOKEN  {'set' if result['hf_token_set'] else 'not set'}")

"""`trainkit ping`: run the ping job on the provider and show where it ran.

With `--model-size SIZE` it runs the `gpu_ping` job instead, in the image and on the
GPU that size trains on (Modal: `gpu_ping_<size>`), and reports the CUDA device and
memory, torch and CUDA versions, whether bitsandbytes and Unsloth import, and whether
HF_TOKEN is set: the check to run before a long job. On a provider without GPUs
(local) it runs on this machine and says there is no CUDA.
"""

from __future__ import annotations

from typing import Any

import click

from trainkit_cli.state import CliState, console, json_option, pass_state, print_json


def _show_gpu_ping(result: dict[str, Any]) -> None:
    out = console()
    size = result.get("model_size") or "-"
    out.print(
        f"[bold]{result['provider']}[/bold] ok (call {result['call_id']}, model size {size}, python {result['python']})"
    )
    gpu = result.get("gpu")
    if gpu:
        out.print(
            f"  gpu          {gpu['name']} x{gpu['count']}, {gpu['memory_gb']} GiB "
            f"({gpu['memory_free_gb']} GiB free), compute {gpu['capability']}"
        )
    else:
        out.print("  gpu          none (no CUDA device)")
    out.print(f"  torch        {result.get('torch') or 'not installed'}, CUDA {result.get('cuda') or 'none'}")
    for name, check in (result.get("packages") or {}).items():
        if name == "torch":
            continue
        text = (
            f"imports ({check.get('version') or '?'})"
            if check.get("ok")
            else f"[yellow]fails[/yellow]: {check.get('error')}"
        )
        out.print(f"  {name:12} {text}")
    out.print(f"  HF_TOKEN     {'set' if result['hf_token_set'] else 'not set'}")


@click.command()
@click.option("--timeout", default=300.0, show_default=True, help="Seconds to wait for the job.")
@click.option(
    "--model-size",
    default=None,
    metavar="SIZE",
    help="Ping in this size's training image on its GPU (CUDA, torch, bitsandbytes, Unsloth) instead.",
)
@json_option
@pass_state
def ping(state: CliState, timeout: float, model_size: str | None, as_json: bool) -> None:
    """Run a tiny job on the provider: python, volumes, GPU, whether HF_TOKEN is set."""
    provider = state.provider
    deployment = provider.deployment()
    if deployment.status().state == "not-deployed":
        deployment.deploy()
    if model_size:
        result = provider.spawn("gpu_ping", model_size=model_size).wait(timeout=timeout)
    else:
        result = provider.spawn("ping").wait(timeout=timeout)
    if as_json:
        print_json(result)
        return
    if model_size:
        _show_gpu_ping(result)
        return
    out = console()
    out.print(f"[bold]{result['provider']}[/bold] ok (call {result['call_id']}, python {result['python']})")
    for kind, vol in result["volumes"].items():
        out.print(f"  volume {kind:9} {vol['path']}")
    gpu = result.get("gpu")
    out.print(f"  gpu       {gpu['name'] + ' x' + str(gpu['count']) if gpu else 'none'}")
    out.print(f"  HF_TOKEN  {'set' if result['hf_token_set'] else 'not set'}")


def register(cli: click.Group) -> None:
    cli.add_command(ping)

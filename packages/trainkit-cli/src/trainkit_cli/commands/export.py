"""`trainkit export trained/<id> --merged OUT [--gguf --quant f16]`: a merged model any transformers loads.

The merge runs as the provider's ``export`` job, next to the models volume (a cloud
container on Modal), and writes ``exports/<run id>``; this command waits for it and
then streams the export into OUT (`trainkit_core.export.merged.download`). With
``--no-download`` it only leaves the export on the volume, for `trainkit models
download` later.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from trainkit_cli.state import CliState, console, human_size, json_option, pass_state, print_json
from trainkit_core.export.gguf.writer import GGUF_TYPES
from trainkit_core.export.merged import EXPORT_DTYPES


@click.command("export")
@click.argument("model_path", metavar="MODEL_PATH")
@click.option(
    "--merged",
    "out",
    metavar="OUT",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Merge the adapter into its base and save full safetensors weights in folder OUT (new or empty).",
)
@click.option(
    "--dtype",
    type=click.Choice(EXPORT_DTYPES),
    default="auto",
    show_default=True,
    help="Weights' dtype; auto keeps the base's (16-bit for a 4-bit base).",
)
@click.option(
    "--gguf",
    "gguf",
    is_flag=True,
    help="Also write a GGUF file (llama.cpp, Ollama, LM Studio) and an Ollama Modelfile, checked in llama.cpp.",
)
@click.option(
    "--quant",
    default=None,
    help=f"The GGUF's type (with --gguf; default f16): {', '.join(GGUF_TYPES)}. The k-quants (q4_k_m …) mix "
    "types per tensor as llama.cpp's llama-quantize does; the export lists which tensors fell back and why.",
)
@click.option("--dataset", default=None, help="Check the GGUF on this dataset's eval prompts (default: the run's).")
@click.option("--no-download", is_flag=True, help="Leave the export on the models volume only (exports/<run id>).")
@click.option("--timeout", type=float, default=None, help="Seconds to wait for the export job.")
@json_option
@pass_state
def export_command(
    state: CliState,
    model_path: str,
    out: Path | None,
    dtype: str,
    gguf: bool,
    quant: str | None,
    dataset: str | None,
    no_download: bool,
    timeout: float | None,
    as_json: bool,
) -> None:
    """Export MODEL_PATH (trained/<run id>[/checkpoints/<step>]) as a merged model."""
    from trainkit_core.errors import UsageError
    from trainkit_core.export.merged import check_download_dest, download, start_export

    if quant is not None and not gguf:
        # Without --gguf no GGUF is written: a --quant that changed nothing would look obeyed.
        raise UsageError(f"--quant {quant} needs --gguf (it is the GGUF's type)", hint=f"add --gguf --quant {quant}")
    if out is None and not no_download:
        raise UsageError("give --merged OUT (the folder to write the merged model to), or --no-download")
    if out is not None and not no_download:
        check_download_dest(out)  # before the merge: a bad OUT costs no job
    path, handle = start_export(
        state.provider, model_path, dtype=dtype, gguf=(quant or "f16") if gguf else None, dataset=dataset
    )
    if not as_json:
        console(stderr=True).print(f"exporting {model_path} → {path} (job {handle.call_id}) …")
    info: dict[str, Any] = handle.wait(timeout=timeout)
    written = None
    if out is not None and not no_download:
        written = download(state.provider.volume("models"), path, out)
    if as_json:
        print_json({**info, "out": str(out) if written is not None else None, "downloaded_bytes": written})
        return
    term = console()
    term.print(f"merged {info['model_path']} into {info['base_model']} ({info['dtype']}): {path}")
    for note in info.get("notes") or []:
        term.print(f"note: {note}")
    if info.get("gguf"):
        check = info["gguf"]["check"]
        term.print(
            f"GGUF {info['gguf']['file']} and {info['gguf']['modelfile']}: checked in llama.cpp on {check['prompts']} "
            f"eval prompts, exact match with trainkit infer {check['exact_match_rate']:.0%}, "
            f"{check['stopped_at_end_of_turn']} stopped at end of turn"
        )
        mix = info["gguf"].get("quantization")
        if mix:
            types = ", ".join(f"{count} {name}" for name, count in mix["tensor_types"].items())
            term.print(f"GGUF tensors: {types}")
            for fallback in mix["fallbacks"]:
                count = len(fallback["tensors"])
                term.print(f"note: {count} tensor{'s' if count > 1 else ''}: {fallback['reason']}")
        if info["gguf"].get("left_out"):
            term.print(f"note: the GGUF holds {info['gguf']['left_out']}")
    if written is not None:
        term.print(f"downloaded to {out} ({human_size(written)})")
        term.print(f"load it with: AutoModelForCausalLM.from_pretrained({str(out)!r})")


def register(cli: click.Group) -> None:
    cli.add_command(export_command)

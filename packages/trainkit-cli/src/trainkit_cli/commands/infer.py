"""`trainkit infer`: generate with a trained model (or its base, with --base).

Goes through `trainkit_core.inference.client`, so the model path is validated before
anything runs, and the provider's warm inference is used where it has one (locally: a
worker process that keeps the model loaded for TRAINKIT_INFER_IDLE_TIMEOUT_S).
The short form `--model-size 4b` uses that preset's newest trained model.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from trainkit_cli.state import CliState, console, json_option, pass_state, print_json


def _messages(path: str, option: str = "--messages", key: str = "messages") -> list[Any]:
    """The messages of a JSON file, read as strict JSON (so deep nesting is an error, not a crash).

    Its size is checked before it is read: no file over `MAX_REQUEST_BYTES` can hold a
    request within the bounds (text, images), and a FIFO or a device is never opened.
    """
    import stat

    from trainkit_core.datasets import strict_json
    from trainkit_core.errors import InputTooLargeError, UsageError
    from trainkit_core.inference.request import MAX_REQUEST_BYTES

    try:
        info = Path(path).stat()
        if not stat.S_ISREG(info.st_mode):
            raise UsageError(f"{option} {path}: not a regular file")
        if info.st_size > MAX_REQUEST_BYTES:
            raise InputTooLargeError(
                f"{option} {path}: {info.st_size} bytes, over the limit of {MAX_REQUEST_BYTES} "
                "(the longest text and the most images a request may carry)"
            )
        data = strict_json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path} is not UTF-8 (byte {exc.start})") from None
    except strict_json.StrictJSONError as exc:
        raise UsageError(f"{path} is not valid JSON: {exc}") from None
    if isinstance(data, dict) and key in data:
        data = data[key]
    if not isinstance(data, list):
        raise UsageError(f"{option} {path} must hold a list of {key} or an object with {key!r}")
    return data


def _data_url(path: str) -> str:
    """The picture at `path` as a data URL: it travels in the request to wherever the model runs."""
    import base64

    from trainkit_core.datasets.images import ImageLimits, is_remote, read_image_file, remote_image_message
    from trainkit_core.errors import InputTooLargeError, UsageError

    if is_remote(path):
        raise UsageError(f"--image: {remote_image_message(path, 'by trainkit infer', 'download it and give its path')}")
    try:
        data = read_image_file(Path(path).expanduser(), ImageLimits().max_bytes)  # its size checked before a read
    except OSError as exc:
        raise UsageError(f"--image {path}: cannot read it ({exc.strerror})") from None
    except ValueError as exc:
        cls = InputTooLargeError if "over the limit" in str(exc) else UsageError
        raise cls(f"--image {path}: {exc}") from None
    kinds = {b"\x89PNG": "png", b"\xff\xd8\xff": "jpeg", b"RIFF": "webp", b"GIF8": "gif", b"BM": "bmp"}
    kind = next((name for magic, name in kinds.items() if data.startswith(magic)), None)
    if kind is None:
        raise UsageError(f"--image {path}: not a PNG, JPEG, WebP, GIF or BMP picture")
    return f"data:image/{kind};base64,{base64.b64encode(data).decode()}"


def _audio_url(path: str) -> str:
    """The sound at `path` as a ``data:audio/<format>;base64,`` URL, checked here so a bad one names `--audio`.

    Its format is its suffix's (.wav, .mp3), else what its first bytes say. Its size is
    checked before it is read; its bytes as the request's parts are (decoded within
    `AudioLimits`, a WAV cut short refused), where soundfile is installed.
    """
    import base64

    from trainkit_core.datasets.audio import AudioLimits, format_of_path
    from trainkit_core.datasets.images import read_image_file
    from trainkit_core.errors import InputTooLargeError, UsageError
    from trainkit_core.inference.request_audio import check_audio_bytes

    limits = AudioLimits()
    try:
        data = read_image_file(Path(path).expanduser(), limits.max_bytes, setting="TRAINKIT_AUDIO_MAX_BYTES")
    except OSError as exc:
        raise UsageError(f"--audio {path}: cannot read it ({exc.strerror})") from None
    except ValueError as exc:
        cls = InputTooLargeError if "over the limit" in str(exc) else UsageError
        raise cls(f"--audio {path}: {exc}") from None
    fmt = format_of_path(path) or _sniffed_audio_format(data)
    if fmt is None:
        raise UsageError(f"--audio {path}: not a WAV or MP3 file (by its name or its first bytes)")
    try:
        check_audio_bytes(data, fmt, limits)
    except ValueError as exc:
        cls = InputTooLargeError if "over the limit" in str(exc) else UsageError
        raise cls(f"--audio {path}: {exc}") from None
    return f"data:audio/{fmt};base64,{base64.b64encode(data).decode()}"


def _sniffed_audio_format(data: bytes) -> str | None:
    """ "wav" or "mp3" by the first bytes: a RIFF WAVE header, an ID3 tag or an MPEG audio frame's sync."""
    if data[:4] == b"RIFF" and data[8:12] == b"WAVE":
        return "wav"
    if data[:3] == b"ID3" or (len(data) > 1 and data[0] == 0xFF and data[1] & 0xE0 == 0xE0):
        return "mp3"
    return None


@click.command("infer")
@click.option("--model-path", metavar="PATH", help="trained/<run id> or trained/<run id>/checkpoints/<step>.")
@click.option("--model-size", metavar="SIZE", help="Instead of --model-path: the newest trained model of this preset.")
@click.option("--prompt", metavar="TEXT", help="One user message.")
@click.option("--messages", "messages_file", metavar="FILE", help="JSON file with a list of chat messages.")
@click.option(
    "--image",
    "images",
    metavar="PATH",
    multiple=True,
    help="A picture for the (last) user turn; repeat for several. Needs a multimodal model.",
)
@click.option(
    "--audio",
    "audio",
    metavar="FILE",
    multiple=True,
    help="A sound (.wav or .mp3, at most 30 s) for the (last) user turn; repeat for several. Needs a model with "
    "an audio tower (e2b, e4b).",
)
@click.option(
    "--tools",
    "tools_file",
    metavar="FILE",
    help="JSON file with the functions the model may call (OpenAI's tool definitions); calls are printed.",
)
@click.option(
    "--think/--no-think",
    default=None,
    help="Ask a Gemma 4 model to think first, or not (default: only where the messages hold thinking).",
)
@click.option("--base", is_flag=True, help="Generate with the model's base alone (adapter off), for comparison.")
@click.option("--max-new-tokens", type=click.IntRange(1, 4096), default=128, show_default=True)
@click.option("--temperature", type=click.FloatRange(0.0, 5.0), default=0.0, show_default=True, help="0: greedy.")
@click.option("--top-p", type=click.FloatRange(0.0, 1.0, min_open=True), default=1.0, show_default=True)
@click.option("--top-k", type=click.IntRange(0, 10_000), default=0, show_default=True, help="0: no top-k cut.")
@click.option("--seed", type=click.IntRange(0, 2**32 - 1), default=None, help="Seed for sampling.")
@click.option("--stream", is_flag=True, help="Print tokens as they come.")
@click.option("--no-warm", is_flag=True, help="Run the infer job instead of the warm inference worker.")
@json_option
@pass_state
def infer_command(
    state: CliState,
    model_path: str | None,
    model_size: str | None,
    prompt: str | None,
    messages_file: str | None,
    images: tuple[str, ...],
    audio: tuple[str, ...],
    tools_file: str | None,
    think: bool | None,
    base: bool,
    max_new_tokens: int,
    temperature: float,
    top_p: float,
    top_k: int,
    seed: int | None,
    stream: bool,
    no_warm: bool,
    as_json: bool,
) -> None:
    """Generate with a trained model: --model-path trained/<id> --prompt "…"."""
    import trainkit_core.inference.client as client

    request: dict[str, Any] = {
        "model_path": model_path,
        "model_size": model_size,
        "prompt": prompt,
        "messages": _messages(messages_file) if messages_file else None,
        "images": [_data_url(path) for path in images] or None,
        "audio": [_audio_url(path) for path in audio] or None,
        "tools": _messages(tools_file, "--tools", "tools") if tools_file else None,
        "think": think,
        "base": base,
        "max_new_tokens": max_new_tokens,
        "temperature": temperature,
        "top_p": top_p,
        "top_k": top_k,
        "seed": seed,
    }
    use_server = False if no_warm else None
    if stream and not as_json and not tools_file:  # calls are known when the answer is whole
        result: dict[str, Any] = {}
        for event in client.stream(state.provider, request, use_server=use_server):
            if event["type"] == "token":
                sys.stdout.write(event["text"])
                sys.stdout.flush()
            elif event["type"] == "thinking":  # a Gemma 4 model's thinking: beside the answer, not in it
                sys.stderr.write(event["text"])
                sys.stderr.flush()
            elif event["type"] == "done":
                result = event
        sys.stdout.write("\n")
        _footer(result)
        return
    result = client.generate(state.provider, request, use_server=use_server)
    if as_json:
        print_json(result)
        return
    if result.get("reasoning_content"):
        from rich.markup import escape

        console(stderr=True).print(f"[dim]thinking: {escape(result['reasoning_content'])}[/dim]")
    if result["text"]:
        click.echo(result["text"])
    for call in result.get("tool_calls") or []:
        function = call["function"]
        click.echo(f"call {function['name']}({json.dumps(function['arguments'], ensure_ascii=False)})")
    _footer(result)


def _footer(result: dict[str, Any]) -> None:
    if not result:
        return
    usage, timings = result.get("usage", {}), result.get("timings", {})
    who = f"{result.get('model_path')}{' (base)' if result.get('base') else ''}"
    console(stderr=True).print(
        f"[dim]{who}: {usage.get('completion_tokens', '?')} tokens, finish {result.get('finish_reason')}, "
        f"load {timings.get('load_s', 0):.2f} s, generate {timings.get('generate_s', 0):.2f} s[/dim]"
    )


def register(cli: click.Group) -> None:
    cli.add_command(infer_command)

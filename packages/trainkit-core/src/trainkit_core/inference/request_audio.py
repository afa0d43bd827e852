"""Audio in a generation request: checked before any model is loaded, so a bad part is a 400, never a 500.

Why before: as for images (`trainkit_core.inference.request_images`), a request is
validated where it arrives (the CLI, the API), and a sound that does not decode, is
cut short, is not audio or is over the limits must be refused there, naming its part,
rather than fail inside a worker. Only base64 data is taken (OpenAI's ``input_audio``
form): a ``path`` would read the server's own files. soundfile (and numpy) are
imported only when a request holds audio; where soundfile is not installed (a light
client) only the part's form is checked here, and the API or the model's worker, which
run this same check with soundfile, decode the sound.
"""

from __future__ import annotations

import importlib.util
from typing import Any

from trainkit_core.datasets.audio import (
    FORMATS,
    ROLES_WITH_AUDIO,
    AudioLimits,
    decode_audio,
    decode_audio_url,
    too_many_bytes,
    wav_cut_short,
)
from trainkit_core.inference.request_images import parts_of


def check_request_audio(turns: list[dict[str, Any]], limits: AudioLimits | None = None) -> None:
    """`ValueError` naming the first bad ``input_audio`` part of `turns` (OpenAI-form messages)."""
    limits = limits or AudioLimits()
    for count, (where, turn, part) in enumerate(parts_of(turns, "input_audio"), start=1):
        if turn["role"] not in ROLES_WITH_AUDIO:
            raise ValueError(f"{where}: audio goes in user or system messages, not {turn['role']}")
        if count > limits.max_per_example:
            raise ValueError(
                f"{where}: more than {limits.max_per_example} audio parts in one request (TRAINKIT_AUDIO_MAX_PER_EXAMPLE)"
            )
        sound = part["input_audio"]
        fmt, data = sound["format"], sound["data"]
        if fmt not in FORMATS:
            raise ValueError(f"{where}: format {str(fmt)[:20]!r} is not one of {', '.join(FORMATS)}")
        try:
            _, decoded = decode_audio_url(f"data:audio/{fmt};base64,{data}")
            check_audio_bytes(decoded, fmt, limits)
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None


def check_audio_bytes(data: bytes, fmt: str, limits: AudioLimits) -> None:
    """`ValueError` naming what is wrong with the bytes of a `fmt` sound (`trainkit infer --audio` too).

    A WAV cut short is refused here although libsndfile would read what is left: the
    sender meant a longer sound, and the model would answer about part of it.
    """
    if not data:
        raise ValueError("it holds no bytes")
    if len(data) > limits.max_bytes:
        raise ValueError(too_many_bytes(len(data), limits.max_bytes))
    if fmt == "wav":
        cut = wav_cut_short(data)  # decode_audio checks it too; here for a client without soundfile
        if cut is not None:
            raise ValueError(cut)
    if importlib.util.find_spec("soundfile") is None:
        return  # a light client: the API or the model's worker decodes it (both have soundfile)
    decode_audio(data, fmt, limits)

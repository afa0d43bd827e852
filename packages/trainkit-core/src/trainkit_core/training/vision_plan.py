"""What the plan needs to know about a dataset's images and sounds: how many tokens they take, and the text alone.

Why apart from `trainkit_core.training.plan`: the plan counts text tokens with the
text path's own encoder; an image's tokens come from the processor, whose count per
image is a property of the model (`Preset.image_tokens`), not of the picture (the
processor resizes every picture to its own size). A sound's tokens follow its length
(Gemma 4: one per 40 ms, at most 750, between two markers), read from its header.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

#: Gemma 4's audio soft tokens: one per 40 ms of sound, at most 750 per sound, plus its two markers.
AUDIO_MS_PER_TOKEN, AUDIO_MAX_TOKENS, AUDIO_MARKERS = 40, 750, 2


def image_counts(records: list[dict[str, Any]]) -> list[int]:
    """Images in each record (OpenAI-form messages)."""
    return [
        sum(
            1
            for m in record["messages"]
            if isinstance(m["content"], list)
            for part in m["content"]
            if part.get("type") == "image_url"
        )
        for record in records
    ]


def audio_token_counts(records: list[dict[str, Any]], folder: Path | None) -> list[int]:
    """The audio tokens of each record: its sounds' lengths (from their headers) in Gemma 4's soft tokens.

    `folder` is where relative paths are (a local dataset); a synced record's paths are absolute.
    """
    return [
        sum(
            _tokens_of(part["input_audio"], folder)
            for m in record["messages"]
            if isinstance(m["content"], list)
            for part in m["content"]
            if part.get("type") == "input_audio"
        )
        for record in records
    ]


def _tokens_of(audio: dict[str, Any], folder: Path | None) -> int:
    import base64
    import io

    import soundfile

    if "data" in audio:
        source: Any = io.BytesIO(base64.b64decode(audio["data"]))
    else:
        source = str(folder / audio["path"]) if folder is not None else audio["path"]
    info = soundfile.info(source)
    return min(AUDIO_MAX_TOKENS, math.ceil(info.frames * 1000 / info.samplerate / AUDIO_MS_PER_TOKEN)) + AUDIO_MARKERS


def text_only(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records with each list content reduced to its text parts (joined by newlines)."""
    return [
        {
            "messages": [
                {
                    "role": m["role"],
                    "content": m["content"]
                    if isinstance(m["content"], str)
                    else "\n".join(p["text"] for p in m["content"] if p.get("type") == "text"),
                }
                for m in record["messages"]
            ]
        }
        for record in records
    ]

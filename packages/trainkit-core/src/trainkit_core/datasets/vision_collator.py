"""Batches of image and audio conversations for the multimodal Gemma classes, built by the model's own processor.

Why a collator of its own: the text path pre-tokenizes with character offsets
(`trainkit_core.models.chat_format.encode_for_training`), but an image placeholder becomes
hundreds of tokens only inside the processor (Gemma 3: ``<start_of_image>`` becomes
``<boi>``, ``mm_tokens_per_image`` soft tokens and ``<eoi>``; Gemma 4 its own markers),
and the pictures must be resized exactly as the processor does at inference. So the
conversation is rendered by the text path's own `segments` (tools, calls, thinking and
per-message weights as there) with one placeholder per image part, the labels are found
by offsets on that placeholder text, and they are carried over turn by turn onto the
processor's ids, which differ only inside the turns that hold pictures (`processor_labels`).
Image tokens, prompts and padding are never trained (`check_vision_mask` proves it on
the real processor before a run trains). Audio parts go the same way: the processor's
audio token is their placeholder, widened by the processor into the sound's soft tokens
(their number follows its length), and the samples go in as its feature extractor wants
them (`trainkit_core.datasets.images.load_audio`: mono, 16 kHz).

The processor returns ``token_type_ids`` (Gemma 3) or ``mm_token_type_ids`` (Gemma 4)
beside ``pixel_values``; they are passed on as they come, since each class reads its
own. No heavy import at module level.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any, NamedTuple

from trainkit_core.datasets.images import ImageLimits, load_audio, load_image
from trainkit_core.errors import JobError, UsageError
from trainkit_core.models.chat_format import ChatFormat, encode_pieces, segments

IGNORE = -100


def image_placeholder(processor: Any) -> str:
    """The string a processor expands into one image's tokens.

    Gemma 3's expands its begin-of-image token (``<start_of_image>``) into the full
    image sequence; Gemma 4's (and most others') expand the image token itself.
    """
    name = "boi_token" if hasattr(processor, "full_image_sequence") else "image_token"
    token = getattr(processor, name, None)
    if not isinstance(token, str) or not token:
        raise UsageError(f"{type(processor).__name__} names no image token; it is not a vision-language processor")
    return token


def audio_placeholder(processor: Any) -> str | None:
    """The string a processor expands into one sound's tokens; None for a processor without audio."""
    if getattr(processor, "feature_extractor", None) is None:
        return None
    token = getattr(processor, "audio_token", None)
    return token if isinstance(token, str) and token else None


class Rendered(NamedTuple):
    """One conversation rendered for a processor: the text, the pictures' and sounds' references in order,
    and the pieces (text, trained) the labels come from."""

    text: str
    images: list[str]
    pieces: list[tuple[str, bool]]
    audio: list[str]


def with_placeholders(
    messages: Sequence[Mapping[str, Any]], placeholder: str, audio_token: str | None = None
) -> tuple[list[dict[str, Any]], list[str], list[str]]:
    """The messages with each image part as `placeholder` and each audio part as `audio_token` in its text,
    and the images' and the sounds' references in order."""
    flat: list[dict[str, Any]] = []
    images: list[str] = []
    audio: list[str] = []
    for index, message in enumerate(messages):
        content = message.get("content")
        if not isinstance(content, list):
            flat.append(dict(message))
            continue
        pieces: list[str] = []
        for part in content:
            kind = part.get("type")
            if kind in ("image_url", "input_audio") and message.get("role") == "assistant":
                raise UsageError(f"message {index}: images and audio go in user or system messages, not assistant")
            if kind == "image_url":
                images.append(str(part["image_url"]["url"]))
                pieces.append(placeholder)
            elif kind == "input_audio":
                if audio_token is None:
                    raise UsageError(f"message {index} holds audio, but this model has no audio tower")
                sound = part["input_audio"]
                audio.append(
                    sound["path"] if "path" in sound else f"data:audio/{sound['format']};base64,{sound['data']}"
                )
                pieces.append(audio_token)
            else:
                pieces.append(str(part.get("text", "")).strip())
        flat.append({**message, "content": "\n".join(p for p in pieces if p)})
    return flat, images, audio


def render_with_images(
    messages: Sequence[Mapping[str, Any]],
    fmt: ChatFormat,
    placeholder: str,
    *,
    add_generation_prompt: bool = False,
    tools: Sequence[Mapping[str, Any]] | None = None,
    keep_thinking: bool = True,
    audio_token: str | None = None,
) -> Rendered:
    """One conversation rendered by the text path's own `segments` (tools, calls, thinking and weights
    included), with `placeholder` where each image was and `audio_token` where each sound was."""
    flat, images, audio = with_placeholders(messages, placeholder, audio_token)
    pieces = segments(flat, fmt, tools=tools, add_generation_prompt=add_generation_prompt, keep_thinking=keep_thinking)
    return Rendered("".join(text for text, _ in pieces), images, pieces, audio)


def processor_inputs(
    processor: Any, rendered: Sequence[Rendered], limits: ImageLimits | None = None, **kwargs: Any
) -> dict[str, Any]:
    """The processor's batch (ids, pixels, audio features, token types) for rendered conversations."""
    call: dict[str, Any] = {"text": [r.text for r in rendered], "return_tensors": "pt", "padding": True, **kwargs}
    if any(r.images for r in rendered):
        call["images"] = [[load_image(ref, limits) for ref in r.images] for r in rendered]
    if any(r.audio for r in rendered):
        audio_limits = limits.audio if limits is not None else None
        call["audio"] = [load_audio(ref, audio_limits) for r in rendered for ref in r.audio]
        # Stated, not left to the processor: it hands a trained tokenizer's padding settings (max_length None)
        # to every modality, and the feature extractor then cannot truncate. The sounds are within the limits.
        call["audio_kwargs"] = {"truncation": False, "pad_to_multiple_of": 128}
    return dict(processor(**call))


@dataclass
class VisionCollator:
    """Turns examples (OpenAI-form messages whose image URLs are paths or data URLs) into a batch.

    Used as a `Trainer`'s `data_collator` with ``remove_unused_columns=False``.
    """

    processor: Any
    fmt: ChatFormat
    max_length: int | None = None
    limits: ImageLimits | None = None
    keep_thinking: bool = True

    def __call__(self, examples: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        import json

        placeholder, audio_token = image_placeholder(self.processor), audio_placeholder(self.processor)
        rendered = []
        for row in examples:
            example = json.loads(row["record"]) if "record" in row else row
            rendered.append(
                render_with_images(
                    example["messages"],
                    self.fmt,
                    placeholder,
                    tools=example.get("tools"),
                    keep_thinking=self.keep_thinking,
                    audio_token=audio_token,
                )
            )
        encoded = [encode_pieces(self.processor.tokenizer, r.pieces) for r in rendered]
        batch = processor_inputs(self.processor, rendered, self.limits)
        batch["labels"] = processor_labels(batch, encoded, self.processor.tokenizer, self.fmt)
        if self.max_length is not None and batch["input_ids"].shape[1] > self.max_length:
            raise UsageError(
                f"an example is {batch['input_ids'].shape[1]} tokens with its images or audio, over max_seq_length "
                f"{self.max_length}; cutting it would cut their tokens: raise max_seq_length or shorten the text"
            )
        return batch


def _turns(values: list[int], markers: list[int]) -> list[list[int]]:
    """`values` cut before each position in `markers` (the turn starts): the part before the first, then each turn."""
    bounds = [0, *markers, len(values)]
    return [values[a:b] for a, b in pairwise(bounds)]


def processor_labels(
    batch: Mapping[str, Any], encoded: Sequence[Mapping[str, list[int]]], tokenizer: Any, fmt: ChatFormat
) -> Any:
    """Labels for a processor's `input_ids`, carried over from the placeholder text's offset labels.

    The processor only widens image and audio placeholders, which sit in user or system turns; turn
    markers are special tokens nothing merges with. So turn by turn: a turn with a trained
    token must be, in the processor's ids, exactly the tokens it was in the placeholder
    text (else `JobError`), and takes its labels; every other turn, pictures and padding
    included, trains nothing.
    """
    import torch

    turn_start = tokenizer.convert_tokens_to_ids(fmt.turn_start)
    labels = torch.full_like(batch["input_ids"], IGNORE)
    for row, plain in enumerate(encoded):
        kept = batch["attention_mask"][row].nonzero().flatten().tolist()  # not the padding, on either side
        ids = batch["input_ids"][row, kept].tolist()
        marks = [i for i, token in enumerate(ids) if token == turn_start]
        plain_marks = [i for i, token in enumerate(plain["input_ids"]) if token == turn_start]
        if len(marks) != len(plain_marks) or not marks:
            raise JobError(
                f"loss mask: {len(marks)} turn markers in the processor's ids for {len(plain_marks)} turns; "
                f"does the processor's tokenizer know {fmt.turn_start!r}?"
            )
        row_labels: list[int] = []
        for turn, plain_turn, plain_labels in zip(
            _turns(ids, marks),
            _turns(plain["input_ids"], plain_marks),
            _turns(plain["labels"], plain_marks),
            strict=True,
        ):
            if all(label == IGNORE for label in plain_labels):
                row_labels.extend([IGNORE] * len(turn))
            elif turn == plain_turn:
                row_labels.extend(plain_labels)
            else:
                raise JobError("loss mask: a trained turn is not the same tokens in the processor's ids")
        labels[row, kept] = torch.tensor(row_labels, dtype=labels.dtype)
    return labels


def check_vision_mask(
    processor: Any, fmt: ChatFormat, example: Mapping[str, Any], *, keep_thinking: bool = True
) -> dict[str, Any]:
    """Prove on this processor that one real example trains exactly its answers and end-of-turn tokens.

    Raises `JobError` saying what is wrong; returns a summary for the run's events.
    """
    batch = VisionCollator(processor, fmt, keep_thinking=keep_thinking)([example])
    ids, labels = batch["input_ids"][0].tolist(), batch["labels"][0].tolist()
    tokenizer = processor.tokenizer
    trained = [token for token, label in zip(ids, labels, strict=True) if label != IGNORE]
    image_ids = {tokenizer.convert_tokens_to_ids(t) for t in _image_tokens(processor)}
    if image_ids & set(trained):
        raise JobError("loss mask check failed: image or audio tokens are trained")
    rendered = render_with_images(
        example["messages"],
        fmt,
        image_placeholder(processor),
        tools=example.get("tools"),
        keep_thinking=keep_thinking,
        audio_token=audio_placeholder(processor),
    )
    expected = "".join(text for text, learnt in rendered.pieces if learnt)
    text = tokenizer.decode(trained, skip_special_tokens=False)
    if text != expected:
        raise JobError(f"loss mask check failed: the trained tokens decode to {text!r}, expected {expected!r}")
    return {"chat_format": fmt.name, "trained_tokens": len(trained), "total_tokens": len(ids)}


def _image_tokens(processor: Any) -> list[str]:
    names = ("boi_token", "eoi_token", "image_token", "boa_token", "eoa_token", "audio_token")
    return [t for t in (getattr(processor, n, None) or getattr(processor.tokenizer, n, None) for n in names) if t]

"""Batches of image conversations for the multimodal Gemma classes, built by the model's own processor.

Why a collator of its own: the text path pre-tokenizes with character offsets
(`trainkit_core.models.chat_format.encode_for_training`), but an image placeholder becomes
hundreds of tokens only inside the processor (Gemma 3: ``<start_of_image>`` becomes
``<boi>``, ``mm_tokens_per_image`` soft tokens and ``<eoi>``; Gemma 4 its own markers),
and the pictures must be resized exactly as the processor does at inference. So the
conversation is rendered in the shared chat format with one placeholder per image
part, the processor expands and tokenizes it, and the loss mask is found on the
processor's own ids: the i-th turn marker starts the i-th turn, and an assistant turn
trains from after its ``model\\n`` to its end-of-turn token and the newline after it.
Image tokens, prompts and padding are never trained (`check_vision_mask` proves it on
the real processor before a run trains).

The processor returns ``token_type_ids`` (Gemma 3) or ``mm_token_type_ids`` (Gemma 4)
beside ``pixel_values``; they are passed on as they come, since each class reads its
own. No heavy import at module level.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from trainkit_core.datasets.images import ImageLimits, load_image
from trainkit_core.errors import JobError, UsageError
from trainkit_core.models.chat_format import ChatFormat, is_trained

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


def render_with_images(
    messages: Sequence[Mapping[str, Any]], fmt: ChatFormat, placeholder: str, *, add_generation_prompt: bool = False
) -> tuple[str, list[str], list[bool]]:
    """(text, image references in order, whether training learns each turn) of one conversation.

    The same layout as `trainkit_core.models.chat_format.render` (a system message folded into
    the first user turn, contents stripped), with `placeholder` where each image was. A turn
    is learnt when it is an assistant's without ``"weight": 0`` (`chat_format.is_trained`).
    """
    turns: list[tuple[str, str]] = []
    trained: list[bool] = []
    images: list[str] = []
    system = ""
    for index, message in enumerate(messages):
        if message.get("role") == "tool" or message.get("tool_calls") or message.get("reasoning_content"):
            raise UsageError(
                f"message {index}: tool calls and thinking are not yet trained together with images; "
                "train them in a text-only dataset"
            )
        role, content = str(message.get("role")), message.get("content")
        pieces: list[str] = []
        parts: list[Any] = content if isinstance(content, list) else [{"type": "text", "text": str(content)}]
        for part in parts:
            if part.get("type") == "image_url":
                if role == "assistant":
                    raise UsageError(f"message {index}: images go in user or system messages, not assistant")
                images.append(str(part["image_url"]["url"]))
                pieces.append(placeholder)
            else:
                pieces.append(str(part.get("text", "")).strip())
        text = "\n".join(p for p in pieces if p)
        if role == "system":
            if index != 0:
                raise UsageError(f"message {index}: a system message may only come first")
            system = text
            continue
        if system and not turns:
            text = f"{system}\n\n{text}"
        turns.append((role, text))
        trained.append(is_trained(message))
    body = "".join(f"{fmt.start(role)}{text}{fmt.end_of_turn}\n" for role, text in turns)
    prompt = fmt.generation_prompt if add_generation_prompt else ""
    return fmt.bos + body + prompt, images, trained


@dataclass
class VisionCollator:
    """Turns examples (OpenAI-form messages whose image URLs are paths or data URLs) into a batch.

    Used as a `Trainer`'s `data_collator` with ``remove_unused_columns=False``.
    """

    processor: Any
    fmt: ChatFormat
    max_length: int | None = None
    limits: ImageLimits | None = None

    def __call__(self, examples: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        import json

        placeholder = image_placeholder(self.processor)
        texts, images, learnt = [], [], []
        for row in examples:
            example = json.loads(row["record"]) if "record" in row else row
            text, refs, trained = render_with_images(example["messages"], self.fmt, placeholder)
            texts.append(text)
            images.append([load_image(ref, self.limits) for ref in refs])
            learnt.append(trained)
        kwargs: dict[str, Any] = {"text": texts, "return_tensors": "pt", "padding": True}
        if any(images):
            kwargs["images"] = images
        batch = dict(self.processor(**kwargs))
        batch["labels"] = assistant_labels(batch["input_ids"], learnt, self.processor.tokenizer, self.fmt)
        if self.max_length is not None and batch["input_ids"].shape[1] > self.max_length:
            raise UsageError(
                f"an example is {batch['input_ids'].shape[1]} tokens with its images, over max_seq_length "
                f"{self.max_length}; cutting it would cut image tokens: raise max_seq_length or shorten the text"
            )
        return batch


def assistant_labels(input_ids: Any, trained: Sequence[Sequence[bool]], tokenizer: Any, fmt: ChatFormat) -> Any:
    """Labels for a processor's `input_ids`: the learnt assistant turns' text and end-of-turn, -100 elsewhere."""
    import torch

    turn_start = tokenizer.convert_tokens_to_ids(fmt.turn_start)
    end_of_turn = tokenizer.convert_tokens_to_ids(fmt.end_of_turn)
    header = tokenizer(fmt.start("assistant"), add_special_tokens=False)["input_ids"]
    newline = tokenizer("\n", add_special_tokens=False)["input_ids"]
    labels = torch.full_like(input_ids, IGNORE)
    for row, turns in enumerate(trained):
        ids = input_ids[row].tolist()
        starts = [i for i, token in enumerate(ids) if token == turn_start]
        if len(starts) != len(turns):
            raise JobError(
                f"loss mask: {len(starts)} turn markers in the processor's ids for {len(turns)} turns; "
                f"does the processor's tokenizer know {fmt.turn_start!r}?"
            )
        for start, learnt in zip(starts, turns, strict=True):
            if not learnt:
                continue
            first = start + len(header)
            if ids[start:first] != header:
                raise JobError(f"loss mask: an assistant turn does not start with {fmt.start('assistant')!r}")
            try:
                end = ids.index(end_of_turn, first) + 1
            except ValueError:
                raise JobError("loss mask: an assistant turn has no end-of-turn token") from None
            if ids[end : end + len(newline)] == newline:
                end += len(newline)
            labels[row, first:end] = input_ids[row, first:end]
    return labels


def check_vision_mask(processor: Any, fmt: ChatFormat, example: Mapping[str, Any]) -> dict[str, Any]:
    """Prove on this processor that one real example trains exactly its answers and end-of-turn tokens.

    Raises `JobError` saying what is wrong; returns a summary for the run's events.
    """
    batch = VisionCollator(processor, fmt)([example])
    ids, labels = batch["input_ids"][0].tolist(), batch["labels"][0].tolist()
    tokenizer = processor.tokenizer
    trained = [token for token, label in zip(ids, labels, strict=True) if label != IGNORE]
    image_ids = {tokenizer.convert_tokens_to_ids(t) for t in _image_tokens(processor)}
    if image_ids & set(trained):
        raise JobError("loss mask check failed: image tokens are trained")
    answers = [
        "\n".join(p["text"].strip() for p in m["content"] if p.get("type") == "text")
        if isinstance(m["content"], list)
        else str(m["content"]).strip()
        for m in example["messages"]
        if is_trained(m)
    ]
    expected = "".join(a + fmt.end_of_turn + "\n" for a in answers)
    text = tokenizer.decode(trained, skip_special_tokens=False)
    if text != expected:
        raise JobError(f"loss mask check failed: the trained tokens decode to {text!r}, expected {expected!r}")
    return {"chat_format": fmt.name, "trained_tokens": len(trained), "total_tokens": len(ids)}


def _image_tokens(processor: Any) -> list[str]:
    names = ("boi_token", "eoi_token", "image_token")
    return [t for t in (getattr(processor, n, None) or getattr(processor.tokenizer, n, None) for n in names) if t]

"""Scoring eval examples that hold images: the same figures as `trainkit_core.evals.scoring`, through the processor.

Why apart: an image becomes its tokens only inside the model's processor, so both the
loss on the reference (`VisionCollator`: the exact tokens training learns) and the
greedy answer (the prompt with its pictures, left-padded) go through it. The metrics
(exact match, token F1, loss) are the text path's own.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from trainkit_core.evals.greedy import greedy_answers
from trainkit_core.evals.metrics import exact_match, token_f1
from trainkit_core.models.chat_format import ChatFormat


def score_image_batch(
    model: Any,
    processor: Any,
    fmt: ChatFormat,
    batch: Sequence[Sequence[dict[str, Any]]],
    stops: list[int],
    *,
    device: str,
    max_new_tokens: int,
    length_margin: int,
) -> list[dict[str, Any]]:
    """Loss on the reference and a greedy answer for each conversation of `batch` (no grad)."""
    import torch

    from trainkit_core.datasets.vision_collator import (
        IGNORE,
        VisionCollator,
        audio_placeholder,
        image_placeholder,
        processor_inputs,
        render_with_images,
    )

    tokenizer = processor.tokenizer
    full = VisionCollator(processor, fmt)([{"messages": list(messages)} for messages in batch])
    labels = full.pop("labels").to(device)
    logits = model(**{k: v.to(device) for k, v in full.items()}).logits.float()
    shift_logits, shift_labels = logits[:, :-1], labels[:, 1:]
    per_token = torch.nn.functional.cross_entropy(
        shift_logits.reshape(-1, shift_logits.shape[-1]),
        shift_labels.reshape(-1),
        reduction="none",
        ignore_index=IGNORE,
    ).reshape(shift_labels.shape)
    valid = shift_labels != IGNORE
    losses = [(float(per_token[r][valid[r]].sum()), int(valid[r].sum())) for r in range(len(batch))]

    placeholder, audio_token = image_placeholder(processor), audio_placeholder(processor)
    rendered = [
        render_with_images(messages[:-1], fmt, placeholder, add_generation_prompt=True, audio_token=audio_token)
        for messages in batch
    ]
    prompt = {k: v.to(device) for k, v in processor_inputs(processor, rendered, padding_side="left").items()}
    references = [str(messages[-1]["content"]) for messages in batch]
    longest = max(len(tokenizer(r, add_special_tokens=False)["input_ids"]) for r in references)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else stops[0]
    answers = greedy_answers(
        model, prompt, stops=stops, pad_token_id=pad, max_new_tokens=min(max_new_tokens, longest + length_margin)
    )
    scored = []
    for (ids, stopped), (loss_sum, tokens), reference in zip(answers, losses, references, strict=True):
        answer = tokenizer.decode(ids, skip_special_tokens=True).strip()
        scored.append(
            {
                "answer": answer,
                "stopped": stopped,
                "loss_sum": loss_sum,
                "loss_tokens": tokens,
                "exact_match": exact_match(answer, reference),
                "f1": token_f1(answer, reference),
            }
        )
    return scored

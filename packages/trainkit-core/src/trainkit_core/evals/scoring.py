"""Scoring a loaded model on eval examples: loss on the references, greedy answers.

For each example: the mean loss (and so perplexity) of the reference answer given the
conversation, computed on exactly the tokens training learns (`encode_for_training`:
the answer and its end-of-turn); and a greedy generation from the prompt, scored by
exact match and token F1. The same loaded weights answer as the base model with the
adapter switched off, so tuned and base are compared on one load. Heavy imports
inside functions; runs in the ``eval`` job and after training.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Sequence
from typing import Any

from trainkit_core.evals.greedy import greedy_answers
from trainkit_core.evals.metrics import exact_match, summarize, token_f1
from trainkit_core.models.chat_format import ChatFormat, encode_for_training, render_prompt

#: Generation stops at the end of turn, or after the reference's length plus this margin.
LENGTH_MARGIN = 16
#: Examples scored at once (padded batches: the loss forward pass and greedy generation).
BATCH_SIZE = 16


def _stops(tokenizer: Any, fmt: ChatFormat) -> list[int]:
    ids = [tokenizer.convert_tokens_to_ids(fmt.end_of_turn)]
    if tokenizer.eos_token_id is not None and tokenizer.eos_token_id not in ids:
        ids.append(tokenizer.eos_token_id)
    return ids


def _pad_id(tokenizer: Any, stops: list[int]) -> int:
    return int(tokenizer.pad_token_id if tokenizer.pad_token_id is not None else stops[0])


def _losses(model: Any, encoded: list[dict[str, list[int]]], pad: int, device: str) -> list[tuple[float, int]]:
    """(sum of token losses, token count) on the trained tokens of each example; one batch."""
    import torch

    width = max(len(e["input_ids"]) for e in encoded)
    ids = torch.full((len(encoded), width), pad, dtype=torch.long)
    labels = torch.full((len(encoded), width), -100, dtype=torch.long)
    mask = torch.zeros((len(encoded), width), dtype=torch.long)
    for row, e in enumerate(encoded):
        n = len(e["input_ids"])
        ids[row, :n] = torch.tensor(e["input_ids"])
        labels[row, :n] = torch.tensor(e["labels"])
        mask[row, :n] = 1
    logits = model(input_ids=ids.to(device), attention_mask=mask.to(device)).logits.float()
    shift_logits, shift_labels = logits[:, :-1], labels[:, 1:].to(device)
    per_token = torch.nn.functional.cross_entropy(
        shift_logits.reshape(-1, shift_logits.shape[-1]), shift_labels.reshape(-1), reduction="none", ignore_index=-100
    ).reshape(shift_labels.shape)
    valid = shift_labels != -100
    return [(float(per_token[r][valid[r]].sum()), int(valid[r].sum())) for r in range(len(encoded))]


def _generate(
    model: Any, tokenizer: Any, prompts: list[list[int]], stops: list[int], max_new_tokens: int, device: str
) -> list[tuple[list[int], bool]]:
    """Greedy answers for a batch of prompts, left-padded; (answer ids, stopped) each."""
    import torch

    pad = _pad_id(tokenizer, stops)
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad, dtype=torch.long)
    mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for row, p in enumerate(prompts):
        ids[row, width - len(p) :] = torch.tensor(p)
        mask[row, width - len(p) :] = 1
    inputs = {"input_ids": ids.to(device), "attention_mask": mask.to(device)}
    return greedy_answers(model, inputs, stops=stops, pad_token_id=pad, max_new_tokens=max_new_tokens)


def score_batch(
    model: Any,
    tokenizer: Any,
    fmt: ChatFormat,
    batch: Sequence[Sequence[dict[str, str]]],
    *,
    device: str,
    max_new_tokens: int,
    processor: Any = None,
) -> list[dict[str, Any]]:
    """Loss on the reference and a greedy answer for each example of a batch (no grad).

    With a `processor` (a multimodal model), a batch holding images is scored through it.
    """
    stops = _stops(tokenizer, fmt)
    if processor is not None and any(isinstance(m.get("content"), list) for messages in batch for m in messages):
        from trainkit_core.evals.image_scoring import score_image_batch

        return score_image_batch(
            model,
            processor,
            fmt,
            batch,
            stops,
            device=device,
            max_new_tokens=max_new_tokens,
            length_margin=LENGTH_MARGIN,
        )
    encoded = [encode_for_training(tokenizer, messages, fmt) for messages in batch]
    losses = _losses(model, encoded, _pad_id(tokenizer, stops), device)
    references = [messages[-1]["content"] for messages in batch]
    prompts = [
        list(tokenizer(render_prompt(messages, fmt), add_special_tokens=False)["input_ids"]) for messages in batch
    ]
    longest = max(len(tokenizer(r, add_special_tokens=False)["input_ids"]) for r in references)
    answers = _generate(model, tokenizer, prompts, stops, min(max_new_tokens, longest + LENGTH_MARGIN), device)
    scored = []
    for (loss_sum, tokens), (ids, stopped), reference in zip(losses, answers, references, strict=True):
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


def evaluate(
    model: Any,
    tokenizer: Any,
    fmt: ChatFormat,
    examples: Sequence[dict[str, Any]],
    *,
    device: str,
    adapter: str | None = "default",
    compare_base: bool = True,
    max_new_tokens: int = 64,
    processor: Any = None,
) -> dict[str, Any]:
    """Metrics of the tuned model (and the base, with the adapter off) on `examples`.

    `model` is a peft model; `adapter` the adapter to score as "tuned". Returns
    ``{"tuned": summary, "base": summary | None, "rows": [...]}``.
    """
    import torch

    started = time.perf_counter()
    variants = [("tuned", False)] + ([("base", True)] if compare_base else [])
    rows: list[dict[str, Any]] = [
        {"index": i, "messages": ex["messages"][:-1], "reference": ex["messages"][-1]["content"]}
        for i, ex in enumerate(examples)
    ]
    summaries: dict[str, Any] = {"tuned": None, "base": None}
    with torch.inference_mode():
        for label, off in variants:
            if adapter is not None and not off:
                model.set_adapter(adapter)
            ctx = model.disable_adapter() if off else contextlib.nullcontext()
            with ctx:
                scored = []
                for first in range(0, len(examples), BATCH_SIZE):
                    batch = [ex["messages"] for ex in examples[first : first + BATCH_SIZE]]
                    scored += score_batch(
                        model, tokenizer, fmt, batch, device=device, max_new_tokens=max_new_tokens, processor=processor
                    )
            for row, score in zip(rows, scored, strict=True):
                row[label] = score
            summaries[label] = summarize(scored)
    return {**summaries, "rows": rows, "eval_s": round(time.perf_counter() - started, 3)}

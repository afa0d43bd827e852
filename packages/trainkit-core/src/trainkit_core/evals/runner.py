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

from trainkit_core.chat_format import ChatFormat, encode_for_training, render_prompt
from trainkit_core.evals.metrics import exact_match, summarize, token_f1

#: Generation stops at the end of turn, or after the reference's length plus this margin.
LENGTH_MARGIN = 16


def _stops(tokenizer: Any, fmt: ChatFormat) -> list[int]:
    ids = [tokenizer.convert_tokens_to_ids(fmt.end_of_turn)]
    if tokenizer.eos_token_id is not None and tokenizer.eos_token_id not in ids:
        ids.append(tokenizer.eos_token_id)
    return ids


def score_one(
    model: Any, tokenizer: Any, fmt: ChatFormat, messages: Sequence[dict[str, str]], *, device: str, max_new_tokens: int
) -> dict[str, Any]:
    """Loss on the reference and a greedy answer for one example (no grad)."""
    import torch

    reference = messages[-1]["content"]
    encoded = encode_for_training(tokenizer, messages, fmt)
    ids = torch.tensor([encoded["input_ids"]], device=device)
    labels = torch.tensor([encoded["labels"]], device=device)
    logits = model(input_ids=ids).logits.float()
    shift_logits, shift_labels = logits[0, :-1], labels[0, 1:]
    mask = shift_labels != -100
    losses = torch.nn.functional.cross_entropy(shift_logits[mask], shift_labels[mask], reduction="sum")
    tokens = int(mask.sum())

    prompt = tokenizer(render_prompt(messages, fmt), add_special_tokens=False, return_tensors="pt").to(device)
    ref_len = len(tokenizer(reference, add_special_tokens=False)["input_ids"])
    stops = _stops(tokenizer, fmt)
    out = model.generate(
        **prompt,
        max_new_tokens=min(max_new_tokens, ref_len + LENGTH_MARGIN),
        do_sample=False,
        temperature=None,
        top_p=None,
        top_k=None,
        eos_token_id=stops,
        pad_token_id=tokenizer.pad_token_id if tokenizer.pad_token_id is not None else stops[0],
    )
    new = [int(i) for i in out[0, prompt["input_ids"].shape[1] :].tolist()]
    stopped = bool(new) and new[-1] in stops
    answer = tokenizer.decode(new[:-1] if stopped else new, skip_special_tokens=True).strip()
    return {
        "answer": answer,
        "stopped": stopped,
        "loss_sum": float(losses),
        "loss_tokens": tokens,
        "exact_match": exact_match(answer, reference),
        "f1": token_f1(answer, reference),
    }


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
                scored = [
                    score_one(model, tokenizer, fmt, ex["messages"], device=device, max_new_tokens=max_new_tokens)
                    for ex in examples
                ]
            for row, score in zip(rows, scored, strict=True):
                row[label] = score
            summaries[label] = summarize(scored)
    return {**summaries, "rows": rows, "eval_s": round(time.perf_counter() - started, 3)}

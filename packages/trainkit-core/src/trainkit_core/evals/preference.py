"""Preference accuracy on held-out pairs: does a model score the preferred answer above the other?

Each answer's score is its log-probability given the prompt, summed over exactly the
tokens training learns (the answer and its end-of-turn, `encode_for_training`), so a
pair is a comparison of two such sums (`scoring._losses`). The tuned model and its base
(the adapter switched off) are scored on one load, as the other eval metrics are.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

from trainkit_core.evals.scoring import BATCH_SIZE, _losses, _pad_id
from trainkit_core.models.chat_format import ChatFormat, encode_for_training


def with_answer(pair: dict[str, Any], side: str) -> list[dict[str, Any]]:
    """The pair's prompt followed by one of its answers (`side`: chosen or rejected), its calls included."""
    answer: dict[str, Any] = {"role": "assistant", "content": pair[side]}
    if pair.get(f"{side}_calls"):
        answer["tool_calls"] = pair[f"{side}_calls"]
    return [*pair["messages"], answer]


def _accuracy(model: Any, tokenizer: Any, fmt: ChatFormat, pairs: Sequence[dict[str, Any]], device: str) -> float:
    import torch

    pad = _pad_id(tokenizer, fmt.stop_ids(tokenizer))
    wins = 0
    with torch.inference_mode():
        for start in range(0, len(pairs), BATCH_SIZE):
            batch = pairs[start : start + BATCH_SIZE]
            encoded = [
                encode_for_training(tokenizer, with_answer(p, side), fmt, tools=p.get("tools"))
                for p in batch
                for side in ("chosen", "rejected")
            ]
            losses = _losses(model, encoded, pad, device)
            for index in range(len(batch)):
                (chosen, _), (rejected, _) = losses[2 * index], losses[2 * index + 1]
                wins += chosen < rejected  # a lower summed loss is a higher log-probability
    return round(wins / len(pairs), 4)


def preference_accuracy(
    model: Any, tokenizer: Any, fmt: ChatFormat, pairs: Sequence[dict[str, Any]], *, device: str, adapter: str | None
) -> dict[str, float]:
    """``{"tuned": accuracy, "base": accuracy}`` over `pairs` (dicts with messages, chosen, rejected)."""
    if not pairs:
        return {}
    model.eval()
    if adapter is not None and hasattr(model, "set_adapter"):
        model.set_adapter(adapter)
    tuned = _accuracy(model, tokenizer, fmt, pairs, device)
    disable = model.disable_adapter() if hasattr(model, "disable_adapter") else contextlib.nullcontext()
    with disable:
        base = _accuracy(model, tokenizer, fmt, pairs, device)
    return {"tuned": tuned, "base": base}

"""Scores of generated answers against references. Pure Python, no heavy imports.

Exact match compares whitespace-normalised text, case kept (a task such as
uppercasing is about case). Token F1 is the SQuAD-style overlap of whitespace tokens,
case-folded, so a partly right answer gets partial credit. Perplexity is
``exp(mean loss)`` over the reference answers' tokens. The end-of-turn rate is the
share of answers that ended with the end-of-turn token rather than at the length
limit: a model that never learned to stop scores 0 there whatever its words. Tool-call
accuracy, where examples call tools, is the share whose first calls were right.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any


def normalize(text: str) -> str:
    return " ".join(text.split())


def exact_match(prediction: str, reference: str) -> float:
    return 1.0 if normalize(prediction) == normalize(reference) else 0.0


def token_f1(prediction: str, reference: str) -> float:
    pred = normalize(prediction).casefold().split()
    ref = normalize(reference).casefold().split()
    if not pred and not ref:
        return 1.0
    if not pred or not ref:
        return 0.0
    common = sum((Counter(pred) & Counter(ref)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(ref)
    return 2 * precision * recall / (precision + recall)


def perplexity(mean_loss: float) -> float:
    return math.exp(min(mean_loss, 700.0))


def summarize(rows: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Aggregate per-example rows (`loss_sum`, `loss_tokens`, `exact_match`, `f1`, and `stopped` when scored)."""
    rows = list(rows)
    tokens = sum(int(r.get("loss_tokens", 0)) for r in rows)
    loss = sum(float(r.get("loss_sum", 0.0)) for r in rows) / tokens if tokens else float("nan")
    n = len(rows)
    return {
        "examples": n,
        "mean_loss": round(loss, 6),
        "perplexity": round(perplexity(loss), 4) if tokens else None,
        "exact_match": round(sum(r["exact_match"] for r in rows) / n, 4) if n else None,
        "f1": round(sum(r["f1"] for r in rows) / n, 4) if n else None,
        **(
            {"end_of_turn_rate": round(sum(bool(r["stopped"]) for r in rows) / n, 4)}
            if n and all("stopped" in r for r in rows)
            else {}
        ),
        **({"tool_call_accuracy": round(sum(calls) / len(calls), 4)} if (calls := _tool_calls(rows)) else {}),
    }


def _tool_calls(rows: list[Mapping[str, Any]]) -> list[float]:
    """The tool-call scores of the rows that call tools (scored by `trainkit_core.evals.scoring.score_calls`)."""
    return [float(r["tool_call"]) for r in rows if "tool_call" in r]

"""Greedy answers with a chat format's stops: what evals score and what a run's rollouts show.

One function so that the eval of a text run, the eval of a picture run and the sample
generations a run records at its checkpoints decode the same way: no sampling, the
answer cut at its first stop token (end of turn or end of sequence), and whether it
stopped at all (an answer that ran out of tokens is scored as it is, but flagged).
"""

from __future__ import annotations

from typing import Any


def greedy_answers(
    model: Any, inputs: dict[str, Any], *, stops: list[int], pad_token_id: int, max_new_tokens: int
) -> list[tuple[list[int], bool]]:
    """Each row's answer ids up to its first stop, and whether it stopped; `inputs` left-padded, on the model's device."""
    import torch

    with torch.no_grad():
        out = model.generate(
            **inputs,
            max_new_tokens=max_new_tokens,
            do_sample=False,
            temperature=None,
            top_p=None,
            top_k=None,
            eos_token_id=stops,
            pad_token_id=pad_token_id,
        )
    width = inputs["input_ids"].shape[1]
    answers = []
    for row in out[:, width:].tolist():
        cut = next((i for i, token in enumerate(row) if token in stops), None)
        answers.append((row if cut is None else row[:cut], cut is not None))
    return answers

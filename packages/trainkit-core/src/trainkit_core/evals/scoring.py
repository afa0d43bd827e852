"""Scoring a loaded model on eval examples: loss on the references, greedy answers.

For each example: the mean loss (and so perplexity) of the reference answer given the
conversation, computed on exactly the tokens training learns (`encode_for_training`:
the answer and its end-of-turn); and a greedy generation from the prompt, scored by
exact match and token F1. An example whose conversation calls tools is also asked for
its first call (the conversation before it, with its tools): tool-call accuracy is the
share of those whose calls are right (the same functions, arguments equal as JSON).
The same loaded weights answer as the base model with the adapter switched off, so
tuned and base are compared on one load. Heavy imports inside functions; runs in the
``eval`` job and after training.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping, Sequence
from typing import Any

from trainkit_core.evals.greedy import greedy_answers
from trainkit_core.evals.metrics import exact_match, summarize, token_f1
from trainkit_core.models.chat_format import ChatFormat, encode_example, render_prompt

#: Generation stops at the end of turn, or after the reference's length plus this margin.
LENGTH_MARGIN = 16
#: Examples scored at once (padded batches: the loss forward pass and greedy generation).
BATCH_SIZE = 16


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
    batch: Sequence[Mapping[str, Any]],
    *,
    device: str,
    max_new_tokens: int,
    processor: Any = None,
) -> list[dict[str, Any]]:
    """Loss on the reference and a greedy answer for each example (a record: messages, tools) of a batch.

    With a `processor` (a multimodal model), a batch holding images is scored through it.
    """
    stops = fmt.stop_ids(tokenizer)
    conversations = [record["messages"] for record in batch]
    if processor is not None and any(
        isinstance(m.get("content"), list) for messages in conversations for m in messages
    ):
        from trainkit_core.evals.image_scoring import score_image_batch

        return score_image_batch(
            model,
            processor,
            fmt,
            conversations,
            stops,
            device=device,
            max_new_tokens=max_new_tokens,
            length_margin=LENGTH_MARGIN,
        )
    encoded = [encode_example(tokenizer, record, fmt) for record in batch]
    losses = _losses(model, encoded, _pad_id(tokenizer, stops), device)
    references = [messages[-1]["content"] for messages in conversations]
    prompts = [
        list(tokenizer(render_prompt(r["messages"], fmt, tools=r.get("tools")), add_special_tokens=False)["input_ids"])
        for r in batch
    ]
    longest = max(len(tokenizer(r, add_special_tokens=False)["input_ids"]) for r in references)
    answers = _generate(model, tokenizer, prompts, stops, min(max_new_tokens, longest + LENGTH_MARGIN), device)
    calls = score_calls(model, tokenizer, fmt, batch, stops=stops, device=device)
    scored = []
    for (loss_sum, tokens), (ids, stopped), reference, call in zip(losses, answers, references, calls, strict=True):
        answer = tokenizer.decode(ids, skip_special_tokens=True).strip()
        scored.append(
            {
                "answer": answer,
                "stopped": stopped,
                "loss_sum": loss_sum,
                "loss_tokens": tokens,
                "exact_match": exact_match(answer, reference),
                "f1": token_f1(answer, reference),
                **call,
            }
        )
    return scored


def first_call(record: Mapping[str, Any]) -> tuple[list[Any], list[Any]] | None:
    """(the conversation before the first assistant message that calls tools, its calls), or None."""
    for index, message in enumerate(record["messages"]):
        if message.get("role") == "assistant" and message.get("tool_calls"):
            return list(record["messages"][:index]), list(message["tool_calls"])
    return None


def score_calls(
    model: Any,
    tokenizer: Any,
    fmt: ChatFormat,
    batch: Sequence[Mapping[str, Any]],
    *,
    stops: list[int],
    device: str,
) -> list[dict[str, Any]]:
    """For each record that calls tools: ``tool_call`` 1.0 when the model's first calls are the reference's.

    The calls are compared as (function name, arguments as JSON) in any order; an answer
    whose calls do not parse scores 0. Records without calls get ``{}``.
    """
    from trainkit_core.models import tool_syntax

    found = [(i, turn, record.get("tools")) for i, record in enumerate(batch) if (turn := first_call(record))]
    out: list[dict[str, Any]] = [{} for _ in batch]
    if not found:
        return out
    prompts = [
        list(tokenizer(render_prompt(prompt, fmt, tools=tools), add_special_tokens=False)["input_ids"])
        for _, (prompt, _), tools in found
    ]
    wanted = [
        [(tool_syntax.function_of(c)["name"], tool_syntax.arguments_of(c)) for c in calls] for _, (_, calls), _ in found
    ]
    written = tool_syntax.gemma4_calls if fmt.native_tools else tool_syntax.gemma3_calls
    longest = max(len(tokenizer(written(calls), add_special_tokens=False)["input_ids"]) for _, (_, calls), _ in found)
    answers = _generate(model, tokenizer, prompts, stops, longest + LENGTH_MARGIN, device)
    for (index, _, _), (ids, _), reference in zip(found, answers, wanted, strict=True):
        raw = tokenizer.decode(ids, skip_special_tokens=False)
        made = tool_syntax.calls_made(raw, fmt.name)
        right = sorted(tool_syntax.call_key(*c) for c in made) == sorted(tool_syntax.call_key(*c) for c in reference)
        out[index] = {"tool_call": 1.0 if right else 0.0, "tool_call_answer": raw}
    return out


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
                    batch = examples[first : first + BATCH_SIZE]
                    scored += score_batch(
                        model, tokenizer, fmt, batch, device=device, max_new_tokens=max_new_tokens, processor=processor
                    )
            for row, score in zip(rows, scored, strict=True):
                row[label] = score
            summaries[label] = summarize(scored)
    return {**summaries, "rows": rows, "eval_s": round(time.perf_counter() - started, 3)}

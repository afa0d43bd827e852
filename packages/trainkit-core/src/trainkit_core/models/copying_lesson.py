"""The lesson that teaches the `tiny` base to copy, before any fine-tune ever sees it.

Why: fine-tuned from random weights, the tiny model learnt its training answers by heart
but could not carry a token it had not seen in that place from the prompt into its
answer. The tool demo's calls held an unseen number's digits in the wrong order (534 ->
543): no attention head looked at the token just before another (a previous-token head,
the first half of the copying circuit of real models), and 800 steps of fine-tuning never
grew one. Real base models copy because pretraining taught them (induction heads). This
lesson does the same on nothing but random ids: sequences in which spans recur after a
gap, the loss on the recurrences only. The ids are drawn over the whole vocabulary above
the special tokens and a run's tokenizer gives its own words to them, so the base learns
copying for any token and nothing of any dataset, demo or test.

The skill appears suddenly, after 500-900 steps (the published phase change); the rest of
the lesson, at a rate decaying to zero, settles it. The lesson runs on one CPU thread in
float32 so that a rebuild on the same machine gives the same weights; the choice of this
recipe and the measurements are in ``docs/developer/research-logs.md`` ("The tiny base
taught to copy"). No heavy import at module level.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

#: Sequences per step and tokens per sequence: short, as the skill needs no long context.
BATCH, LENGTH = 16, 48
LEARNING_RATE = 1e-2
WARMUP_STEPS = 100
STEPS = 1500
#: The lesson's seed. The base's weights before it come from `tiny_model.build_model`'s seed.
SEED = 0


def recurring_spans(
    rng: random.Random, first_id: int, vocab_size: int, batch: int = BATCH
) -> tuple[list[list[int]], list[list[int]]]:
    """A batch of random ids in which spans of 2-20 ids recur after a gap; labels on the recurrences.

    The first id of a recurrence is not labelled: nothing before it says that a copy starts.
    """
    rows, labels = [], []
    for _ in range(batch):
        ids = [rng.randrange(first_id, vocab_size) for _ in range(LENGTH)]
        label = [-100] * LENGTH
        pos = 1
        while pos < LENGTH - 8:
            span, gap = rng.randint(2, 20), rng.randint(0, 12)
            start = pos + span + gap
            if start + span > LENGTH:
                break
            ids[start : start + span] = ids[pos : pos + span]
            label[start + 1 : start + span] = ids[start + 1 : start + span]
            pos = start + span + rng.randint(0, 8)
        rows.append(ids)
        labels.append(label)
    return rows, labels


def teach_copying(
    model: Any, first_id: int, vocab_size: int, bos_id: int, seed: int = SEED, steps: int = STEPS
) -> dict[str, float]:
    """Train every weight of `model` on `recurring_spans` for `steps`; its copy accuracy on a held-out batch.

    Ids below `first_id` (the special tokens) never appear, but the beginning of text does.
    """
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the same sums in the same order on every build of this machine
    try:
        rng = random.Random(seed)
        torch.manual_seed(seed)
        held_out = held_out_batch(first_id, vocab_size, bos_id, seed + 1)
        train_on(model, lambda: as_tensors(*recurring_spans(rng, first_id, vocab_size), bos_id), steps)
        return {"copy_accuracy": round(copy_accuracy(model, *held_out), 4), "steps": steps, "seed": seed}
    finally:
        torch.set_num_threads(threads)


def train_on(
    model: Any,
    batch: Callable[[], tuple[Any, Any]],
    steps: int,
    learning_rate: float = LEARNING_RATE,
    warmup_steps: int = WARMUP_STEPS,
) -> None:
    """Train every weight of `model` for `steps` on `batch()` (ids, labels); the rate warms up, then decays to zero.

    Shared with `bench/arithmetic_base.py`, which gives the base a second lesson the same way.
    """
    import torch

    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate, weight_decay=0.0)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min(1.0, (step + 1) / warmup_steps) * max(0.0, 1.0 - step / steps)
    )
    model.train()
    for _ in range(steps):
        ids, labels = batch()
        model(input_ids=ids, labels=labels).loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad()
    model.eval()


def copy_accuracy(model: Any, ids: Any, labels: Any) -> float:
    """Share of the labelled (recurring) tokens that `model` predicts from what precedes them."""
    import torch

    with torch.no_grad():
        predicted = model(input_ids=ids).logits[:, :-1].argmax(-1)
    target = labels[:, 1:]
    mask = target != -100
    return float((predicted[mask] == target[mask]).float().mean())


def held_out_batch(first_id: int, vocab_size: int, bos_id: int, seed: int = SEED + 1) -> tuple[Any, Any]:
    """A batch of recurring spans the lesson never trained on (ids, labels), to measure a built base."""
    return as_tensors(*recurring_spans(random.Random(seed), first_id, vocab_size), bos_id)


def as_tensors(rows: list[list[int]], labels: list[list[int]], bos_id: int) -> tuple[Any, Any]:
    """(ids, labels) as tensors, each row beginning with the beginning of text."""
    import torch

    ids = torch.tensor(rows)
    ids[:, 0] = bos_id
    return ids, torch.tensor(labels)

"""A `tiny` base taught to copy before any fine-tune: the experiment, not (yet) the default.

Why: fine-tuned from random weights, the `tiny` model learns its training answers by
heart and cannot carry a token it has not seen there from the prompt into its answer:
the tool demo's calls get an unseen number's digits in the wrong order (tool-call
accuracy 0.24), the task suite's copy family scores 0.00-0.20. Real base models can
copy, having learnt it from text (induction heads). This script builds the `tiny` base
(the same model, seed and tokenizer as `trainkit_core.models.tiny_model`) and trains it
on sequences of random token ids in which spans recur, the loss on the recurrences only.
The ids are drawn over the whole vocabulary and a run's tokenizer gives its own words to
them, so the base learns copying for any id and nothing of any dataset.

It writes the base where a trainkit home's hf-cache volume keeps the tiny base, so every
`trainkit train --model-size tiny` of that home (or of the suite's, as below)
fine-tunes it instead of the random one:

    .venv/bin/python bench/copying_base.py HOME [--seed N] [--steps N]
    .venv/bin/python bench/copying_base.py DIR/home && .venv/bin/python bench/task_suite.py --keep DIR

Measured (``docs/developer/research-logs.md``, "The tiny base taught to copy"): the tool
demo's tool-call accuracy went from 0.24 to 0.14-0.52 over four seeds of this schedule
(1.00 once, with the prototype's), the opposites demo stayed at 0.97-1.00 with this schedule (a constant rate up to
the jump left it at 0.01), the text suite's mean from 0.42 to 0.46-0.56. Too variable to be
the default yet. About a minute on one CPU thread.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
from pathlib import Path
from typing import Any

#: Sequences per step and tokens per sequence: short, as the skill needs no long context.
BATCH, LENGTH = 16, 48
LEARNING_RATE = 1e-2
WARMUP_STEPS = 100
#: The skill appears after 500-900 steps; the rest, at a decaying rate, settles it.
STEPS = 1500


def recurring_spans(rng: random.Random, first_id: int, vocab_size: int) -> tuple[list[list[int]], list[list[int]]]:
    """A batch of random ids in which spans of 2-20 ids recur after a gap; labels on the recurrences.

    The first id of a recurrence is not labelled: nothing before it says that a copy starts.
    """
    rows, labels = [], []
    for _ in range(BATCH):
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
    model: Any, first_id: int, vocab_size: int, bos_id: int, seed: int = 0, steps: int = STEPS
) -> dict[str, float]:
    """Train every weight of `model` on `recurring_spans` for `steps`; its accuracy on a held-out batch.

    Ids below `first_id` (the special tokens) never appear, but the beginning of text does.
    """
    import torch

    rng = random.Random(seed)
    torch.manual_seed(seed)

    def tensors(rows: list[list[int]], labels: list[list[int]]) -> tuple[Any, Any]:
        ids = torch.tensor(rows)
        ids[:, 0] = bos_id
        return ids, torch.tensor(labels)

    held_out = tensors(*recurring_spans(random.Random(seed + 1), first_id, vocab_size))
    optimizer = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE, weight_decay=0.0)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min(1.0, (step + 1) / WARMUP_STEPS) * max(0.0, 1.0 - step / steps)
    )
    model.train()
    for _ in range(steps):
        ids, labels = tensors(*recurring_spans(rng, first_id, vocab_size))
        model(input_ids=ids, labels=labels).loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad()
    model.eval()
    return {"copy_accuracy": round(copy_accuracy(model, *held_out), 4), "steps": steps}


def copy_accuracy(model: Any, ids: Any, labels: Any) -> float:
    """Share of the labelled (recurring) tokens that `model` predicts from what precedes them."""
    import torch

    with torch.no_grad():
        predicted = model(input_ids=ids).logits[:, :-1].argmax(-1)
    target = labels[:, 1:]
    mask = target != -100
    return float((predicted[mask] == target[mask]).float().mean())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("home", type=Path, help="The trainkit home whose hf-cache volume gets the base.")
    parser.add_argument("--seed", type=int, default=0, help="Seed of the copying lesson's sequences.")
    parser.add_argument("--steps", type=int, default=STEPS, help="Steps of the lesson (the rate decays over them).")
    opts = parser.parse_args()

    from trainkit_core.local.plugin import job_context
    from trainkit_core.models.tiny_model import SPECIAL_TOKENS, TINY_BASE_PATH, VOCAB_SIZE, build_model, build_tokenizer
    from trainkit_core.settings import ProviderSettings, Settings

    # Where that home's jobs find the tiny base (HF_HOME is the hf-cache volume).
    settings = Settings(provider=ProviderSettings(home=opts.home))
    target = job_context(settings, "copying-base").path("hf-cache") / TINY_BASE_PATH
    tokenizer = build_tokenizer(())
    model = build_model(tokenizer)
    first_id = max(tokenizer.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS) + 1
    lesson = teach_copying(model, first_id, VOCAB_SIZE, tokenizer.bos_token_id, opts.seed, opts.steps)
    if target.exists():
        shutil.rmtree(target)
    model.save_pretrained(target)
    tokenizer.save_pretrained(target)
    info = {"kind": "trainkit-tiny-gemma", "vocab_size": VOCAB_SIZE, "copying_lesson": {"seed": opts.seed, **lesson}}
    (target / "trainkit_tiny.json").write_text(json.dumps(info, indent=2))
    print(f"{target}: {lesson}", file=sys.stderr)


if __name__ == "__main__":
    main()

"""`--keep-checkpoints N`: keep the last N checkpoints of a run, and the best by eval loss.

Called by the train job each time a checkpoint is saved, before that checkpoint is
marked complete, so only older checkpoints are ever removed. When the dataset has an
eval split, each checkpoint is scored on (up to `EVAL_EXAMPLES` of) it first; the
scores are kept in the run record (``metadata.checkpoint_eval_loss``) and in the
checkpoint's card (``eval_loss``), and the checkpoint with the lowest one survives
pruning even when it is not among the last N. A checkpoint loses its ``done`` marker
before its files, so an interrupted removal never leaves one that looks complete
(`trainkit gc` removes the rest). torch is imported inside `eval_loss` only.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from trainkit_core.models.trained.paths import DONE_MARKER

#: How many eval examples score a checkpoint (a bound on the time it adds to a save).
EVAL_EXAMPLES = 32


def eval_loss(model: Any, rows: list[dict[str, list[int]]]) -> float:
    """Mean loss of `model` on pre-tokenized rows (labels masked as in training)."""
    import torch

    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    losses = []
    with torch.no_grad():
        for row in rows[:EVAL_EXAMPLES]:
            ids = torch.tensor([row["input_ids"]], device=device)
            labels = torch.tensor([row["labels"]], device=device)
            losses.append(float(model(input_ids=ids, labels=labels).loss))
    if was_training:
        model.train()
    return sum(losses) / len(losses)


def checkpoints_to_remove(steps: list[int], keep: int, current: int, losses: dict[int, float]) -> list[int]:
    """Which complete checkpoints (`steps`, before `current`) go: all but the last `keep`
    (counting `current`) and the best by eval loss (among `losses`)."""
    everything = sorted({*steps, current})
    kept = set(everything[-keep:])
    scored = {s: v for s, v in losses.items() if s in everything}
    if scored:
        kept.add(min(scored, key=lambda s: (scored[s], -s)))
    return [s for s in everything if s not in kept and s != current]


def prune(checkpoints_dir: Path, keep: int, current: int, losses: dict[int, float]) -> list[int]:
    """Remove what `checkpoints_to_remove` says from a mounted checkpoints folder; the steps removed."""
    steps = [
        int(p.name) for p in checkpoints_dir.iterdir() if p.is_dir() and p.name.isdigit() and (p / DONE_MARKER).exists()
    ]
    removed = checkpoints_to_remove(steps, keep, current, losses)
    for step in removed:
        folder = checkpoints_dir / f"{step:08d}"
        (folder / DONE_MARKER).unlink(missing_ok=True)
        shutil.rmtree(folder, ignore_errors=True)
    return removed

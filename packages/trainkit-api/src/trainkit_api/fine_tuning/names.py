"""The names OpenAI gives fine-tuned models, for trainkit's trained models.

`ft:<base>:<suffix>:<run id>` names a job's model and `...:<run id>:ckpt-step-<N>` one of its
checkpoints, as OpenAI's `fine_tuned_model` and `fine_tuned_model_checkpoint` do (OpenAI puts
its organisation where trainkit has none). The run id is the part that finds the model;
the whole name must still be the one the job was given, so a mistyped base or suffix is
not silently taken for another model.
"""

from __future__ import annotations

import re

from trainkit_core.ids import RUN_ID_PATTERN

PREFIX = "ft:"
_CHECKPOINT = re.compile(r"^ckpt-step-([0-9]{1,9})$")


def model_name(base: str, suffix: str | None, run_id: str) -> str:
    return f"{PREFIX}{base}:{suffix or ''}:{run_id}"


def base_of(model: str) -> str:
    """The base model a job's `model` names: itself, or the base in an earlier job's `ft:` name.

    Fine-tuning a fine-tuned model names the result after the same base, as OpenAI does.
    """
    return model.removeprefix(PREFIX).split(":")[0] if model.startswith(PREFIX) else model


def checkpoint_name(fine_tuned_model: str, step: int) -> str:
    return f"{fine_tuned_model}:ckpt-step-{step}"


def parse(name: str) -> tuple[str, str, int | None] | None:
    """(the job's model name, run id, checkpoint step or None) of an `ft:` name; None when it is not one."""
    if not name.startswith(PREFIX):
        return None
    parts = name.split(":")
    step = None
    if len(parts) >= 5 and (match := _CHECKPOINT.match(parts[-1])):
        step = int(match.group(1))
        parts = parts[:-1]
    if len(parts) < 4 or not RUN_ID_PATTERN.fullmatch(parts[-1]):
        return None
    return ":".join(parts), parts[-1], step


def model_path(run_id: str, step: int | None) -> str:
    """The trainkit model path (`trained/<run id>`, or one of its checkpoints) an `ft:` name stands for."""
    from trainkit_core.models.trained.layout import checkpoint_path
    from trainkit_core.models.trained.paths import trained_dir

    return trained_dir(run_id) if step is None else checkpoint_path(run_id, step)

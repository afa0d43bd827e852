"""Listing the trained models on the models volume (`trainkit models`, `GET /v1/models`)."""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from trainkit_core.errors import NotFoundError, TrainkitError, UsageError
from trainkit_core.ids import RUN_ID_PATTERN
from trainkit_core.models.trained.card import read_card
from trainkit_core.models.trained.paths import ModelPath, check_model_path

if TYPE_CHECKING:
    from trainkit_core.plugins.hookspecs import Volume

log = logging.getLogger(__name__)


@dataclass
class TrainedModel:
    """One `trained/<run id>` folder, as listed."""

    model_path: str
    run_id: str
    base_model: str
    preset: str
    chat_format: str
    dataset_id: str
    created_at: float
    size_bytes: int
    metrics: dict[str, Any] = field(default_factory=dict)
    checkpoints: list[int] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _folder_size(volume: Volume, path: str) -> tuple[int, list[int]]:
    size, steps = 0, []
    for entry in volume.listdir(path, recursive=True):
        if not entry.is_dir:
            size += entry.size
        rel = entry.path[len(path) + 1 :].split("/")
        is_checkpoint = entry.is_dir and len(rel) == 2 and rel[0] == "checkpoints" and rel[1].isdigit()
        if is_checkpoint and volume.exists(f"{entry.path}/done"):
            steps.append(int(rel[1]))
    return size, sorted(steps)


def list_trained_models(volume: Volume) -> list[TrainedModel]:
    """Every usable trained model on the volume, newest first.

    A folder that is not a complete model (a run still training, a broken card) is
    skipped with a log line, never an error: one bad folder must not hide the rest.
    """
    if not volume.exists("trained"):
        return []
    found = []
    for entry in volume.listdir("trained"):
        run_id = entry.path.rsplit("/", 1)[-1]
        if not entry.is_dir or not RUN_ID_PATTERN.fullmatch(run_id):
            continue
        try:
            ref = check_model_path(f"trained/{run_id}", volume)
            card = read_card(volume, ref)
        except TrainkitError as exc:
            log.debug("skipping %s: %s", entry.path, exc)
            continue
        size, steps = _folder_size(volume, ref.path)
        found.append(
            TrainedModel(
                model_path=ref.path,
                run_id=run_id,
                base_model=card.base_model,
                preset=card.preset,
                chat_format=card.chat_format,
                dataset_id=card.dataset_id,
                created_at=card.created_at,
                size_bytes=size,
                metrics=card.metrics,
                checkpoints=steps,
            )
        )
    return sorted(found, key=lambda m: m.run_id, reverse=True)


def _shown(value: object) -> str:
    """A user's value in a message: quoted, cut to 60 characters."""
    text = value if isinstance(value, str) else str(value)
    return repr(text if len(text) <= 60 else text[:60] + "…")


def default_model_for_preset(volume: Volume, preset: str) -> ModelPath:
    """The `--model-size` form: the newest trained model of that preset, its default adapter.

    The hidden twins count too: `train --model-size tiny-gemma3mm` accepts them, so the
    images tutorial's `infer --model-size tiny-gemma3mm` must as well.
    """
    from trainkit_core.models.presets import PRESETS, TWIN_PRESETS

    if not isinstance(preset, str) or (preset not in PRESETS and preset not in TWIN_PRESETS):
        raise UsageError(
            f"unknown model size {_shown(preset)}; known sizes: {', '.join(PRESETS)}",
            hint="or name a trained model: trainkit models lists them",
        )
    for model in list_trained_models(volume):
        if model.preset == preset:
            return ModelPath(model.model_path, model.run_id)
    raise NotFoundError(
        f"no trained model of preset {preset!r} on volume {volume.name!r}",
        hint=f"train one with: trainkit train --dataset NAME --model-size {preset}",
    )

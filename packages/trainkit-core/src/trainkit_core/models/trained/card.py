"""Reading `trained_model.json`, the description a training run saves with its adapter.

The training job writes it (`trainkit_core.training`); inference and evals read the
base model, chat format and tokenizer from it and never guess them. Unknown fields
are kept, so a newer writer does not break an older reader.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from trainkit_core.errors import NotFoundError, UsageError
from trainkit_core.models.trained.paths import CARD_FILE, ModelPath

if TYPE_CHECKING:
    from trainkit_core.plugins.hookspecs import Volume


class TrainedModelCard(BaseModel):
    """How a trained model was made: what inference needs to load it exactly."""

    model_config = ConfigDict(extra="allow", protected_namespaces=())

    run_id: str = ""
    base_model: str
    preset: str = ""
    chat_format: str
    dataset_id: str = ""
    dataset_hash: str = ""
    config: dict[str, Any] = Field(default_factory=dict)
    metrics: dict[str, Any] = Field(default_factory=dict)
    versions: dict[str, Any] = Field(default_factory=dict)
    created_at: float = 0.0
    step: int | None = None

    @property
    def extras(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


def parse_card(raw: bytes, *, where: str) -> TrainedModelCard:
    try:
        data = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"{where} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise UsageError(f"{where} must hold a JSON object")
    try:
        return TrainedModelCard.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise UsageError(f"{where} is not a valid model description: {problems}") from None


def read_card(volume: Volume, ref: ModelPath) -> TrainedModelCard:
    """The card of a model path: the checkpoint's own, else its run's."""
    for folder in (ref.path, ref.run_dir):
        path = f"{folder}/{CARD_FILE}"
        if volume.exists(path):
            return parse_card(volume.read_bytes(path), where=f"{path} on volume {volume.name!r}")
    raise NotFoundError(f"no {CARD_FILE} for {ref.path!r} on volume {volume.name!r}")

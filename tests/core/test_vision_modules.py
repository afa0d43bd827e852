"""What `finetune_vision_layers` makes a run train, per backend and per data (`training.vision.with_vision_modules`).

hf trains the vision tower and projector in full; unsloth gets the switch itself (LoRA on
the tower, `training.backends.load_unsloth`) plus, in full, only what that LoRA cannot
reach; a text run trains no vision layer. Torch-free: the model is read from its
config.json only.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainkit_core.errors import UsageError
from trainkit_core.training.config import TrainConfig
from trainkit_core.training.vision import with_vision_modules


def _model_folder(tmp_path: Path, model_type: str) -> str:
    folder = tmp_path / model_type
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": model_type, "vision_config": {"hidden_size": 8}}))
    return str(folder)


def _config(size: str, **values: object) -> TrainConfig:
    return TrainConfig.parse(dataset="shapes", model_size=size, **values).resolve()


@pytest.mark.parametrize(
    ("size", "model_type", "hf", "unsloth"),
    [
        ("tiny-gemma3mm", "gemma3", ["vision_tower", "multi_modal_projector"], ["multi_modal_projector"]),
        ("tiny-gemma4", "gemma4", ["vision_tower", "embed_vision"], []),
    ],
)
def test_each_backend_trains_in_full_what_its_own_way_needs(
    tmp_path: Path, size: str, model_type: str, hf: list[str], unsloth: list[str]
) -> None:
    config = _config(size)
    before = list(config.modules_to_save or [])
    source = _model_folder(tmp_path, model_type)
    for backend, added in (("hf", hf), ("unsloth", unsloth)):
        loaded = with_vision_modules(config, source, backend, images=True)
        assert loaded.finetune_vision_layers is True
        assert loaded.modules_to_save == [*before, *added], backend
    assert config == _config(size)  # the run's own config is left as it was


@pytest.mark.parametrize("backend", ["hf", "unsloth"])
def test_a_text_run_trains_no_vision_layer_whatever_the_preset_says(tmp_path: Path, backend: str) -> None:
    config = _config("tiny-gemma3mm")
    assert config.finetune_vision_layers is True  # the twin's preset
    loaded = with_vision_modules(config, _model_folder(tmp_path, "gemma3"), backend, images=False)
    assert loaded.finetune_vision_layers is False
    assert loaded.modules_to_save == config.modules_to_save


def test_the_switch_off_changes_nothing(tmp_path: Path) -> None:
    config = _config("tiny-gemma3mm", finetune_vision_layers=False)
    source = _model_folder(tmp_path, "gemma3")
    for backend in ("hf", "unsloth"):
        assert with_vision_modules(config, source, backend, images=True) is config


def test_an_unknown_model_type_is_refused_naming_it(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no vision modules known for model type 'llava'"):
        with_vision_modules(_config("tiny-gemma3mm"), _model_folder(tmp_path, "llava"), "unsloth", images=True)

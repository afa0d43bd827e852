"""Model presets and `TrainConfig`: defaults, overrides and the errors users see."""

from __future__ import annotations

import pytest

from trainkit_core.errors import UsageError
from trainkit_core.models.presets import PRESETS, TINY_BASE_MODEL, chat_format_for_model, get_preset
from trainkit_core.settings import Settings
from trainkit_core.training.config import TrainConfig


def test_sizes_map_to_models_and_gpus() -> None:
    assert {name: p.gpu for name, p in PRESETS.items()} == {
        "tiny": "",
        "4b": "A10G",
        "12b": "A100",
        "31b": "A100-80GB",
        "e2b": "A10G",
        "e4b": "A10G",
        "26b-a4b": "A100-80GB",
    }
    assert PRESETS["e2b"].base_model == "google/gemma-4-E2B-it"
    assert PRESETS["26b-a4b"].base_model == "google/gemma-4-26B-A4B-it"
    assert all(PRESETS[name].chat_format == "gemma4" for name in ("e2b", "e4b", "26b-a4b"))
    assert PRESETS["tiny"].base_model == TINY_BASE_MODEL
    assert PRESETS["4b"].unsloth_model == "unsloth/gemma-3-4b-it-unsloth-bnb-4bit"
    assert PRESETS["31b"].base_model == "google/gemma-4-31B-it"
    assert PRESETS["31b"].chat_format == "gemma4"
    assert PRESETS["12b"].chat_format == "gemma3"


def test_unknown_size_lists_the_known_ones() -> None:
    with pytest.raises(UsageError, match="tiny, 4b, 12b, 31b"):
        get_preset("70b")


def test_resolve_fills_preset_defaults_and_keeps_given_values() -> None:
    config = TrainConfig(dataset="demo", learning_rate=5e-3).resolve()
    assert config.model_size == "tiny"
    assert config.steps == 400 and config.batch_size == 16 and config.lora_r == 8
    assert config.learning_rate == 5e-3
    assert config.chat_format == "gemma3"


def test_gpu_presets_train_an_epoch_by_default_on_frozen_weights() -> None:
    """A GPU preset's length is one epoch whatever the dataset's size; --steps still wins.

    Only tiny trains whole modules (its random embeddings and head); the GPU presets stay
    LoRA on frozen weights. Tiny keeps its length in steps (its CPU time is bounded).
    """
    for size in ("4b", "12b", "31b"):
        config = TrainConfig(dataset="demo", model_size=size).resolve()
        assert (config.steps, config.epochs) == (None, 1.0)
        assert TrainConfig(dataset="demo", model_size=size, steps=60).resolve().steps == 60
        assert TrainConfig(dataset="demo", model_size=size, epochs=3).resolve().epochs == 3
        assert config.modules_to_save == []
    assert (TrainConfig(dataset="demo").resolve().steps, TrainConfig(dataset="demo").resolve().epochs) == (400, None)
    assert TrainConfig(dataset="demo", base_model="google/gemma-3-1b-it").resolve().modules_to_save == []
    assert TrainConfig(dataset="demo").resolve().modules_to_save == ["embed_tokens", "lm_head", "q_norm", "k_norm"]
    assert TrainConfig(dataset="demo", modules_to_save=[]).resolve().modules_to_save == []


def test_trainkit_gpu_overrides_every_size(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRAINKIT_GPU", "H100")
    gpu = Settings.from_env().compute.gpu
    for size in PRESETS:
        assert TrainConfig(dataset="demo", model_size=size).resolve(gpu_override=gpu).gpu == "H100"
    assert TrainConfig(dataset="demo", model_size="12b").resolve().gpu == "A100"


def test_any_hugging_face_id_instead_of_a_preset() -> None:
    config = TrainConfig(dataset="demo", base_model="google/gemma-4-E4B-it").resolve()
    assert config.resolved_base_model == "google/gemma-4-E4B-it"
    assert config.chat_format == "gemma4"
    assert config.preset_name == ""
    assert chat_format_for_model("google/gemma-3-1b-it") == "gemma3"


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"dataset": "Demo!"}, "dataset"),
        ({"dataset": "demo", "steps": 0}, "steps"),
        ({"dataset": "demo", "learning_rate": -1}, "learning_rate"),
        ({"dataset": "demo", "model_size": "huge"}, "model_size: unknown model size 'huge'"),
        ({"dataset": "demo", "model_size": "4b", "base_model": "google/gemma-3-4b-it"}, "not both"),
        ({"dataset": "demo", "steps": 5, "epochs": 1}, "steps or epochs"),
        ({"dataset": "demo", "base_model": "not an id"}, "base_model"),
        ({"dataset": "demo", "lora_rank": 8}, "lora_rank: unknown field"),
        ({"dataset": "demo", "backend": "jax"}, "backend"),
        (
            {"dataset": "demo", "modules_to_save": ["lm_head; rm"]},
            "modules_to_save: 'lm_head; rm' is not a module name",
        ),
    ],
)
def test_invalid_config_names_the_field(fields: dict[str, object], message: str) -> None:
    with pytest.raises(UsageError, match="invalid training config") as err:
        TrainConfig.parse(fields)
    assert message in str(err.value)


def test_every_preset_asks_for_host_memory() -> None:
    """A provider that reserves host memory (Ray) places each size with what its loading needs."""
    from trainkit_core.plugins.placement import HOST_MEMORY_GB

    assert set(HOST_MEMORY_GB) == set(PRESETS)

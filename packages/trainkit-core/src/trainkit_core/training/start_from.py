"""`--from trained/<id>`: training on top of a trained model, checked before anything starts.

The new run keeps the trained model's base and chat format and continues its adapter
(the LoRA rank, alpha and fully trained modules are the adapter's, so they are taken
from its card); a run asked for on another base is refused, because the adapter's
weights only mean something on the base they were trained on. The tiny preset's
tokenizer is built from its first dataset, so the job loads the tokenizer saved with
the trained model instead of building one.
"""

from __future__ import annotations

import json
from typing import Any

from trainkit_core.errors import NotFoundError, UsageError
from trainkit_core.training.config import TrainConfig

#: What a run started from a trained model takes from that model's card (the adapter's shape).
ADAPTER_FIELDS = ("lora_r", "lora_alpha", "modules_to_save", "chat_format")


def read_source_card(provider: Any, from_model: str) -> dict[str, Any]:
    """The `trained_model.json` of `from_model` on the provider's models volume (checked to hold an adapter)."""
    from trainkit_core.models.trained.paths import CARD_FILE, check_model_path

    volume = provider.volume("models")
    ref = check_model_path(from_model, volume)
    path = f"{ref.path}/{CARD_FILE}"
    if not volume.exists(path):
        path = f"{ref.run_dir}/{CARD_FILE}"
    try:
        card = json.loads(volume.read_bytes(path))
    except (ValueError, UnicodeDecodeError) as exc:
        raise UsageError(f"--from {from_model}: its {CARD_FILE} is not valid JSON ({exc})") from None
    if not isinstance(card, dict) or not card.get("base_model"):
        raise NotFoundError(f"--from {from_model}: its {CARD_FILE} names no base model")
    return card


def apply_source(config: TrainConfig, card: dict[str, Any]) -> TrainConfig:
    """`config` on the source's base (same preset or id), with the adapter's shape; `UsageError` on another base."""
    found = card.get("config")
    source_config: dict[str, Any] = found if isinstance(found, dict) else {}
    source_base = str(card["base_model"])
    preset = str(card.get("preset") or "")
    asked = config.resolved_base_model if (config.model_size or config.base_model) else None
    if asked is not None and asked != source_base:
        raise UsageError(
            f"--from {config.from_model} was trained on {source_base!r}, not on {asked!r}: "
            "its adapter only fits the base it was trained on",
            hint="leave out --model-size/--base-model to train on its base",
        )
    update: dict[str, Any] = {}
    if not config.model_size and not config.base_model:
        if preset:
            update["model_size"] = preset
        else:
            update["base_model"] = source_base
    for name in ADAPTER_FIELDS:
        value = source_config.get(name)
        if value is None:
            continue
        given = getattr(config, name)
        if given is not None and given != value:
            raise UsageError(
                f"--from {config.from_model}: {name} is {value!r} in its adapter; a run on top of it cannot use {given!r}"
            )
        update[name] = value
    return config.model_copy(update=update)

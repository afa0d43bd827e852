"""What an image run adds to the train job: the vision modules it trains, its rows, its collator and mask check.

The batching itself (`trainkit_core.datasets.vision_collator`) is shared with inference and
evals; this module holds what only training needs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from trainkit_core.datasets.vision_collator import VisionCollator, check_vision_mask
from trainkit_core.errors import UsageError
from trainkit_core.models.chat_format import ChatFormat

#: What `finetune_vision_layers` trains in full beside the LoRA adapter, per model type
#: (the module names of transformers' Gemma 3 and Gemma 4 multimodal classes).
VISION_MODULES = {"gemma3": ("vision_tower", "multi_modal_projector"), "gemma4": ("vision_tower", "embed_vision")}
#: The audio tower and its projection into the language model (Gemma 4 E2B/E4B), trained in full under
#: `finetune_audio_layers` (hf backend) as the vision modules are.
AUDIO_MODULES = {"gemma4": ("audio_tower", "embed_audio")}
#: What the unsloth backend trains in full beside Unsloth's LoRA on the vision layers: what
#: its LoRA cannot reach. Gemma 3's projector is a weight matrix, not a `Linear` (and starts
#: at zero in the twin, where it would keep every gradient from the tower); Gemma 4's
#: `embed_vision` projection is a `Linear` that Unsloth's pattern already targets.
UNSLOTH_FULL_VISION_MODULES: dict[str, tuple[str, ...]] = {"gemma3": ("multi_modal_projector",), "gemma4": ()}


def has_images(records: Sequence[Mapping[str, Any]]) -> bool:
    """Whether any message of `records` (OpenAI form) holds an image part."""
    return _has_part(records, ("image_url",))


def has_audio(records: Sequence[Mapping[str, Any]]) -> bool:
    """Whether any message of `records` holds an audio part."""
    return _has_part(records, ("input_audio",))


def has_media(records: Sequence[Mapping[str, Any]]) -> bool:
    """Whether `records` need the processor's path: any image or audio part."""
    return _has_part(records, ("image_url", "input_audio"))


def _has_part(records: Sequence[Mapping[str, Any]], kinds: tuple[str, ...]) -> bool:
    return any(
        isinstance(m.get("content"), list) and any(p.get("type") in kinds for p in m["content"])
        for record in records
        for m in record["messages"]
    )


def as_rows(records: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    """Records as one JSON column: Arrow cannot hold contents that are strings in one message and lists in another."""
    import json

    return [{"record": json.dumps(record)} for record in records]


def vision_modules(model_type: str, backend: str = "hf") -> list[str]:
    """The vision modules `backend` trains in full (`modules_to_save`) under `finetune_vision_layers`."""
    table = UNSLOTH_FULL_VISION_MODULES if backend == "unsloth" else VISION_MODULES
    if model_type not in table:
        raise UsageError(f"finetune_vision_layers: no vision modules known for model type {model_type!r}")
    return list(table[model_type])


def with_vision_modules(config: Any, source: str, backend: str, images: bool, audio: bool = False) -> Any:
    """`config` as `backend` loads the model for this run's data.

    A text run trains no vision layer, whatever the preset says. On an image run with
    `finetune_vision_layers`, hf trains the vision tower and projector in full (added to
    `modules_to_save`, saved with the adapter); unsloth takes the switch as it is (LoRA on
    the tower, `training.backends.load_unsloth`) and trains in full only what that LoRA
    cannot reach (`UNSLOTH_FULL_VISION_MODULES`). An audio run with `finetune_audio_layers`
    trains the audio tower and its projection in full likewise (hf backend only).
    """
    update: dict[str, Any] = {}
    if config.finetune_vision_layers and not images:
        update["finetune_vision_layers"] = False
    if config.finetune_audio_layers and not audio:
        update["finetune_audio_layers"] = False
    config = config.model_copy(update=update) if update else config
    if not (config.finetune_vision_layers or config.finetune_audio_layers):
        return config
    if config.finetune_audio_layers and backend == "unsloth":
        raise UsageError(
            "finetune_audio_layers trains the audio tower with the hf backend only; "
            "train with --backend hf, or --no-finetune-audio-layers"
        )
    from trainkit_core.training.backends import model_kind

    model_type = model_kind(source).model_type
    wanted = vision_modules(model_type, backend) if config.finetune_vision_layers else []
    if config.finetune_audio_layers:
        if model_type not in AUDIO_MODULES:
            raise UsageError(f"finetune_audio_layers: no audio modules known for model type {model_type!r}")
        wanted += AUDIO_MODULES[model_type]
    extra = [name for name in wanted if name not in (config.modules_to_save or [])]
    return config.model_copy(update={"modules_to_save": [*(config.modules_to_save or []), *extra]})


def prepare_vision(
    run: Any, source: str, fmt: ChatFormat, records: Sequence[Mapping[str, Any]], config: Any
) -> tuple[Any, VisionCollator, list[dict[str, str]]]:
    """(processor, collator, rows) of an image or audio run; the loss mask proved on its first such example first."""
    from trainkit_core.models.processors import load_processor

    processor = load_processor(source)
    if processor is None:
        raise UsageError(
            f"the dataset has images or audio, but {config.resolved_base_model} is a text-only model (no processor); "
            "use a multimodal preset (4b, 12b, 31b; for audio e2b, e4b) or remove those parts"
        )
    if has_audio(records) and getattr(processor, "feature_extractor", None) is None:
        raise UsageError(
            f"the dataset has audio, but {config.resolved_base_model} has no audio tower; use e2b or e4b (Gemma 4's audio "
            "models), or remove the audio parts"
        )
    processor.tokenizer.chat_template = fmt.chat_template  # as the text tokenizer saved beside it
    if processor.tokenizer.pad_token is None:
        processor.tokenizer.pad_token = processor.tokenizer.eos_token
    first = next(r for r in records if has_media([r]))
    summary = check_vision_mask(processor, fmt, first, keep_thinking=config.keep_thinking)
    run.events.append("log", message="loss mask checked on the processor's output", **summary)
    collator = VisionCollator(processor, fmt, max_length=config.max_seq_length, keep_thinking=config.keep_thinking)
    return processor, collator, as_rows(records)


def vision_optimizer(model: Any, config: Any) -> Any:
    """AdamW with the vision tower and projector at `vision_learning_rate`, or None (the trainer builds its own).

    For the hf backend, which trains them in full; Unsloth's LoRA on the tower keeps
    the trainer's optimizer, as its notebooks do.

    Why: a twin's tower starts random and trains in full; at the LoRA rate it only ever
    learned colours (the shapes demo, docs/tutorials/images.md). The trainer still
    builds the schedule, which scales both groups alike.
    """
    if not ((config.finetune_vision_layers or config.finetune_audio_layers) and config.vision_learning_rate):
        return None
    import torch

    names = {name for table in (VISION_MODULES, AUDIO_MODULES) for modules in table.values() for name in modules}
    vision: list[Any] = []
    rest: list[Any] = []
    for name, parameter in model.named_parameters():
        if parameter.requires_grad:
            (vision if names & set(name.split(".")) else rest).append(parameter)
    if not vision:
        return None
    groups = [
        {"params": rest, "lr": config.learning_rate},
        {"params": vision, "lr": config.vision_learning_rate},
    ]
    return torch.optim.AdamW(groups, lr=config.learning_rate, weight_decay=config.weight_decay or 0.0)

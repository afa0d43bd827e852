"""What a training run leaves on the models volume, and how to find its base model again.

::

    trained/<run id>/                          the result (written when the run ends)
        adapter_config.json                    peft LoRA adapter
        adapter_model.safetensors
        tokenizer.json, tokenizer_config.json, chat_template.jinja, ...   the tokenizer
        trained_model.json                     how it was made (written last)
        checkpoints/<step, 8 digits>/          every `save_every` steps
            adapter files, tokenizer files, trained_model.json ("step" set)
            optimizer.pt, scheduler.pt, rng_state.pth, trainer_state.json, training_args.bin
            done                               written last: only then is the checkpoint complete
    runs/<run id>/record.json, events.jsonl    the run's history (`TrainingRun.write_history`)

`trained_model.json` holds: run_id, base_model (preset base, Hugging Face id, model
folder or ``hf-cache:FOLDER``), base_model_path (for tiny and the twins: their folder
relative to the hf-cache volume),
preset, chat_format, dataset_id, dataset_hash, config (resolved), metrics, versions
(libraries), created_at, backend, step (checkpoints only). Inference reads it and
calls `resolve_base_model(card, hf_cache_dir)` to get what `from_pretrained` loads.
No heavy imports here.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

from trainkit_core.models.presets import TINY_BASE_MODEL
from trainkit_core.models.trained.paths import trained_dir

CARD_FILE = "trained_model.json"
DONE_FILE = "done"
LIBRARIES = ("trainkit-core", "torch", "transformers", "peft", "trl", "accelerate", "datasets", "tokenizers", "unsloth")


def checkpoint_path(run_id: str, step: int) -> str:
    """A checkpoint's folder, relative to the models volume."""
    return f"{trained_dir(run_id)}/checkpoints/{step:08d}"


def library_versions() -> dict[str, str]:
    found = {}
    for name in LIBRARIES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found


def make_card(
    *,
    run_id: str,
    base_model: str,
    base_model_path: str,
    preset: str,
    chat_format: str,
    dataset_id: str,
    dataset_hash: str,
    config: Mapping[str, Any],
    backend: str,
    metrics: Mapping[str, Any] | None = None,
    step: int | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The content of `trained_model.json`."""
    card: dict[str, Any] = {
        "run_id": run_id,
        "base_model": base_model,
        "base_model_path": base_model_path,
        "preset": preset,
        "chat_format": chat_format,
        "dataset_id": dataset_id,
        "dataset_hash": dataset_hash,
        "config": dict(config),
        "metrics": dict(metrics or {}),
        "versions": library_versions(),
        "created_at": time.time(),
        "backend": backend,
        "step": step,
    }
    card.update(extra or {})
    return card


def write_card(folder: Path, card: Mapping[str, Any]) -> None:
    tmp = Path(folder) / f".tmp-{CARD_FILE}"
    tmp.write_text(json.dumps(card, indent=2, default=str))
    tmp.replace(Path(folder) / CARD_FILE)


def resolve_base_model(card: Any, hf_cache_dir: Path | None) -> str:
    """What `from_pretrained` loads for a recorded base model.

    `card` is a `trained_model.json` as a dict or an object with `base_model` (and
    optionally `base_model_path`). The tiny preset's and the twins' bases are folders on
    the hf-cache volume, built again identically if the cache was emptied; a model
    folder is checked to still hold a config.json; any other base is its Hugging Face
    id, which `from_pretrained` finds in `HF_HOME` (the hf-cache volume).
    """
    get = card.get if isinstance(card, Mapping) else lambda key, default=None: getattr(card, key, default)
    base = str(get("base_model", ""))
    if base == TINY_BASE_MODEL:
        from trainkit_core.models.tiny_model import ensure_tiny_base

        return str(ensure_tiny_base(hf_cache_dir))
    from trainkit_core.models.twins import TWINS, ensure_twin_base

    if base in TWINS:
        return str(ensure_twin_base(base, hf_cache_dir))
    from trainkit_core.models.base_models import local_path, read_folder_config

    folder = local_path(base, _hf_home(hf_cache_dir))
    if folder is not None:
        read_folder_config(folder, shown=base)  # a clear error for a folder that went missing
        return str(folder)
    return base


def base_model_path(base_model: str) -> str:
    """The folder of a locally built base (tiny, a twin) relative to the hf-cache volume; "" for others."""
    from trainkit_core.models.twins import TWINS

    if base_model == TINY_BASE_MODEL:
        from trainkit_core.models.tiny_model import TINY_BASE_PATH

        return TINY_BASE_PATH
    twin = TWINS.get(base_model)
    return twin.path if twin is not None else ""


def _hf_home(hf_cache_dir: Path | None) -> Path:
    import os

    if hf_cache_dir is not None:
        return Path(hf_cache_dir)
    return Path(os.environ.get("HF_HOME") or Path.home() / ".cache" / "huggingface")

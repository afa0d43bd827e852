"""Where a base model comes from, and what kind of model it is. No heavy imports.

`--base-model` takes one of three forms:

- ``owner/name``: a Hugging Face id, found in `HF_HOME` (the hf-cache volume) or downloaded;
- ``/absolute/folder``: a model on the disk of the machine the job runs on (one the user
  has, or a merged export); only on providers whose jobs see the starting machine's
  files (`Capabilities.local_files`: the local provider);
- ``hf-cache:relative/folder``: a folder on the hf-cache volume, on any provider.

A folder must hold a ``config.json`` naming the model's type. Whether a model is
text-only or multimodal (and which towers it has) is read from that configuration
(`describe_config`), never guessed from the form of its source. The chat format of a
folder is read from its ``model_type`` (Gemma 4 types use ``gemma4``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from trainkit_core.errors import UsageError

HF_CACHE_PREFIX = "hf-cache:"
CONFIG_FILE = "config.json"
#: Sub-configurations that mean a tower beside the language model.
TOWERS = ("vision_config", "audio_config")


def is_folder(base_model: str) -> bool:
    """An absolute folder on the job's machine."""
    return base_model.startswith("/")


def is_hf_cache_path(base_model: str) -> bool:
    return base_model.startswith(HF_CACHE_PREFIX)


def check_text(value: str) -> str:
    """Check the text of a `--base-model`; `ValueError` saying what is wrong (pydantic turns it into a field error)."""
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in value):
        raise ValueError(f"{value!r} contains a control character")
    if is_folder(value) or is_hf_cache_path(value):
        path = value.removeprefix(HF_CACHE_PREFIX)
        parts = PurePosixPath(path).parts
        if ".." in parts:
            raise ValueError(f"{value!r}: '..' is not allowed in a model folder")
        if is_hf_cache_path(value) and (not path or path.startswith("/")):
            raise ValueError(f"{value!r}: give a folder relative to the hf-cache volume, e.g. hf-cache:models/my-model")
        return value.rstrip("/") or value
    parts_id = value.split("/")
    if len(parts_id) != 2 or not all(parts_id) or any(c.isspace() for c in value) or ".." in value:
        raise ValueError(
            f"{value!r} is not a Hugging Face model id (owner/name), an absolute folder or hf-cache:FOLDER"
        )
    return value


def parse_config(raw: bytes | str, *, where: str) -> dict[str, Any]:
    """A model's config.json as a dict; `UsageError` naming `where` when it is not one."""
    try:
        data = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"{where} is not valid JSON: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("model_type"), str):
        raise UsageError(f"{where} does not name a model_type: it is not a transformers model configuration")
    return data


def read_folder_config(folder: Path, *, shown: str | None = None) -> dict[str, Any]:
    """The config.json of a model folder; `UsageError` for a missing folder, a file, or no config.json."""
    shown = shown or str(folder)
    if not folder.exists():
        raise UsageError(f"base model folder {shown!r} does not exist")
    if not folder.is_dir():
        raise UsageError(f"base model {shown!r} is not a folder")
    config = folder / CONFIG_FILE
    if not config.is_file():
        raise UsageError(
            f"base model folder {shown!r} has no {CONFIG_FILE}: it is not a saved model",
            hint="save one with model.save_pretrained(folder) (and the tokenizer beside it)",
        )
    return parse_config(config.read_bytes(), where=f"{shown}/{CONFIG_FILE}")


def check_source(provider: Any, base_model: str) -> dict[str, Any] | None:
    """Before a run is created: the folder exists where the job will look, with a config.json.

    Returns that configuration (for the chat format), or None for a Hugging Face id
    (nothing to check before the job; it may not be downloaded yet).
    """
    if is_folder(base_model):
        if not getattr(provider.capabilities, "local_files", False):
            raise UsageError(
                f"base model {base_model!r} is a folder on this machine, but the {provider.name} "
                f"provider's jobs do not see this machine's files",
                hint="upload it to the hf-cache volume and give --base-model hf-cache:FOLDER",
            )
        return read_folder_config(Path(base_model))
    if is_hf_cache_path(base_model):
        relative = base_model.removeprefix(HF_CACHE_PREFIX)
        volume = provider.volume("hf-cache")
        where = f"{relative}/{CONFIG_FILE} on volume {volume.name!r}"
        if not volume.exists(relative):
            raise UsageError(f"base model folder {relative!r} does not exist on volume {volume.name!r}")
        if not volume.exists(f"{relative}/{CONFIG_FILE}"):
            raise UsageError(f"base model folder {relative!r} on volume {volume.name!r} has no {CONFIG_FILE}")
        return parse_config(volume.read_bytes(f"{relative}/{CONFIG_FILE}"), where=where)
    return None


def local_path(base_model: str, hf_cache_dir: Path) -> Path | None:
    """The folder a folder-form base model names inside a job; None for a Hugging Face id."""
    if is_folder(base_model):
        return Path(base_model)
    if is_hf_cache_path(base_model):
        return Path(hf_cache_dir) / base_model.removeprefix(HF_CACHE_PREFIX)
    return None


@dataclass(frozen=True)
class ModelKind:
    """What a model's configuration says about it."""

    model_type: str
    architectures: tuple[str, ...]
    towers: tuple[str, ...]  # "vision", "audio": the encoders beside the language model

    @property
    def multimodal(self) -> bool:
        return bool(self.towers)


def describe_config(config: dict[str, Any]) -> ModelKind:
    """Text-only or multimodal, from a configuration (config.json as a dict)."""
    towers = tuple(key.removesuffix("_config") for key in TOWERS if config.get(key))
    return ModelKind(
        model_type=str(config.get("model_type") or ""),
        architectures=tuple(config.get("architectures") or ()),
        towers=towers,
    )


def chat_format_for_config(config: dict[str, Any]) -> str:
    """``gemma4`` for Gemma 4 model types, else ``gemma3``."""
    return "gemma4" if str(config.get("model_type", "")).startswith("gemma4") else "gemma3"

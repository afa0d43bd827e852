"""Validating a model path given by a user: nothing outside `trained/` is ever read.

A model path names a trained model on the models volume: ``trained/<run id>`` (the
final adapter of a run) or ``trained/<run id>/checkpoints/<8-digit step>`` (one of
its checkpoints). `parse_model_path` checks the text alone, so a hostile path
(absolute, ``..``, percent-encoded, NUL bytes, odd unicode, a wrong id) is refused
before any file is touched. `check_model_path` then asks the volume whether the
model is there and holds an adapter; the volume refuses paths that resolve outside
it through symbolic links.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from trainkit_core.errors import NotFoundError, UsageError
from trainkit_core.ids import RUN_ID_PATTERN

if TYPE_CHECKING:
    from trainkit_core.plugins.hookspecs import Volume

#: The only shapes a model path may have.
MODEL_PATH_PATTERN = re.compile(
    r"^trained/(?P<run_id>run-[0-9]{8}-[0-9]{6}-[0-9a-f]{6})(?:/checkpoints/(?P<step>[0-9]{8}))?$"
)
MAX_MODEL_PATH = 200

#: What a model directory must hold. The adapter weights come in one of two files.
CARD_FILE = "trained_model.json"
ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = ("adapter_model.safetensors", "adapter_model.bin")
DONE_MARKER = "done"

_EXPECTED = "expected trained/<run id> or trained/<run id>/checkpoints/<8-digit step>"


def trained_dir(run_id: str) -> str:
    """Where a run's result lives on the models volume."""
    return f"trained/{run_id}"


@dataclass(frozen=True)
class ModelPath:
    """A model path that passed the checks: where the adapter is, which run made it."""

    path: str
    run_id: str
    step: int | None = None

    @property
    def run_dir(self) -> str:
        """The run's final model folder (the checkpoint's parent run for a checkpoint)."""
        return trained_dir(self.run_id)

    @property
    def is_checkpoint(self) -> bool:
        return self.step is not None


def parse_model_path(value: object) -> ModelPath:
    """Check the text of a model path; raises `UsageError` naming what is wrong.

    Touches no file: this runs before anything is read, on the client and in the job.
    """
    if not isinstance(value, str):
        raise UsageError(f"model path must be a string, got {type(value).__name__}")
    shown = repr(value[:80])
    if not value:
        raise UsageError(f"model path is empty; {_EXPECTED}")
    if len(value) > MAX_MODEL_PATH:
        raise UsageError(f"model path {shown}… is longer than {MAX_MODEL_PATH} characters; {_EXPECTED}")
    if "\x00" in value:
        raise UsageError(f"model path {shown} contains a NUL byte")
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in value):
        raise UsageError(f"model path {shown} contains a control character")
    if not value.isascii():
        raise UsageError(f"model path {shown} contains non-ASCII characters; {_EXPECTED}")
    if "%" in value:
        raise UsageError(f"model path {shown} contains '%': percent-encoded paths are refused; {_EXPECTED}")
    if "\\" in value:
        raise UsageError(f"model path {shown} contains a backslash; use '/'")
    if value.startswith(("/", "~")) or re.match(r"^[A-Za-z]:", value):
        raise UsageError(f"model path {shown} is absolute; give a path on the models volume, {_EXPECTED}")
    if re.search(r"^[A-Za-z][A-Za-z0-9+.-]*://", value):
        raise UsageError(f"model path {shown} is a URL; {_EXPECTED}")
    parts = value.split("/")
    if ".." in parts:
        raise UsageError(f"model path {shown} contains '..'; {_EXPECTED}")
    if "." in parts or "" in parts[:-1]:
        raise UsageError(f"model path {shown} has empty or '.' segments; {_EXPECTED}")
    text = value[:-1] if value.endswith("/") else value
    match = MODEL_PATH_PATTERN.fullmatch(text)
    if match is None:
        if parts[0] != "trained":
            raise UsageError(f"model path {shown} is not under trained/; {_EXPECTED}")
        if len(parts) > 1 and not RUN_ID_PATTERN.fullmatch(parts[1]):
            raise UsageError(f"model path {shown}: {parts[1]!r} is not a run id (run-YYYYMMDD-HHMMSS-xxxxxx)")
        raise UsageError(f"model path {shown} is malformed; {_EXPECTED}")
    step = match.group("step")
    return ModelPath(text, match.group("run_id"), int(step) if step is not None else None)


def check_model_path(value: object, volume: Volume) -> ModelPath:
    """Parse `value`, then check on the models volume that it holds an adapter.

    Raises `UsageError` for a malformed path or one leading out of the volume, and
    `NotFoundError` when the model or its adapter is missing.
    """
    ref = parse_model_path(value)
    if not volume.exists(ref.path):
        what = f"checkpoint {ref.step:08d} of run {ref.run_id}" if ref.is_checkpoint else f"run {ref.run_id}"
        raise NotFoundError(
            f"no trained model at {ref.path!r} ({what}) on volume {volume.name!r}",
            hint="trainkit models lists the trained models",
        )
    if ref.is_checkpoint and not volume.exists(f"{ref.path}/{DONE_MARKER}"):
        raise NotFoundError(f"checkpoint {ref.path!r} is incomplete (no '{DONE_MARKER}' marker)")
    missing = []
    if not volume.exists(f"{ref.path}/{ADAPTER_CONFIG}"):
        missing.append(ADAPTER_CONFIG)
    if not any(volume.exists(f"{ref.path}/{name}") for name in ADAPTER_WEIGHTS):
        missing.append(" or ".join(ADAPTER_WEIGHTS))
    if not volume.exists(f"{ref.path}/{CARD_FILE}") and not volume.exists(f"{ref.run_dir}/{CARD_FILE}"):
        missing.append(CARD_FILE)
    if missing:
        raise NotFoundError(
            f"{ref.path!r} on volume {volume.name!r} holds no usable adapter: missing {', '.join(missing)}"
        )
    return ref


def local_model_dir(ref: ModelPath, root: Path) -> Path:
    """The folder of a checked model under a mounted models volume, refusing symlinks out.

    Every file directly in the model folder must resolve inside `root`: a weights file
    that is a link to somewhere else is refused like a path that leads there.
    """
    real_root = os.path.realpath(root)
    folder = Path(root) / ref.path
    for candidate in [folder, *sorted(folder.iterdir())]:
        real = os.path.realpath(candidate)
        if real != real_root and not real.startswith(real_root + os.sep):
            raise UsageError(f"model path {ref.path!r}: {candidate.name!r} resolves outside the models volume")
    return folder

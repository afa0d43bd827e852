"""Trained models on the models volume: validating model paths, reading their
descriptions and listing them. No heavy imports: the CLI and API use this directly.

The names below are imported on first use (PEP 562 ``__getattr__``), so a module that
needs only the path rules (`trainkit_core.models.trained.paths`, which `trainkit --help`
reaches through the export command's options) does not pay for pydantic, which the
model card's schema imports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trainkit_core.lazy import lazy_attributes

if TYPE_CHECKING:
    from trainkit_core.models.trained.card import TrainedModelCard, read_card
    from trainkit_core.models.trained.listing import TrainedModel, default_model_for_preset, list_trained_models
    from trainkit_core.models.trained.paths import ModelPath, check_model_path, local_model_dir, parse_model_path

#: Public name -> the module that defines it.
_LAZY = {
    "ModelPath": "trainkit_core.models.trained.paths",
    "check_model_path": "trainkit_core.models.trained.paths",
    "local_model_dir": "trainkit_core.models.trained.paths",
    "parse_model_path": "trainkit_core.models.trained.paths",
    "TrainedModelCard": "trainkit_core.models.trained.card",
    "read_card": "trainkit_core.models.trained.card",
    "TrainedModel": "trainkit_core.models.trained.listing",
    "default_model_for_preset": "trainkit_core.models.trained.listing",
    "list_trained_models": "trainkit_core.models.trained.listing",
}

__all__ = [
    "ModelPath",
    "TrainedModel",
    "TrainedModelCard",
    "check_model_path",
    "default_model_for_preset",
    "list_trained_models",
    "local_model_dir",
    "parse_model_path",
    "read_card",
]


__getattr__, __dir__ = lazy_attributes(__name__, _LAZY, globals())

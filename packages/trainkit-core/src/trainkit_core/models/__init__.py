"""Trained models on the models volume: validating model paths, reading their
descriptions and listing them. No heavy imports: the CLI and API use this directly."""

from __future__ import annotations

from trainkit_core.models.card import TrainedModelCard, read_card
from trainkit_core.models.listing import TrainedModel, default_model_for_preset, list_trained_models
from trainkit_core.models.paths import ModelPath, check_model_path, local_model_dir, parse_model_path

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

"""The vision tower and projector train at `vision_learning_rate`, the rest at `learning_rate`.

A small real torch module with the Gemma 3 module names stands in for the twin (the
optimizer only sees parameter names and flags).
"""

from __future__ import annotations

from typing import Any

import pytest

from trainkit_core.training.config import TrainConfig
from trainkit_core.training.vision import vision_optimizer

pytestmark = pytest.mark.ml


def _model() -> Any:
    """A stand-in with the twins' module names (torch imported here: the light sessions collect this file)."""
    import torch

    model = torch.nn.Module()
    model.vision_tower = torch.nn.Linear(2, 2)
    model.multi_modal_projector = torch.nn.Linear(2, 2)
    model.language_model = torch.nn.Linear(2, 2)
    model.frozen = torch.nn.Linear(2, 2).requires_grad_(False)
    return model


def test_the_twin_default_puts_the_tower_and_projector_in_their_own_group() -> None:
    config = TrainConfig.parse(dataset="shapes", model_size="tiny-gemma3mm").resolve()
    assert config.vision_learning_rate == 3e-2 and config.learning_rate == 3e-3
    model = _model()
    optimizer = vision_optimizer(model, config)
    rest, vision = optimizer.param_groups
    assert rest["lr"] == 3e-3 and vision["lr"] == 3e-2
    ids = lambda group: {id(p) for p in group["params"]}  # noqa: E731
    assert ids(vision) == {id(p) for m in (model.vision_tower, model.multi_modal_projector) for p in m.parameters()}
    assert ids(rest) == {id(p) for p in model.language_model.parameters()}  # frozen ones left out


def test_without_a_vision_rate_or_vision_layers_the_trainer_builds_its_own() -> None:
    plain = TrainConfig.parse(dataset="shapes", model_size="tiny").resolve()
    assert plain.vision_learning_rate is None and vision_optimizer(_model(), plain) is None
    off = TrainConfig.parse(dataset="shapes", model_size="tiny-gemma3mm", finetune_vision_layers=False).resolve()
    assert vision_optimizer(_model(), off) is None

"""`TRAINKIT_WANDB_SECRET`: the W&B key's secret is attached to the training functions only (real app, offline)."""

from __future__ import annotations

import pytest

from trainkit_core.settings import Settings
from trainkit_modal.app import build_app


def test_the_wandb_secret_goes_to_training_functions_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRAINKIT_WANDB_SECRET", "wandb")
    built = build_app(Settings.from_env())
    assert built.spec.wandb_secret == "wandb"
    for name, fs in built.spec.functions.items():
        if fs.kind == "class":
            continue
        secrets = built.objects[name].info().secrets
        wanted = ["modal.Secret.from_name('wandb')"] if fs.job == "train" else []
        assert secrets == wanted, name

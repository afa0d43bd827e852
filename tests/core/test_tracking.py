"""`report_to` plumbing of the train job, without training (torch-free)."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

from trainkit_core.errors import JobError, MissingExtraError
from trainkit_core.runs.training_run import TrainingRun
from trainkit_core.training.config import TrainConfig
from trainkit_core.training.job import _tracking

RUN = "run-20261201-010203-abcdef"


def test_tensorboard_writes_under_the_run_on_the_models_volume(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if importlib.util.find_spec("tensorboardX") is None and importlib.util.find_spec("tensorboard") is None:
        with pytest.raises(MissingExtraError, match="tensorboardX"):
            _tracking(TrainingRun(id=RUN), TrainConfig(dataset="demo", report_to="tensorboard"), tmp_path)
        return
    monkeypatch.setattr(os, "environ", os.environ.copy())  # the job sets variables for trl: keep them here
    run = TrainingRun(id=RUN)
    _tracking(run, TrainConfig(dataset="demo", report_to="tensorboard"), tmp_path)
    assert os.environ["TENSORBOARD_LOGGING_DIR"] == str(tmp_path / "runs" / RUN / "tensorboard")
    assert run.metadata["tensorboard_dir"] == f"runs/{RUN}/tensorboard"


def test_wandb_needs_the_package_and_a_key_or_offline_mode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = TrainConfig(dataset="demo", report_to="wandb")
    monkeypatch.setattr(os, "environ", os.environ.copy())
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.delenv("WANDB_MODE", raising=False)
    if importlib.util.find_spec("wandb") is None:
        with pytest.raises(MissingExtraError, match="wandb"):
            _tracking(TrainingRun(id=RUN), config, tmp_path)
        return
    with pytest.raises(JobError, match="WANDB_API_KEY"):
        _tracking(TrainingRun(id=RUN), config, tmp_path)
    monkeypatch.setenv("WANDB_MODE", "offline")
    for name in ("WANDB_PROJECT", "WANDB_NAME", "WANDB_DIR"):
        monkeypatch.delenv(name, raising=False)
    _tracking(TrainingRun(id=RUN), config, tmp_path)
    assert os.environ["WANDB_NAME"] == RUN and os.environ["WANDB_DIR"] == str(tmp_path / "runs" / RUN)


def test_report_to_is_checked_with_the_config() -> None:
    with pytest.raises(ValueError, match="report_to"):
        TrainConfig(dataset="demo", report_to="mlflow")  # type: ignore[arg-type]
    assert TrainConfig(dataset="demo").resolve().report_to == "none"

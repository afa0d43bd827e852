"""The Modal app reads its timeouts and GPUs from core's placement table (`trainkit_core.plugins.placement`)."""

from __future__ import annotations

from typing import Any

import pytest

from trainkit_core.plugins.placement import placement_for
from trainkit_core.settings import Settings
from trainkit_modal import spec


@pytest.fixture
def settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> Settings:
    for key in ("TRAINKIT_GPU", "TRAINKIT_TRAIN_TIMEOUT_S"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("TRAINKIT_HOME", str(tmp_path))
    return Settings.from_env()


def test_the_modal_app_declares_the_placements_timeouts(settings: Settings) -> None:
    """The Modal provider declares per size what the placement says (no second table of timeouts)."""
    built = spec.routing_spec(settings)
    for name, fs in built.functions.items():
        if fs.cluster_size > 1:  # a run on several nodes: its GPU is the run's own, asked for per call
            assert fs.timeout_s == placement_for("train", {}, settings).timeout_s, name
            continue
        if fs.job in ("train", "eval", "export", "gpu_ping", "infer"):
            placed = placement_for(fs.job, {"model_size": fs.size}, settings)
            assert fs.timeout_s == placed.timeout_s, name
            assert (fs.gpu or None) == (f"{placed.gpu}:{placed.gpu_count}" if placed.gpu_count > 1 else placed.gpu), (
                name
            )

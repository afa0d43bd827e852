"""Asking for N GPUs and M nodes: one source of truth, placement data, refusals before any record.

`gpus` and a run's ``gpu`` of ``"H100:2"`` say the same thing and must agree; the placement a
third-party provider reads carries the count and the nodes; the local provider on this CPU
machine refuses ``--gpus 2`` before a run is recorded, pointing to ``--processes``.
"""

from __future__ import annotations

import pytest

from trainkit_core import get_provider
from trainkit_core.errors import UsageError
from trainkit_core.plugins.placement import Placement, placement_for
from trainkit_core.runs.training_run import RunStore
from trainkit_core.settings import Settings
from trainkit_core.training.config import TrainConfig
from trainkit_core.training.submit import start_run


def test_gpus_and_the_gpu_count_agree() -> None:
    assert TrainConfig.parse(dataset="demo", model_size="12b", gpus=2).resolve().gpu == "A100:2"
    resolved = TrainConfig.parse(dataset="demo", model_size="12b", gpu="H100:4").resolve()
    assert (resolved.gpu, resolved.gpus) == ("H100:4", 4)
    from_env = TrainConfig.parse(dataset="demo", model_size="12b").resolve(gpu_override="H100:2")
    assert (from_env.gpu, from_env.gpus) == ("H100:2", 2)
    assert TrainConfig.parse(dataset="demo").resolve().gpus == 1


def test_contradicting_gpu_counts_are_refused() -> None:
    with pytest.raises(UsageError, match=r"gpu 'H100:2' asks for 2 GPUs but gpus is 4"):
        TrainConfig.parse(dataset="demo", gpu="H100:2", gpus=4)
    with pytest.raises(UsageError, match="nodes"):
        TrainConfig.parse(dataset="demo", nodes=0)


def test_placement_carries_the_count_and_the_nodes() -> None:
    settings = Settings.from_env()
    placed = placement_for("train", {"model_size": "31b", "gpus": 4, "nodes": 2}, settings)
    assert (placed.gpu, placed.gpu_count, placed.nodes) == ("A100-80GB", 4, 2)
    assert Placement.from_dict(placed.as_dict()) == placed
    # Other jobs on the same model (eval, infer) run on one GPU of the kind.
    assert placement_for("eval", {"model_size": "31b", "gpus": 4, "nodes": 2}, settings).gpu_count == 1


def test_local_refuses_two_gpus_before_anything_is_recorded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # this machine shows CUDA no GPU, whatever it has
    provider = get_provider("local", Settings.from_env())
    assert provider.capabilities.max_gpus_per_node == 0 and provider.capabilities.max_nodes == 1
    with pytest.raises(UsageError, match=r"at most 0 GPU\(s\) per node; this one asks for 2") as refused:
        start_run(provider, {"dataset": "demo", "model_size": "tiny", "gpus": 2, "steps": 1})
    assert "--processes 2" in (refused.value.hint or "")
    with pytest.raises(UsageError, match=r"at most 1 node\(s\); this one asks for 2"):
        start_run(provider, {"dataset": "demo", "model_size": "tiny", "nodes": 2, "steps": 1})
    assert RunStore.for_provider(provider).list() == []

"""``--gpus`` and ``--nodes`` on `train`: refused on this CPU machine before any run is recorded."""

from __future__ import annotations

import pytest
from cli_helpers import run_main


def test_train_gpus_two_is_refused_on_a_machine_without_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    code, out = run_main("train", "--dataset", "demo", "--gpus", "2", "--steps", "1")
    assert code != 0
    assert "at most 0 GPU(s) per node; this one asks for 2" in out and "--processes 2" in out
    code, out = run_main("runs", "list", "--json")
    assert code == 0 and "run-" not in out


def test_gpus_and_gpu_count_that_disagree_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    code, out = run_main("train", "--dataset", "demo", "--gpu", "H100:2", "--gpus", "4", "--plan")
    assert code != 0 and "asks for 2 GPUs but gpus is 4" in out


def test_runs_show_says_how_many_gpus_and_nodes_a_run_asked_for() -> None:
    import time

    from trainkit_core import get_provider
    from trainkit_core.ids import new_run_id
    from trainkit_core.runs.training_run import RunStore, TrainingRun

    store = RunStore.for_provider(get_provider("local"))
    config = {"dataset": "demo", "model_size": "12b", "gpu": "A100:2", "gpus": 2, "nodes": 1}
    run = TrainingRun(id=new_run_id(), created_at=time.time(), status="pending", config=config)
    run.attach(store).save()
    code, out = run_main("runs", "show", run.id)
    assert code == 0 and "gpus 2 per node (A100:2), nodes 1" in out, out
    # What auto chose, by the job's own rule: 12b's 4-bit weights fit one A100 (ddp); in bf16 they do not.
    assert "strategy auto: ddp" in out, out
    bf16 = TrainingRun(
        id=new_run_id(), created_at=time.time(), status="pending", config={**config, "load_in_4bit": False}
    )
    bf16.attach(store).save()
    code, out = run_main("runs", "show", bf16.id)
    assert code == 0 and "strategy auto: fsdp" in out, out

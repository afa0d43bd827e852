"""``--gpus`` and ``--nodes`` on `train` (issue 44 item 1): refused on this CPU machine before any run is recorded."""

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

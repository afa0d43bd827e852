"""The plan of a GPU preset on the local provider says where it would really run.

From a folder outside the clone, with no datasets folder there: the demo dataset ships
inside trainkit-core (item 5).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_helpers import run_main

from trainkit_core.training.plan import cuda_device_name


def test_a_gpu_preset_on_local_is_planned_on_this_machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    code, out = run_main("train", "--dataset", "demo", "--model-size", "4b", "--plan", "--json")
    assert code == 0, out
    shown = json.loads(out)
    assert shown["provider"] == "local" and shown["model"] == "google/gemma-3-4b-it"
    assert shown["gpu"] != "A10G"
    [note] = [n for n in shown["notes"] if "no cloud GPUs" in n]
    assert "made for A10G" in note
    device = cuda_device_name()
    if device is None:  # the CPU: no figure to estimate with, and the way out is named
        assert shown["gpu"] == "cpu" and shown["gpus"] == 0
        assert shown["estimated_seconds"] is None and shown["estimated_cost_usd"] == 0.0  # free, however long
        assert "CPU" in note and "--provider modal" in note and "--model-size tiny" in note
    else:
        assert shown["gpu"] == device and device in note


def test_the_cpu_preset_on_local_has_no_such_note(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    code, out = run_main("train", "--dataset", "demo", "--plan", "--json")
    assert code == 0, out
    shown = json.loads(out)
    assert shown["gpu"] == "cpu" and shown["estimated_seconds"] > 0
    assert shown["dataset"] == "demo" and shown["examples"] > 0 and not (tmp_path / "datasets").exists()
    assert not [n for n in shown["notes"] if "no cloud GPUs" in n]
